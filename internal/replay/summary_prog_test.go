package replay

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/hist"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// The per-flow summary of a flow equals what its per-sample output says:
// the same count, min, mean and max, quantiles within the coarse bound, and
// the packets and bytes each way; periodic snapshots report live flows.
func TestFlowSummaryMatchesSamples(t *testing.T) {
	cfg := testConfig()
	cfg.FlowSummary, cfg.RateLimit = true, 0
	h := newHarness(t, cfg)
	sums, err := h.e.Objects().NewSummaries(0)
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	var got []events.FlowSummary
	collect := func(s *events.FlowSummary) error { got = append(got, *s); return nil }

	r := rand.New(rand.NewPCG(9, 9))
	type side struct{ pkts, bytes uint64 }
	for fi, p := range []path{pathV4, pathV6Swapped} {
		var sent [2]side // [0]: a, [1]: b
		feed := func(frame []byte, at int64, fromA bool) {
			h.feed(frame, at, fromA)
			i := 0
			if !fromA {
				i = 1
			}
			sent[i].pkts++
			sent[i].bytes += p.payloadLen(frame)
		}
		at := t0 + int64(fi)*1000*ms
		start := at
		for i := range 300 {
			id := uint32(1000 + i)
			rtt := int64(20_000 + r.Float64()*r.Float64()*200*float64(ms))
			if i%3 == 1 { // b's data answered by a
				feed(p.data(false, id, 0, 50), at, false)
				feed(p.ack(true, 1, id), at+rtt, true)
			} else {
				feed(p.data(true, id, 0, 100), at, true)
				feed(p.ack(false, 1, id), at+rtt, false)
			}
			at += rtt + ms
		}
		if err := sums.Snapshot(collect); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Reason != 0 || got[0].Src.Count+got[0].Dst.Count != 300 {
			t.Fatalf("snapshot: %+v", got)
		}
		got = got[:0]
		// FIN from both sides ends the flow.
		feed(p.tcp(true, pktcraft.TCP{ACK: true, FIN: true, TSval: 5000, TSecr: 1}), at, true)
		feed(p.tcp(false, pktcraft.TCP{ACK: true, FIN: true, TSval: 6000, TSecr: 5000}), at+ms, false)
		end := at + ms
		if err := sums.Drain(collect); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("flow %d: %d summaries at close, want 1", fi, len(got))
		}
		s := got[0]
		got = got[:0]
		if s.Flow != p.tcpFlow(true) || s.Reason != events.ReasonFIN || s.Start != start || s.Time != end {
			t.Errorf("flow %d: summary header %+v", fi, s)
		}
		rtts := h.takeRTTs()
		h.takeFlows()
		// Src's packets are answered by b: their samples are the RTT
		// events in b's direction (and the FIN exchange's last one).
		for i, d := range []events.FlowDirSummary{s.Src, s.Dst} {
			replyFlow := p.tcpFlow(i == 1)
			var vals []uint64
			for _, e := range rtts {
				if e.Flow == replyFlow {
					vals = append(vals, uint64(e.RTT))
				}
			}
			slices.Sort(vals)
			var sum uint64
			for _, v := range vals {
				sum += v
			}
			n := len(vals)
			if d.Count != uint64(n) || uint64(d.Min) != vals[0] || uint64(d.Max) != vals[n-1] || uint64(d.Mean) != sum/uint64(n) {
				t.Errorf("flow %d side %d: count/min/mean/max %d/%d/%d/%d, samples say %d/%d/%d/%d",
					fi, i, d.Count, d.Min, d.Mean, d.Max, n, vals[0], sum/uint64(n), vals[n-1])
			}
			for _, q := range []struct {
				q   float64
				got time.Duration
			}{{0.5, d.P50}, {0.99, d.P99}} {
				exact := vals[hist.NearestRank(n, q.q)-1]
				if math.Abs(float64(q.got)-float64(exact)) > float64(exact)/16 {
					t.Errorf("flow %d side %d: p%v %d, exact %d", fi, i, q.q*100, q.got, exact)
				}
			}
			if d.Packets != sent[i].pkts || d.Bytes != sent[i].bytes {
				t.Errorf("flow %d side %d: %d pkts %d bytes, sent %d %d", fi, i, d.Packets, d.Bytes, sent[i].pkts, sent[i].bytes)
			}
		}
	}
	// Closed flows are gone from the snapshot.
	if err := sums.Snapshot(collect); err != nil || len(got) != 0 {
		t.Errorf("snapshot after close: %v %+v", err, got)
	}
	if st := h.stats(); st.Flows != 0 {
		t.Errorf("flows left: %+v", st)
	}
}
