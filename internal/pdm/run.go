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

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
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
	Reporting
	Duration time.Duration // 0 = until ctx ends
	// Output takes the records: per PDM option (WritePDM) or, with
	// --pdm-report interval, per 5-tuple and interval (WritePDMInterval).
	Output format.Writer
	Log    io.Writer // attach modes and the counters at exit
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
	if err := o.Reporting.Validate(); err != nil {
		return err
	}
	return (loader.AttachOptions{TCMode: o.TCMode}).Validate()
}

// Require checks, before anything is loaded, that w takes PDM records.
func Require(w format.Writer) error {
	if err := format.Require(w, format.PDMRecords); err != nil {
		return fmt.Errorf("rttscope pdm: %w", err)
	}
	return nil
}

// Run loads the PDM programs, attaches them to every interface, writes a
// record per PDM option seen until ctx ends (or the duration passes), and
// detaches. The counters go to Log at exit.
func Run(ctx context.Context, o Options) (err error) {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := Require(o.Output); err != nil {
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
	late, err := objs.loop(ctx, o.Output, o.every())
	if late > 0 && o.Log != nil {
		fmt.Fprintf(o.Log, "rttscope pdm: %d records arrived after their interval was written; counted in the next\n", late)
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
// ctx ends. With every > 0 it folds them into intervals of that length
// instead and writes those (the last, partial one at exit); late is then
// Aggregator.Late.
func (o *Objects) loop(ctx context.Context, w format.Writer, every time.Duration) (late uint64, err error) {
	rb, err := ringbuf.NewReader(o.PdmEvents)
	if err != nil {
		return 0, fmt.Errorf("open PDM ring buffer: %w", err)
	}
	defer rb.Close()
	r := &reader{rb: rb, w: w, off: clockOffset()}
	if every > 0 {
		r.agg = NewAggregator()
		r.start = monoNow()
		defer func() { late = r.agg.Late }()
	}
	sweepEvery := max(time.Second, o.Config.Lifetime/2)
	nextSweep := time.Now().Add(sweepEvery)
	nextInterval := time.Now().Add(every)
	nextFlush := time.Now().Add(flushEvery)
	busy := false // the last read found records
	for {
		done := ctx.Err() != nil
		wait := pollEvery
		if busy {
			// More may be waiting: no wakeup would say so.
			wait = 0
		}
		if every > 0 {
			wait = min(wait, time.Until(nextInterval))
		}
		rb.SetDeadline(time.Now().Add(wait))
		if done && every == 0 {
			// The records of runs still going at exit.
			if err := loader.WaitForPrograms(); err != nil {
				return 0, err
			}
		}
		n, err := r.read(done)
		if err != nil {
			return 0, err
		}
		busy = n > 0
		if every > 0 && (done || !time.Now().Before(nextInterval)) {
			if err := r.closeInterval(); err != nil {
				return 0, err
			}
			if nextInterval = nextInterval.Add(every); nextInterval.Before(time.Now()) {
				nextInterval = time.Now().Add(every) // fell behind: skip
			}
		}
		if done || !time.Now().Before(nextFlush) {
			if err := w.Flush(); err != nil || done {
				return 0, err
			}
			nextFlush = time.Now().Add(flushEvery)
		}
		if time.Now().After(nextSweep) {
			if _, err := o.Sweep(monoNow()); err != nil {
				return 0, err
			}
			nextSweep = time.Now().Add(sweepEvery)
		}
	}
}

// pollEvery is how often the run loop reads the ring buffer when it
// found it empty: the programs never wake it (BPF_RB_NO_WAKEUP), since a
// wakeup per record cost several µs of CPU (docs/pdm.md, Cost). After a
// read that found records it reads again at once. The 1 MiB ring holds
// 10 ms of 1.3 million records a second.
const pollEvery = 10 * time.Millisecond

// flushEvery is how often buffered output is written out, as the
// monitor does (the ring buffer is polled more often).
const flushEvery = 200 * time.Millisecond

// drainRing calls fn with every record in rb, without waiting for more.
func drainRing(rb *ringbuf.Reader, rec *ringbuf.Record, fn func(raw []byte) error) error {
	rb.SetDeadline(time.Unix(1, 0)) // passed: read what is there, then stop
	return readRing(rb, rec, fn)
}

// readRing calls fn with every record in rb until its deadline has passed
// and none is left.
func readRing(rb *ringbuf.Reader, rec *ringbuf.Record, fn func(raw []byte) error) error {
	for {
		err := rb.ReadInto(rec)
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil
		default:
			return fmt.Errorf("read PDM ring buffer: %w", err)
		}
		if err := fn(rec.RawSample); err != nil {
			return err
		}
	}
}

// reader turns ring buffer records into PDM records, written or folded.
type reader struct {
	rb    *ringbuf.Reader
	w     format.Writer
	agg   *Aggregator // nil: a record per option
	off   int64       // CLOCK_MONOTONIC to Unix time
	start uint64      // the open interval's start, CLOCK_MONOTONIC
	rec   ringbuf.Record
	ev    probe.PdmPdmEvent
	p     events.PDM
}

// read handles the records in the ring buffer until its deadline passes
// with none left (or at once, when drain is set, once none are left), and
// returns how many it handled.
func (r *reader) read(drain bool) (int, error) {
	if drain {
		r.rb.SetDeadline(time.Now())
	}
	n := 0
	err := readRing(r.rb, &r.rec, func(raw []byte) error {
		n++
		return r.handle(raw)
	})
	return n, err
}

// handle writes or folds one ring buffer record.
func (r *reader) handle(raw []byte) error {
	if !decodeEvent(raw, &r.ev) {
		return nil
	}
	NewRecord(&r.ev, r.off, &r.p)
	if r.agg != nil {
		r.agg.Add(&r.p)
		return nil
	}
	return r.w.WritePDM(&r.p)
}

// closeInterval ends the open interval now. Every record timed before now
// belongs to it, also those of program runs still going: records at or
// after now go to the next interval (Split); loader.WaitForPrograms
// returns once every run that can have read the clock before now has
// submitted its record (the monitor's grace period, docs/aggregation.md),
// and the ring buffer is then read to the end.
func (r *reader) closeInterval() error {
	end := monoNow()
	r.agg.Split(int64(end) + r.off)
	if err := loader.WaitForPrograms(); err != nil {
		return err
	}
	if _, err := r.read(true); err != nil {
		return err
	}
	start := r.start
	r.start = end
	return r.agg.Close(int64(start)+r.off, int64(end)+r.off, r.w.WritePDMInterval)
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
