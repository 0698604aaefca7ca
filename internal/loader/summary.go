package loader

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/rttscope/rttscope/internal/events"
)

// Summaries delivers per-flow summaries (Config.FlowSummary): those of
// flows that ended, from their ring buffer, and on demand those of every
// live flow, from an iterator over the flow map that writes them to its
// output stream (so none is lost however many flows there are).
type Summaries struct {
	rd   *ringbuf.Reader
	iter *link.Iter
	dec  events.Decoder
	rec  ringbuf.Record
	s    events.FlowSummary
	buf  []byte
}

// NewSummaries opens the ring buffer and attaches the iterator. clockOffset
// maps kernel times to Unix ns (0 in replay).
func (o *Objects) NewSummaries(clockOffset int64) (*Summaries, error) {
	if !o.Config.FlowSummary {
		return nil, errors.New("flow summaries are not enabled")
	}
	rd, err := ringbuf.NewReader(o.Summaries)
	if err != nil {
		return nil, fmt.Errorf("open summary ring buffer: %w", err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: o.RttscopeFlowSummaries, Map: o.FlowMap})
	if err != nil {
		rd.Close()
		return nil, fmt.Errorf("attach flow summary iterator: %w", err)
	}
	s := &Summaries{rd: rd, iter: it, buf: make([]byte, events.FlowSummarySize)}
	s.dec.ClockOffset = clockOffset
	return s, nil
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
	rd, err := s.iter.Open()
	if err != nil {
		return fmt.Errorf("open flow summary iterator: %w", err)
	}
	defer rd.Close()
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

// Close releases the reader and the iterator.
func (s *Summaries) Close() error {
	s.iter.Close()
	return s.rd.Close()
}
