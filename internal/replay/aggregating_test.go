package replay

import (
	"errors"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
)

// Aggregating runs an engine loaded with cfg.Aggregate in aggregated mode
// for the tests that feed packets one by one: interval boundaries follow
// capture time as in Replay.Run (capture.Intervals, no offset).
type Aggregating struct {
	*Engine
	agg *loader.Aggregator
	iv  capture.Intervals
	out func(*events.Aggregate) error
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
	return &Aggregating{Engine: e, agg: e.Objects().NewAggregator(false), iv: capture.Intervals{Every: int64(interval)}, out: out}, nil
}

// Feed closes the interval that ends at or before tsUnixNano, then runs
// the packet.
func (a *Aggregating) Feed(frame []byte, tsUnixNano int64, egress bool) error {
	if err := a.Advance(tsUnixNano); err != nil {
		return err
	}
	return a.Engine.Feed(frame, tsUnixNano, egress)
}

// Advance closes the interval that ends at or before t (capture time).
func (a *Aggregating) Advance(t int64) error {
	if start, end, ended := a.iv.Advance(t); ended {
		return a.agg.Collect(start, end, a.out)
	}
	return nil
}

// Finish closes the last, partial interval; its end is the capture time of
// the newest packet.
func (a *Aggregating) Finish() error {
	if start, last, ok := a.iv.Finish(); ok {
		return a.agg.Collect(start, last, a.out)
	}
	return nil
}
