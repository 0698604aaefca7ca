package traffic

import (
	"sync/atomic"

	"github.com/rttscope/rttscope/internal/shmcount"
)

// The benchmark runs its TCP sink and its many-flows generator as child
// processes (internal/cmd/bench-sink, internal/cmd/bench-flows) that
// count into memory shared with the benchmark (internal/shmcount). These
// name the slots, for both sides.

// SinkCounterSlots is how many counters a sink needs.
const SinkCounterSlots = 3

// SinkCountersAt are a sink's counters in c's first SinkCounterSlots.
func SinkCountersAt(c *shmcount.Counters) SinkCounters {
	return SinkCounters{Conns: c.Int64(0), Active: c.Int64(1), Bytes: c.Uint64(2)}
}

// FlowCounterSlots is how many counters a many-flows generator needs.
const FlowCounterSlots = 3

// FlowCountersAt are a generator's counters (connections opened, bytes
// written, flows that stopped on a write error) in c's first
// FlowCounterSlots.
func FlowCountersAt(c *shmcount.Counters) (opened, written, writeErrors *atomic.Uint64) {
	return c.Uint64(0), c.Uint64(1), c.Uint64(2)
}
