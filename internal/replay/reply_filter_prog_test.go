package replay

// The ACK filter (reply_may_match in bpf/rttscope.c): a TCP reply looks the
// timestamp map up only when it echoes one of the last two timestamped
// TSvals of its direction, or an older one that is newer than every echo
// before it. These tests pin which samples that gives.

import (
	"testing"
	"time"
)

// Fifty timestamps in flight (RTT 50 ms, one data packet per ms, no rate
// limit) are all matched by in-order ACKs: the ones older than the last two
// pass the filter because each ACK echoes a newer TSval than the one
// before. Duplicate ACKs (echoing the same TSval again) add nothing.
func TestReplyFilterManyInFlight(t *testing.T) {
	p := pathV4
	cfg := testConfig()
	cfg.RateLimit = 0
	h := newHarness(t, cfg)
	const rtt = 50 * ms
	var steps []step
	var want []sample
	for i := range 200 {
		at := int64(i) * ms
		id := uint32(1000 + i)
		steps = append(steps, step{at, p.data(true, id, 0, 100), true})
		if i >= 50 {
			// The ACK of the packet sent 50 ms ago, and a duplicate.
			old := uint32(1000 + i - 50)
			steps = append(steps,
				step{at + 1, p.ack(false, 1, old), false},
				step{at + 2, p.ack(false, 1, old), false})
			want = append(want, sample{Time: t0 + at + 1, Flow: p.tcpFlow(false), RTT: time.Duration(rtt + 1)})
		}
	}
	h.run(steps)
	h.checkSamples(want...)
}

// The behaviour the filter changes: an ACK that arrives out of order and
// echoes a TSval older than the last two timestamped and older than an echo
// already seen gives no sample (before the filter it did, if the timestamp
// was still stored); one echoing either of the last two still does.
func TestReplyFilterReorderedACK(t *testing.T) {
	p := pathV4
	cfg := testConfig()
	cfg.RateLimit = 0
	h := newHarness(t, cfg)
	h.run([]step{
		{0, p.data(true, 1, 0, 100), true},
		{1 * ms, p.data(true, 2, 0, 100), true},
		{2 * ms, p.data(true, 3, 0, 100), true},
		{10 * ms, p.ack(false, 1, 3), false}, // echoes 3 first
		{11 * ms, p.ack(false, 1, 1), false}, // 1: older than 2 and 3 and than the echo 3: no lookup
		{12 * ms, p.ack(false, 1, 2), false}, // 2: one of the last two: matched
	})
	h.checkSamples(
		sample{Time: t0 + 10*ms, Flow: p.tcpFlow(false), RTT: 8 * time.Millisecond},
		sample{Time: t0 + 12*ms, Flow: p.tcpFlow(false), RTT: 11 * time.Millisecond},
	)
}
