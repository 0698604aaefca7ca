package events

import (
	"testing"

	"github.com/rttscope/rttscope/internal/probe"
)

// TestSetCountersPacketsIncludeFastPath: the kernel counts each packet
// once, on the path that took it; the record's packets is both paths'.
func TestSetCountersPacketsIncludeFastPath(t *testing.T) {
	var c Counters
	c[probe.RttscopeCounterCOUNTER_PACKETS] = 5
	c[probe.RttscopeCounterCOUNTER_FAST_PATH] = 7
	var s Stats
	s.SetCounters(&c)
	if s.Packets != 12 || s.FastPathPackets != 7 {
		t.Errorf("packets %d, fast_path_packets %d; want 12 and 7", s.Packets, s.FastPathPackets)
	}
}
