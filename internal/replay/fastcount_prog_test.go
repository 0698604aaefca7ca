package replay

import (
	"testing"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// TestFastPathCountsInBatches: the fast path adds its packets to
// COUNTER_FAST_PATH 16 at a time (bpf/fastpath.h, fast_count), keeping
// the rest in the flow's sent_pkts word. A periodic stats record
// (Objects.Stats) lags by that rest, an exact one (StatsExact) adds it
// from the flow table, and a flow that goes (here by RST: flow_free) adds
// its own, so that both agree again. The flow's packet count is the low
// bits of the same word and must not see the fast count.
func TestFastPathCountsInBatches(t *testing.T) {
	const batch = 16
	h := newHarness(t, testConfig())
	p := flowPath(0)
	at := t0
	h.feed(p.data(true, 1, 0, 100), at, true) // creates the flow, a timestamp
	const same = 40                           // the same TSval: no new identifier
	for range same {
		at += ms
		h.feed(p.data(true, 1, 0, 100), at, true)
	}
	read := func(exact bool) events.Stats {
		t.Helper()
		var s events.Stats
		read := h.e.objs.Stats
		if exact {
			read = h.e.objs.StatsExact
		}
		if err := read(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	lag, exact := read(false), read(true)
	fast := exact.FastPathPackets
	if fast != same {
		t.Fatalf("%d of %d segments with a seen TSval took the fast path, want all", fast, same)
	}
	if exact.Packets != same+1 {
		t.Errorf("exact record: %d packets, want %d", exact.Packets, same+1)
	}
	if want := fast - fast%batch; lag.FastPathPackets != want {
		t.Errorf("periodic record: fast_path_packets %d, want the full batches of %d: %d", lag.FastPathPackets, fast, want)
	}
	slots, err := flowSlots(h.e.objs.FlowMap)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 {
		t.Fatalf("%d flows in the table, want 1", len(slots))
	}
	d := slots[0].State.Dir
	if got := loader.DirPackets(d[0].SentPkts) + loader.DirPackets(d[1].SentPkts); got != same+1 {
		t.Errorf("the flow counts %d packets, want %d", got, same+1)
	}

	at += ms
	h.feed(p.tcp(true, pktcraft.TCP{RST: true, TSval: 2}), at, true)
	lag, exact = read(false), read(true)
	if lag.FlowsDeleted != 1 {
		t.Fatalf("the RST did not end the flow: %+v", lag)
	}
	if lag.FastPathPackets != fast || exact.FastPathPackets != fast || lag.Packets != same+2 {
		t.Errorf("after the flow went: fast_path_packets %d (exact %d), packets %d; want %d, %d, %d",
			lag.FastPathPackets, exact.FastPathPackets, lag.Packets, fast, fast, same+2)
	}
}
