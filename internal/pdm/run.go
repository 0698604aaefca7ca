package pdm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/nsrun"
	"github.com/rttscope/rttscope/internal/probe"
)

// Options are what `rttscope pdm` runs with.
type Options struct {
	Interfaces []string
	Netns      string // named network namespace of the interfaces ("" = here)
	TCMode     string // one of loader.TCModes ("" = auto)
	Config
	Duration time.Duration // 0 = until ctx ends
	// Interval between the records of --pdm-report interval.
	Interval time.Duration
	Output   *Writer
	Log      io.Writer // attach modes and the counters at exit
	// Ready, when set, is called once every interface is hooked (tests
	// start their traffic then).
	Ready func()
	// Done, when set, receives the counters at exit.
	Done func(Counters)
}

// Validate checks the options before anything is loaded.
func (o Options) Validate() error {
	if len(o.Interfaces) == 0 {
		return errors.New("no interface: give at least one -i IFNAME (or --read FILE to decode a capture)")
	}
	if err := o.Config.Validate(); err != nil {
		return err
	}
	if o.Report == ReportInterval && o.Interval <= 0 {
		return fmt.Errorf("invalid --interval %v: want a positive duration", o.Interval)
	}
	return (loader.AttachOptions{TCMode: o.TCMode}).Validate()
}

// Run loads the PDM programs, attaches them to every interface, writes a
// record per PDM option seen until ctx ends (or the duration passes), and
// detaches. The counters go to Log at exit.
func Run(ctx context.Context, o Options) (err error) {
	if err := o.Validate(); err != nil {
		return err
	}
	objs, err := Load(o.Config)
	if err != nil {
		return err
	}
	defer func() { _ = objs.Close() }()
	var atts []*loader.Attachment
	defer func() {
		for _, a := range atts {
			if cerr := a.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	for _, name := range o.Interfaces {
		var a *loader.Attachment
		err := nsrun.Named(o.Netns, func() error {
			ifc, err := loader.Inspect(name)
			if err != nil {
				return err
			}
			if ifc.L3Only {
				return fmt.Errorf("%s: not an Ethernet interface (encapsulation %q): rttscope pdm needs Ethernet framing", name, ifc.Encap)
			}
			a, err = loader.AttachTC(ifc, objs.PdmTcEgress, objs.PdmTcIngress, o.TCMode)
			return err
		})
		if err != nil {
			return err
		}
		atts = append(atts, a)
	}
	// Said once all are hooked: a failure stays the one line on stderr.
	for _, a := range atts {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "rttscope pdm: %s: %v\n", a.Iface.Name, a.Modes)
		}
	}
	if o.Ready != nil {
		o.Ready()
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	if o.Report == ReportInterval {
		err = objs.intervalLoop(ctx, o.Output, o.Interval)
	} else {
		err = objs.loop(ctx, o.Output)
	}
	if c, cerr := objs.ReadCounters(); cerr == nil {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "rttscope pdm: counters %v\n", c.Map())
		}
		if o.Done != nil {
			o.Done(c)
		}
	}
	return err
}

// loop writes the records of the ring buffer and sweeps idle state until
// ctx ends.
func (o *Objects) loop(ctx context.Context, w *Writer) error {
	rb, err := ringbuf.NewReader(o.PdmEvents)
	if err != nil {
		return fmt.Errorf("open PDM ring buffer: %w", err)
	}
	defer rb.Close()
	off := clockOffset()
	sweepEvery := max(time.Second, o.Config.Lifetime/2)
	nextSweep := time.Now().Add(sweepEvery)
	var rec ringbuf.Record
	var ev probe.PdmPdmEvent
	for ctx.Err() == nil {
		rb.SetDeadline(time.Now().Add(200 * time.Millisecond))
		err := rb.ReadInto(&rec)
		switch {
		case err == nil:
			if decodeEvent(rec.RawSample, &ev) {
				if werr := w.Write(NewRecord(&ev, off)); werr != nil {
					return werr
				}
			}
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
		default:
			return fmt.Errorf("read PDM ring buffer: %w", err)
		}
		if ferr := w.Flush(); ferr != nil {
			return ferr
		}
		if time.Now().After(nextSweep) {
			if _, err := o.Sweep(monoNow()); err != nil {
				return err
			}
			nextSweep = time.Now().Add(sweepEvery)
		}
	}
	return w.Flush()
}

// intervalSettle is how long Collect waits after starting an interval.
const intervalSettle = time.Millisecond

// intervalLoop writes the accumulators of each interval (and of the last,
// partial one at exit) and sweeps idle state until ctx ends.
func (o *Objects) intervalLoop(ctx context.Context, w *Writer, every time.Duration) error {
	sweepEvery := max(time.Second, o.Config.Lifetime/2)
	nextSweep := time.Now().Add(sweepEvery)
	start := time.Now()
	if _, err := o.Collect(0); err != nil { // leftovers of no interval
		return err
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var done bool
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		accs, err := o.Collect(intervalSettle)
		if err != nil {
			return err
		}
		end := time.Now()
		for i := range accs {
			if err := w.Write(NewIntervalRecord(&accs[i], end, end.Sub(start))); err != nil {
				return err
			}
		}
		start = end
		if err := w.Flush(); err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(nextSweep) {
			if _, err := o.Sweep(monoNow()); err != nil {
				return err
			}
			nextSweep = time.Now().Add(sweepEvery)
		}
	}
}

// decodeEvent fills e from a ring buffer sample (the layout of struct
// pdm_event, checked by a test against the generated type).
func decodeEvent(b []byte, e *probe.PdmPdmEvent) bool {
	if len(b) < 72 {
		return false
	}
	ne := binary.NativeEndian
	e.Timestamp = ne.Uint64(b[0:])
	e.RoundTrip = ne.Uint64(b[8:])
	copy(e.Saddr[:], b[16:32])
	copy(e.Daddr[:], b[32:48])
	e.Sport = ne.Uint16(b[48:])
	e.Dport = ne.Uint16(b[50:])
	e.Ifindex = ne.Uint32(b[52:])
	e.Proto, e.Flags, e.ScaleDtlr, e.ScaleDtls = b[56], b[57], b[58], b[59]
	e.Psntp = ne.Uint16(b[60:])
	e.Psnlr = ne.Uint16(b[62:])
	e.Dtlr = ne.Uint16(b[64:])
	e.Dtls = ne.Uint16(b[66:])
	e.PairScale = b[68]
	e.PairDtlr = ne.Uint16(b[70:])
	return true
}

func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// clockOffset maps CLOCK_MONOTONIC (bpf_ktime_get_ns) to Unix time: the
// tightest of a few brackets of the wall clock between two monotonic
// readings (as the monitor does).
func clockOffset() int64 {
	var off int64
	best := int64(math.MaxInt64)
	for range 5 {
		var m1, wall, m2 unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1)
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &wall)
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m2)
		if gap := m2.Nano() - m1.Nano(); gap < best {
			best = gap
			off = wall.Nano() - (m1.Nano() + gap/2)
		}
	}
	return off
}
