package sink

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

// Sink is one destination of a Fanout.
type Sink struct {
	// Name is the sink's name in the stats record ("files", "kafka",
	// "metrics").
	Name   string
	Policy Policy
	// Writer writes the sink's records; only the sink's goroutine calls
	// it. The Fanout closes it.
	Writer format.Writer
	// Kinds are the record types the sink takes (0: what Writer's
	// capabilities allow). A record of another type is not queued.
	Kinds Kinds
	// Counters, if set, adds the sink's own counters to its stats
	// (Kafka: produced, acknowledged, spooled; its drops to Dropped). It
	// is called from other goroutines than the sink's.
	Counters func(*events.SinkStats)
}

// DefaultQueue is the default length of each sink's queue, in records.
const DefaultQueue = 64 * 1024

// Fanout is a format.Writer that hands every record to each of its sinks
// through that sink's bounded queue (package comment). It is safe for
// concurrent use.
type Fanout struct {
	mu     sync.Mutex
	queues []*queue
	caps   format.Capability
	closed bool
}

// New starts a Fanout to sinks, each with a queue of about queueLen
// records (rounded up to whole batches of 256, at least 2 batches).
func New(queueLen int, sinks ...Sink) (*Fanout, error) {
	if len(sinks) == 0 {
		return nil, errors.New("sink: no sink")
	}
	batches := max((queueLen+batchSize-1)/batchSize, 2)
	f := &Fanout{}
	for _, s := range sinks {
		if s.Writer == nil {
			return nil, fmt.Errorf("sink %s: no writer", s.Name)
		}
		f.caps |= s.Writer.Capabilities() &^ format.Restarts
	}
	for _, s := range sinks {
		f.queues = append(f.queues, newQueue(s, batches))
	}
	return f, nil
}

// Stats returns the counters of every sink.
func (f *Fanout) Stats() []events.SinkStats {
	out := make([]events.SinkStats, len(f.queues))
	for i, q := range f.queues {
		out[i] = q.stats()
	}
	return out
}

// each queues a record of kind k to every sink that takes it, with fill
// copying it into the queue's slot. It returns the sinks' errors.
func (f *Fanout) each(k Kinds, fill func(*item)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return format.ErrClosed
	}
	var errs []error
	for _, q := range f.queues {
		if err := q.error(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", q.Name, err))
		}
		if q.Kinds&k == 0 {
			continue
		}
		it := q.add()
		it.kind = k
		fill(it)
	}
	return errors.Join(errs...)
}

// WriteRTT implements format.Writer.
func (f *Fanout) WriteRTT(e *events.RTT) error {
	return f.each(RTTs, func(it *item) { it.rtt = *e })
}

// WriteFlow implements format.Writer.
func (f *Fanout) WriteFlow(e *events.FlowEvent) error {
	return f.each(Flows, func(it *item) { it.flow = *e })
}

// WriteStats implements format.Writer: each sink gets the record with
// every sink's counters (Sinks) as they are now.
func (f *Fanout) WriteStats(s *events.Stats) error {
	c := s.Clone()
	c.Sinks = &events.SinkReport{List: f.Stats()}
	return f.each(Stats, func(it *item) { it.other = c })
}

// WriteAggregate implements format.Writer.
func (f *Fanout) WriteAggregate(a *events.Aggregate) error {
	c := copyAggregate(a)
	return f.each(Aggregates, func(it *item) { it.other = c })
}

// WriteFlowSummary implements format.Writer.
func (f *Fanout) WriteFlowSummary(s *events.FlowSummary) error {
	c := *s
	return f.each(FlowSummaries, func(it *item) { it.other = &c })
}

// WriteAnonKey implements format.Writer.
func (f *Fanout) WriteAnonKey(k *events.AnonKey) error {
	c := *k
	return f.each(AnonKeys, func(it *item) { it.other = &c })
}

// WritePDM implements format.Writer.
func (f *Fanout) WritePDM(p *events.PDM) error {
	c := *p
	return f.each(PDMs, func(it *item) { it.other = &c })
}

// WritePDMInterval implements format.Writer.
func (f *Fanout) WritePDMInterval(p *events.PDMInterval) error {
	c := copyPDMInterval(p)
	return f.each(PDMs, func(it *item) { it.other = c })
}

// Flush implements format.Writer: each sink writes what is queued before
// it and then flushes its writer; Flush does not wait for that.
func (f *Fanout) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	var errs []error
	for _, q := range f.queues {
		if err := q.error(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", q.Name, err))
		}
		q.cur.flush = true
		q.send(false)
	}
	return errors.Join(errs...)
}

// Close implements format.Writer: every sink writes its queue out and
// closes its writer (the sinks in parallel); Close returns when all have.
func (f *Fanout) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	errs := make([]error, len(f.queues))
	var wg sync.WaitGroup
	for i, q := range f.queues {
		wg.Go(func() {
			err := q.close()
			if err == nil {
				err = q.error()
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", q.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Restart implements format.Writer: sinks that rotate files restart their
// own format writers (output.Rotating), so it only calls reopen.
func (f *Fanout) Restart(reopen func() error) error { return reopen() }

// Capabilities implements format.Writer: the record types any sink takes
// (each record goes only to the sinks that take it).
func (f *Fanout) Capabilities() format.Capability { return f.caps }
