package loader

import (
	"testing"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/probe"
)

// The programs leave out Not-ECT and TCP_TS packets (bpf/agg.h, struct
// traffic_counters); addTraffic derives them, the same summed per value
// or at once.
func TestAddTrafficDerivesLeftOutCounts(t *testing.T) {
	// CPU 0: 5 TCP with timestamps (one CE), 2 TCP without, 3 UDP (one
	// ECT(0)); CPU 1: 4 TCP with timestamps, no ECN.
	var c0, c1 probe.RttscopeTrafficCounters
	c0.Pkts[events.ClassTCP], c0.Pkts[events.ClassUDP] = 7, 3
	c0.Ecn[3], c0.Ecn[2] = 1, 1
	c0.EppPkts[events.EPPTCPNoTS], c0.EppPkts[events.EPPOther] = 2, 3
	c1.Pkts[events.ClassTCP] = 4
	var got events.Traffic
	addTraffic(&got, &c0)
	addTraffic(&got, &c1)
	if got.ECN != [4]uint64{12, 0, 1, 1} {
		t.Errorf("ECN %v, want [12 0 1 1]", got.ECN)
	}
	if got.EPPPackets[events.EPPTCPTS] != 9 || got.EPPPackets[events.EPPTCPNoTS] != 2 || got.EPPPackets[events.EPPOther] != 3 {
		t.Errorf("ePPing classes %v, want TCP_TS 9, TCP_noTS 2, other 3", got.EPPPackets)
	}
	if got.TotalPackets() != 14 {
		t.Errorf("%d packets, want 14", got.TotalPackets())
	}

	var summed probe.RttscopeTrafficCounters
	addCounters(&summed, &c0)
	addCounters(&summed, &c1)
	var once events.Traffic
	addTraffic(&once, &summed)
	if once != got {
		t.Errorf("derived after summing %+v, per value %+v", once, got)
	}

	// A read that catches codepoint counts ahead of the packet count
	// (the global record is read while it is written) derives 0, not a
	// wrapped count.
	var torn probe.RttscopeTrafficCounters
	torn.Pkts[events.ClassUDP], torn.Ecn[1] = 1, 2
	var tt events.Traffic
	addTraffic(&tt, &torn)
	if tt.ECN[0] != 0 {
		t.Errorf("Not-ECT of a torn read: %d, want 0", tt.ECN[0])
	}
}
