package replay

import (
	"errors"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
)

// Aggregating runs an engine loaded with cfg.Aggregate in aggregated mode:
// interval boundaries follow capture time. Intervals are aligned to
// multiples of the interval since the Unix epoch; an interval in which
// nothing happened yields no records.
type Aggregating struct {
	*Engine
	agg        *loader.Aggregator
	interval   int64
	start, end int64 // the open interval [start, end); end == 0: none yet
	last       int64 // capture time of the newest packet
	out        func(*events.Aggregate) error
}

// NewAggregating wraps e, whose programs must have been loaded with
// cfg.Aggregate, and sends each interval's records to out.
func NewAggregating(e *Engine, interval time.Duration, out func(*events.Aggregate) error) (*Aggregating, error) {
	if !e.Objects().Config.Aggregate {
		return nil, errors.New("replay: engine not loaded in aggregated mode")
	}
	if interval <= 0 {
		return nil, errors.New("replay: aggregation interval must be > 0")
	}
	// BPF_PROG_TEST_RUN has returned before the epoch flips: no grace.
	return &Aggregating{Engine: e, agg: e.Objects().NewAggregator(false), interval: int64(interval), out: out}, nil
}

// Feed closes the intervals that end at or before tsUnixNano, then runs
// the packet.
func (a *Aggregating) Feed(frame []byte, tsUnixNano int64, egress bool) error {
	if err := a.Advance(tsUnixNano); err != nil {
		return err
	}
	return a.Engine.Feed(frame, tsUnixNano, egress)
}

// Advance closes the intervals that end at or before t (capture time).
func (a *Aggregating) Advance(t int64) error {
	if a.end == 0 {
		a.start = t - t%a.interval
		a.end = a.start + a.interval
	}
	if t >= a.end {
		if err := a.agg.Collect(a.start, a.end, a.out); err != nil {
			return err
		}
		a.start = t - t%a.interval
		a.end = a.start + a.interval
	}
	if t > a.last {
		a.last = t
	}
	return nil
}

// Finish closes the last, partial interval; its end is the capture time of
// the newest packet.
func (a *Aggregating) Finish() error {
	if a.end == 0 {
		return nil
	}
	end := a.last
	a.end = 0
	return a.agg.Collect(a.start, end, a.out)
}
