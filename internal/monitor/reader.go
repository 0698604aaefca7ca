package monitor

import (
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

// reader moves records from the ring buffer to the output. It reuses one
// record buffer and one event of each kind, so steady state allocates
// nothing per event.
type reader struct {
	rd     *ringbuf.Reader
	out    format.Writer
	dec    events.Decoder
	offset atomic.Int64 // next clock offset, set by the session's loop
	rec    ringbuf.Record
	rtt    events.RTT
	flow   events.FlowEvent
}

func (r *reader) setClockOffset(off int64) { r.offset.Store(off) }

// pollInterval is how often the reader looks into the ring buffer: the
// programs wake it only when the ring fills up (loader.Config's
// EventWakeupBytes), so an event waits at most this long.
const pollInterval = 50 * time.Millisecond

// loop returns when the reader is closed, or flushed (Reader.Flush) and
// the records in the ring at that point are handled.
func (r *reader) loop() error {
	r.offset.Store(r.dec.ClockOffset)
	r.rd.SetDeadline(time.Now().Add(pollInterval))
	for {
		if err := r.rd.ReadInto(&r.rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// Every record in the ring is handled: wait again.
				r.rd.SetDeadline(time.Now().Add(pollInterval))
				continue
			}
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, ringbuf.ErrFlushed) {
				return nil
			}
			return err
		}
		if err := r.handle(); err != nil {
			return err
		}
	}
}

// drain handles what is left in the ring once the loop has stopped.
func (r *reader) drain() error {
	for r.rd.AvailableBytes() > 0 {
		if err := r.rd.ReadInto(&r.rec); err != nil {
			return err
		}
		if err := r.handle(); err != nil {
			return err
		}
	}
	return nil
}

func (r *reader) handle() error {
	r.dec.ClockOffset = r.offset.Load()
	kind, err := r.dec.Decode(r.rec.RawSample, &r.rtt, &r.flow)
	if err != nil {
		return err
	}
	switch kind {
	case events.KindRTT:
		return r.out.WriteRTT(&r.rtt)
	case events.KindFlow:
		return r.out.WriteFlow(&r.flow)
	}
	return nil
}
