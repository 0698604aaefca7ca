// Package sink runs several output sinks at once (files, Kafka,
// Prometheus metrics: docs/sinks.md). A Fanout is the format.Writer the
// monitor and replay write to: it copies each record into a bounded queue
// per sink, and a goroutine per sink writes the queue to that sink's own
// format.Writer. So a slow sink delays only itself: what happens when its
// queue is full is its Policy, and every record it drops is counted in the
// stats record (events.SinkStats).
//
// Privacy comes first: the Fanout sits behind the privacy writer
// (internal/privacy), so every sink gets records whose addresses are
// already anonymized.
package sink

import (
	"fmt"
	"strings"
)

// Policy is what a sink does with a record when its queue is full.
type Policy uint8

// Policies.
const (
	// Block waits for room: nothing is lost, and the writer of the
	// record (the ring buffer reader) waits, so the kernel may drop
	// events instead (counted as ringbuf_full).
	Block Policy = iota
	// Drop drops the records that do not fit, counted as dropped.
	Drop
	// Spool is Block for the queue; the sink itself keeps what its
	// destination cannot take on disk (Kafka: --spool-size).
	Spool
)

var policyNames = [...]string{Block: "block", Drop: "drop", Spool: "spool"}

// String returns the policy's name.
func (p Policy) String() string { return policyNames[p] }

// ParsePolicy returns the policy of that name.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("invalid sink policy %q: want %s", s, strings.Join(policyNames[:], ", "))
}
