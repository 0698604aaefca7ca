package loader

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/probe"
)

// Summaries delivers per-flow summaries (Config.FlowSummary): those of
// flows that ended, from their ring buffer, and on demand those of every
// live flow. Snapshots come from an iterator over the flow map that writes
// them to its output stream (none lost however many flows there are), or,
// where the kernel refuses iterators, from user space reading the flow and
// summary maps (Variant.Summaries).
type Summaries struct {
	objs *Objects
	rd   *ringbuf.Reader
	iter *link.Iter // nil: map walk
	dec  events.Decoder
	rec  ringbuf.Record
	s    events.FlowSummary
	buf  []byte
}

// NewSummaries opens the ring buffer and sets up snapshots. clockOffset
// maps kernel times to Unix ns (0 in replay).
func (o *Objects) NewSummaries(clockOffset int64) (*Summaries, error) {
	if !o.Config.FlowSummary {
		return nil, errors.New("flow summaries are not enabled")
	}
	rd, err := ringbuf.NewReader(o.Summaries)
	if err != nil {
		return nil, fmt.Errorf("open summary ring buffer: %w", err)
	}
	s := &Summaries{objs: o, rd: rd, buf: make([]byte, events.FlowSummarySize)}
	s.dec.ClockOffset = clockOffset
	s.iter = o.summaryIterator()
	o.Variant.Summaries = SummariesMapWalk
	if s.iter != nil {
		o.Variant.Summaries = SummariesIterator
	}
	return s, nil
}

func (o *Objects) summaryIterator() *link.Iter {
	const instead = "user-space reads of the flow and summary maps for snapshots"
	if r := kernel.Check(kernel.MapElemIter); !r.OK() {
		o.Variant.note("map-element iterators %s: flow-summary snapshots are read by user space", r.Status)
		return nil
	}
	if o.RttscopeFlowSummaries == nil {
		o.RttscopeFlowSummaries = o.loadOptional("rttscope_flow_summaries", "map-element iterator", instead)
	}
	if o.RttscopeFlowSummaries == nil {
		return nil
	}
	it, err := link.AttachIter(link.IterOptions{Program: o.RttscopeFlowSummaries, Map: o.FlowUsed})
	if err != nil {
		o.Variant.note("the kernel refused to attach the flow summary iterator: %s; using %s", oneLine(kernel.Explain(err)), instead)
		return nil
	}
	return it
}

// SetClockOffset changes the kernel-to-Unix time offset.
func (s *Summaries) SetClockOffset(off int64) { s.dec.ClockOffset = off }

// Drain delivers the summaries of ended flows waiting in the ring buffer,
// without blocking. The pointer is only valid during the call.
func (s *Summaries) Drain(fn func(*events.FlowSummary) error) error {
	for s.rd.AvailableBytes() > 0 {
		if err := s.rd.ReadInto(&s.rec); err != nil {
			return fmt.Errorf("read summary ring buffer: %w", err)
		}
		if err := s.dec.DecodeFlowSummary(s.rec.RawSample, &s.s); err != nil {
			return err
		}
		if err := fn(&s.s); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot delivers a summary of every live flow (Reason 0).
func (s *Summaries) Snapshot(fn func(*events.FlowSummary) error) error {
	if s.iter == nil {
		return s.walk(fn)
	}
	rd, err := s.iter.Open()
	if err != nil {
		return fmt.Errorf("open flow summary iterator: %w", err)
	}
	defer func() { _ = rd.Close() }() // read-only iterator
	br := bufio.NewReaderSize(rd, 64<<10)
	for {
		if _, err := io.ReadFull(br, s.buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read flow summary iterator: %w", err)
		}
		if err := s.dec.DecodeFlowSummary(s.buf, &s.s); err != nil {
			return err
		}
		if err := fn(&s.s); err != nil {
			return err
		}
	}
}

// walk is the snapshot without iterators: what summary_fill (bpf/summary.h)
// does in the kernel, done here from the flow table (walkFlowSlots) and the
// summary map. Flows that end during the walk may be missed or reported;
// their final summary comes through the ring buffer either way.
func (s *Summaries) walk(fn func(*events.FlowSummary) error) error {
	now, err := s.objs.kernelNow()
	if err != nil {
		return err
	}
	var sum probe.RttscopeFlowSummary // one for every flow: it is 1 KiB
	visit := func(slot *probe.RttscopeFlowSlot) error {
		if slot.Tag <= flowTagClaimed {
			return nil // empty, or being created or deleted
		}
		if err := s.objs.SummaryMap.Lookup(&slot.Key, &sum); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil // no room for its summary, or the flow just ended
			}
			return fmt.Errorf("read summary map: %w", err)
		}
		fillSummary(&s.s, tupleBytes(&slot.Key), &slot.State, &sum, now, s.dec.ClockOffset)
		return fn(&s.s)
	}
	return s.objs.walkFlowSlots(visit)
}

// fillSummary builds a periodic summary (Reason 0) as the kernel's
// summary_fill does: in the opener's direction, Src for the opener's side.
func fillSummary(out *events.FlowSummary, key []byte, fs *probe.RttscopeFlowState,
	sum *probe.RttscopeFlowSummary, now uint64, clockOffset int64) {
	events.DecodeTuple(key, &out.Flow)
	if fs.Opener != 0 {
		out.Flow = out.Flow.Reverse()
	}
	out.Reason = 0
	out.Time = int64(now) + clockOffset
	out.Start = int64(sum.Start) + clockOffset
	for i, d := range []*events.FlowDirSummary{&out.Src, &out.Dst} {
		side := (i ^ int(fs.Opener)) & 1
		f, m := &fs.Dir[side], &sum.Dir[side]
		d.Set(DirPackets(f.SentPkts), f.SentBytes, m.Count, m.Sum, f.MinRtt, m.Max, m.Hist[:], m.SourceCount[:])
	}
}

// kernelNow is the kernel's "now" as the cleanup and summary programs see
// it: the newest packet's capture time in replay, CLOCK_MONOTONIC live.
func (o *Objects) kernelNow() (uint64, error) {
	if o.Config.Replay {
		var now uint64
		if err := o.ReplayNow.Get(&now); err != nil {
			return 0, fmt.Errorf("read replay clock: %w", err)
		}
		return now, nil
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("read monotonic clock: %w", err)
	}
	return uint64(ts.Nano()), nil
}

// Close releases the reader and the iterator.
func (s *Summaries) Close() error {
	if s.iter != nil {
		s.iter.Close()
	}
	return s.rd.Close()
}
