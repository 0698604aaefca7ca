package replay

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/replay/replaytest"
	"github.com/rttscope/rttscope/internal/testutil"
)

// TestXDPReplayMatchesTC: the XDP replay entry (capture time and direction
// in the XDP metadata) gives exactly the events of the tc programs that run
// live, over the shared scenario (TCP with handshake, duplicates,
// retransmissions, wrapped TSval, VLANs, ICMP, ICMPv6, IPv6 extension
// headers, timeouts).
func TestXDPReplayMatchesTC(t *testing.T) {
	testutil.RequireRoot(t)
	if maxXDPReplayData() == 0 {
		t.Skip("skipping: this kernel's BPF_PROG_TEST_RUN takes no XDP metadata; replay uses the tc programs")
	}
	cfg := testConfig()
	cfg.TrackICMP, cfg.IncludeSYN = true, true
	cfg.RateLimit = 0
	cfg.TCPFlowTimeout = 20 * time.Second

	tc, xdp := runScenario(t, cfg, "tc"), runScenario(t, cfg, "xdp")
	compareRuns(t, tc, xdp)
}

// TestBatchReplayMatchesTC: the batched XDP entry (many packets per test
// run, frames trimmed to their headers) gives exactly the tc programs'
// events too.
func TestBatchReplayMatchesTC(t *testing.T) {
	testutil.RequireRoot(t)
	if maxXDPReplayData() == 0 {
		t.Skip("skipping: this kernel's BPF_PROG_TEST_RUN takes no XDP metadata; replay uses the tc programs")
	}
	cfg := testConfig()
	cfg.TrackICMP, cfg.IncludeSYN = true, true
	cfg.RateLimit = 0
	cfg.TCPFlowTimeout = 20 * time.Second
	compareRuns(t, runScenario(t, cfg, "tc"), runScenario(t, cfg, "batch"))
}

// runScenario feeds the shared scenario through the tc programs, the XDP
// replay entry, or the batched one.
func runScenario(t *testing.T, cfg loader.Config, mode string) collect {
	h := newHarness(t, cfg)
	var b *batchRunner
	switch mode {
	case "xdp":
		h.e.run = h.e.newRunner()
		if _, ok := h.e.run.(*xdpRunner); !ok {
			t.Fatalf("default runner is %T, want the XDP runner", h.e.run)
		}
	case "batch":
		b = newBatchRunner(h.e.objs.RttscopeXdpReplayBatch)
	}
	var pi pktInfo
	for _, st := range replaytest.Steps() {
		frame, err := replaytest.Frame(st, 1) // Ethernet
		if err != nil {
			t.Fatal(err)
		}
		ts := replaytest.T0 + st.At
		if b == nil {
			h.feed(frame, ts, st.FromClient)
			continue
		}
		parsePkt(frame, &pi)
		frame = frame[:headerBytes(&pi, len(frame))]
		if len(b.recs) == replayBatchMax || !b.room(len(frame)) {
			if err := b.flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.add(frame, ts, st.FromClient); err != nil {
			t.Fatal(err)
		}
	}
	if b != nil {
		if err := b.flush(); err != nil {
			t.Fatal(err)
		}
		if err := h.e.Drain(); err != nil {
			t.Fatal(err)
		}
	}
	h.expire()
	return h.c
}

func compareRuns(t *testing.T, tc, xdp collect) {
	t.Helper()
	if len(tc.rtts) == 0 || len(tc.flows) == 0 {
		t.Fatalf("scenario gave no events through tc (%d RTTs, %d flow events)", len(tc.rtts), len(tc.flows))
	}
	// The tc test run sees the loopback device, the XDP one none.
	clearIfindex := func(r []events.RTT) {
		for i := range r {
			r[i].Ifindex = 0
		}
	}
	clearIfindex(tc.rtts)
	clearIfindex(xdp.rtts)
	if !reflect.DeepEqual(tc.rtts, xdp.rtts) {
		t.Errorf("RTT events differ:\ntc:  %+v\nxdp: %+v", tc.rtts, xdp.rtts)
	}
	// Timeouts found by one cleanup pass come in map order: sort by time
	// and flow.
	for _, f := range [][]events.FlowEvent{tc.flows, xdp.flows} {
		sort.SliceStable(f, func(i, j int) bool {
			if f[i].Time != f[j].Time {
				return f[i].Time < f[j].Time
			}
			return fmt.Sprint(f[i].Flow) < fmt.Sprint(f[j].Flow)
		})
	}
	if !reflect.DeepEqual(tc.flows, xdp.flows) {
		t.Errorf("flow events differ:\ntc:  %+v\nxdp: %+v", tc.flows, xdp.flows)
	}
	t.Logf("%d RTT and %d flow events identical", len(tc.rtts), len(tc.flows))
}
