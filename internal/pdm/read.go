package pdm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/probe"
)

// ReadOptions are what `rttscope pdm --read FILE` runs with: the PDM
// options of a capture decoded as --passive decodes them live, by the same
// BPF programs run on each captured packet (BPF_PROG_TEST_RUN) with the
// capture time as the clock.
type ReadOptions struct {
	Path     string // pcap or pcapng, optionally gzip compressed; "-" = stdin
	MapSize  uint32
	Lifetime time.Duration
	// LocalNets: packets from these addresses are egress (as seen by a
	// host or router whose "inside" they are), all others ingress. Without
	// them see readDirector.
	LocalNets []netip.Prefix
	// Reporting: a record per PDM option, or per 5-tuple and interval of
	// capture time (intervals aligned to multiples of the interval since
	// the Unix epoch, as replay's aggregated mode; the last one ends at
	// the last packet).
	Reporting
	Output format.Writer
	Log    io.Writer // the counters at the end
	// FirstPacket, when set, is called with the capture time of the
	// first packet before any record is written (--relative-time).
	FirstPacket func(unixNano int64)
}

// ReadSummary counts what a capture gave.
type ReadSummary struct {
	Packets uint64 // records in the file
	Fed     uint64 // IPv6 packets run through the programs
	Records uint64 // records written
	Counters
}

// readMaxFrame: frames are cut to this before a test run. The programs
// only read headers (BPF_PROG_TEST_RUN refuses a frame longer than about a
// page, which GRO-aggregated packets captured on a host exceed).
const readMaxFrame = 2048

// Validate names the flag of a value that cannot work.
func (o ReadOptions) Validate() error {
	if err := o.config().Validate(); err != nil {
		return err
	}
	return o.Reporting.Validate()
}

func (o ReadOptions) config() Config {
	return Config{MapSize: o.MapSize, Lifetime: o.Lifetime, Passive: true, TstampClock: true}
}

// Read decodes the PDM options in the capture at o.Path and writes one
// record per option, timed at its capture time (or, with interval
// reporting, a record per 5-tuple and interval).
func Read(ctx context.Context, o ReadOptions) (ReadSummary, error) {
	var sum ReadSummary
	if err := o.Validate(); err != nil {
		return sum, err
	}
	if err := Require(o.Output); err != nil {
		return sum, err
	}
	cfg := o.config()
	r, err := capture.Open(o.Path)
	if err != nil {
		return sum, err
	}
	defer r.Close()
	objs, err := Load(cfg)
	if err != nil {
		return sum, err
	}
	defer func() { _ = objs.Close() }()
	fr, err := newFrameRunner(objs)
	if err != nil {
		return sum, err
	}
	defer fr.close()
	dir := readDirector{nets: o.LocalNets, first: map[[32]byte]bool{}}
	iv := captureIntervals{iv: capture.Intervals{Every: int64(o.every())}, w: o.Output}
	if iv.iv.Every > 0 {
		iv.agg = NewAggregator()
	}
	sweepEvery := int64(max(time.Second, o.Lifetime/2))
	var nextSweep int64
	for {
		if sum.Packets%1024 == 0 && ctx.Err() != nil {
			return sum, ctx.Err()
		}
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, err
		}
		if sum.Packets == 0 && o.FirstPacket != nil {
			o.FirstPacket(p.Timestamp)
		}
		sum.Packets++
		if err := iv.advance(p.Timestamp); err != nil {
			return sum, err
		}
		f := p.Data
		if len(f) < 14+40 || binary.BigEndian.Uint16(f[12:]) != 0x86dd {
			continue // the programs skip everything but IPv6
		}
		if p.Timestamp >= nextSweep {
			if _, err := objs.Sweep(uint64(p.Timestamp)); err != nil {
				return sum, err
			}
			nextSweep = p.Timestamp + sweepEvery
		}
		sum.Fed++
		n, err := fr.feed(f[:min(len(f), readMaxFrame)], p.Timestamp, dir.egress(p))
		sum.Records += n
		if err != nil {
			return sum, fmt.Errorf("%s: packet %d: %w", r.Name(), p.Index+1, err)
		}
		for i := range fr.recs {
			if iv.agg != nil {
				iv.agg.Add(&fr.recs[i])
			} else if err := o.Output.WritePDM(&fr.recs[i]); err != nil {
				return sum, err
			}
		}
	}
	if err := iv.finish(); err != nil {
		return sum, err
	}
	if sum.Counters, err = objs.ReadCounters(); err != nil {
		return sum, err
	}
	if o.Log != nil {
		fmt.Fprintf(o.Log, "rttscope pdm: %s: %d packets, %d IPv6, %d records; counters %v\n",
			r.Name(), sum.Packets, sum.Fed, sum.Records, sum.Map())
	}
	return sum, o.Output.Flush()
}

// captureIntervals ends the intervals of interval reporting by capture
// time: no grace period is needed, BPF_PROG_TEST_RUN has returned with
// its record before the next packet.
type captureIntervals struct {
	agg *Aggregator // nil: packet reporting
	iv  capture.Intervals
	w   format.Writer
}

// advance closes the interval when t (capture time) is past it.
func (c *captureIntervals) advance(t int64) error {
	if c.agg == nil {
		return nil
	}
	if start, end, ended := c.iv.Advance(t); ended {
		return c.agg.Close(start, end, c.w.WritePDMInterval)
	}
	return nil
}

// finish closes the last, partial interval at the newest packet.
func (c *captureIntervals) finish() error {
	if c.agg == nil {
		return nil
	}
	if start, last, ok := c.iv.Finish(); ok {
		return c.agg.Close(start, last, c.w.WritePDMInterval)
	}
	return nil
}

// readDirector decides which captured packets the egress program sees
// and which the ingress program. The direction only names the records
// (`direction`) and which side of a 5-tuple is "local": the pairing is the
// same either way. In order: the capture's own direction (pcapng flags,
// Linux cooked captures); with LocalNets, packets from them are egress;
// otherwise the sender of the first packet seen between two addresses is
// the local side.
type readDirector struct {
	nets  []netip.Prefix
	first map[[32]byte]bool // address pair (lower first): lower is local
}

func (d *readDirector) egress(p *capture.Packet) bool {
	switch p.Direction {
	case capture.DirOutbound:
		return true
	case capture.DirInbound:
		return false
	}
	src := [16]byte(p.Data[14+8 : 14+24])
	dst := [16]byte(p.Data[14+24 : 14+40])
	if len(d.nets) > 0 {
		a := netip.AddrFrom16(src)
		for _, n := range d.nets {
			if n.Contains(a) {
				return true
			}
		}
		return false
	}
	var k [32]byte
	srcLow := string(src[:]) < string(dst[:])
	if srcLow {
		copy(k[:], src[:])
		copy(k[16:], dst[:])
	} else {
		copy(k[:], dst[:])
		copy(k[16:], src[:])
	}
	lowLocal, ok := d.first[k]
	if !ok {
		lowLocal = srcLow
		d.first[k] = lowLocal
	}
	return lowLocal == srcLow
}

// frameRunner runs the PDM programs on one frame at a time with the
// capture time in __sk_buff.tstamp, and collects the records they make.
type frameRunner struct {
	objs  *Objects
	ctx   []byte
	tsOff int
	rb    *ringbuf.Reader
	recs  []events.PDM
	rec   ringbuf.Record
	ev    probe.PdmPdmEvent
}

func newFrameRunner(objs *Objects) (*frameRunner, error) {
	size, off, err := skbTstamp()
	if err != nil {
		return nil, err
	}
	rb, err := ringbuf.NewReader(objs.PdmEvents)
	if err != nil {
		return nil, fmt.Errorf("open PDM ring buffer: %w", err)
	}
	return &frameRunner{objs: objs, ctx: make([]byte, size), tsOff: off, rb: rb}, nil
}

func (f *frameRunner) close() { _ = f.rb.Close() }

// feed runs one frame and leaves its records (at most one) in f.recs.
func (f *frameRunner) feed(frame []byte, ts int64, egress bool) (uint64, error) {
	f.recs = f.recs[:0]
	binary.NativeEndian.PutUint64(f.ctx[f.tsOff:], uint64(ts))
	prog := f.objs.PdmTcIngress
	if egress {
		prog = f.objs.PdmTcEgress
	}
	if _, err := prog.Run(&ebpf.RunOptions{Data: frame, Context: f.ctx}); err != nil {
		return 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", err)
	}
	err := drainRing(f.rb, &f.rec, func(raw []byte) error {
		if decodeEvent(raw, &f.ev) {
			f.recs = append(f.recs, events.PDM{})
			r := &f.recs[len(f.recs)-1]
			NewRecord(&f.ev, 0, r) // the clock is the capture's
			r.Ifindex = 0          // the test run's device, not the capture's
		}
		return nil
	})
	return uint64(len(f.recs)), err
}

// skbTstamp finds the size of struct __sk_buff and the offset of its
// tstamp in the running kernel's BTF.
func skbTstamp() (size, off int, err error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, 0, fmt.Errorf("kernel BTF (for the __sk_buff layout): %w", err)
	}
	var skb *btf.Struct
	if err := spec.TypeByName("__sk_buff", &skb); err != nil {
		return 0, 0, fmt.Errorf("kernel BTF: __sk_buff: %w", err)
	}
	for _, m := range skb.Members {
		if m.Name == "tstamp" {
			return int(skb.Size), int(m.Offset.Bytes()), nil
		}
	}
	return 0, 0, errors.New("kernel BTF: __sk_buff has no tstamp")
}
