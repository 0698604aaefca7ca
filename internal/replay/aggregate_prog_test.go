package replay

// Aggregated mode through BPF_PROG_TEST_RUN: histograms, quantiles and
// traffic counters against known RTT sets, and interval boundaries.

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/hist"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/testutil"
)

func aggConfig() loader.Config {
	c := testConfig()
	c.Aggregate = true
	c.RateLimit = 0
	c.PrefixMapSize = 64
	return c
}

type aggHarness struct {
	*harness
	a       *Aggregating
	recs    []events.Aggregate // prefix records
	globals []events.Aggregate // ePPing's global records, one per interval
}

func newAggHarness(tb testing.TB, cfg loader.Config, interval time.Duration) *aggHarness {
	tb.Helper()
	h := &aggHarness{harness: newHarness(tb, cfg)}
	a, err := NewAggregating(h.e, interval, func(g *events.Aggregate) error {
		if g.Global != nil {
			c := *g.Global
			g2 := *g
			g2.Global = &c
			h.globals = append(h.globals, g2)
			return nil
		}
		h.recs = append(h.recs, *g)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	h.a = a
	return h
}

func (h *aggHarness) feed(frame []byte, t int64, egress bool) {
	h.tb.Helper()
	if err := h.a.Feed(frame, t, egress); err != nil {
		h.tb.Fatalf("Feed: %v", err)
	}
}

// sampleRTTs plays one sample per RTT on p (a's data on egress, b's ACK on
// ingress, one after the other) from t and returns the time after the last.
func (h *aggHarness) sampleRTTs(p path, t int64, rtts []uint64) int64 {
	for i, rtt := range rtts {
		id := uint32(1000 + i)
		h.feed(p.data(true, id, 0, 100), t, true)
		h.feed(p.ack(false, 1, id), t+int64(rtt), false)
		t += int64(rtt) + ms
	}
	return t
}

// The kernel's histogram equals the Go binning of the same values (so the
// C and Go bin functions agree, bin edges included), count/min/mean/max are
// exact, and quantiles are within the documented bound.
func TestAggregateHistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	var rtts []uint64
	// Both edges of every bin (the overflow bin's lower edge included).
	for b := 1; b < hist.Bins; b++ {
		lo := hist.Lower(b)
		rtts = append(rtts, lo, lo-1)
	}
	// Log-uniform values from 200 ns to 90 s.
	for range 500 {
		rtts = append(rtts, uint64(200*math.Pow(4.5e8, r.Float64())))
	}
	r.Shuffle(len(rtts), func(i, j int) { rtts[i], rtts[j] = rtts[j], rtts[i] })

	cfg := aggConfig()
	cfg.TCPFlowTimeout = 1000 * time.Hour
	h := newAggHarness(t, cfg, 1000000*time.Hour) // one interval
	p := pathV4
	end := h.sampleRTTs(p, t0, rtts)
	if err := h.a.Finish(); err != nil {
		t.Fatal(err)
	}
	if len(h.recs) != 1 {
		t.Fatalf("got %d records, want 1: %+v", len(h.recs), h.recs)
	}
	g := h.recs[0]
	if want := netip.MustParsePrefix("10.0.0.0/24"); g.Prefix != want {
		t.Errorf("prefix %v, want %v", g.Prefix, want)
	}
	if g.Time != end-ms {
		t.Errorf("interval end %d, want %d", g.Time, end-ms)
	}
	sorted := slices.Clone(rtts)
	slices.Sort(sorted)
	var sum uint64
	want := make([]uint64, hist.Bins)
	for _, v := range rtts {
		sum += v
		want[hist.Bin(v)]++
	}
	n := len(rtts)
	if g.Count != uint64(n) || uint64(g.Min) != sorted[0] || uint64(g.Max) != sorted[n-1] || uint64(g.Mean) != sum/uint64(n) || uint64(g.Sum) != sum {
		t.Errorf("count/min/mean/max/sum = %d/%d/%d/%d/%d, want %d/%d/%d/%d/%d", g.Count, g.Min, g.Mean, g.Max, g.Sum, n, sorted[0], sum/uint64(n), sorted[n-1], sum)
	}
	got := make([]uint64, hist.Bins)
	for _, hb := range g.Histogram {
		b := hist.Bin(hb.Lower)
		if hist.Lower(b) != hb.Lower || (b < hist.Overflow && hb.Upper != hist.Upper(b)) {
			t.Fatalf("bad bin bounds %+v", hb)
		}
		got[b] = hb.Count
	}
	for b := range want {
		if got[b] != want[b] {
			t.Errorf("bin %d [%d,%d): kernel %d, Go %d", b, hist.Lower(b), hist.Upper(b), got[b], want[b])
		}
	}
	for _, c := range []struct {
		q   float64
		got time.Duration
	}{{0.5, g.P50}, {0.9, g.P90}, {0.95, g.P95}, {0.99, g.P99}} {
		exact := sorted[hist.NearestRank(n, c.q)-1]
		bound := float64(exact) / 64
		if exact < 1<<hist.MinExp {
			bound = 16
		}
		if exact >= 1<<hist.MaxExp {
			bound = float64(sorted[n-1] - exact)
		}
		if math.Abs(float64(c.got)-float64(exact)) > bound {
			t.Errorf("p%v = %d, exact %d, bound %v", c.q*100, c.got, exact, bound)
		}
	}
	// Traffic, as ePPing counts it: every packet for its source prefix
	// (rx) and its destination prefix (tx); a and b share their /24.
	data, ack := p.data(true, 1, 0, 100), p.ack(false, 1, 1)
	dataLen, ackLen := p.ipLen(data), p.ipLen(ack)
	for _, tr := range []events.Traffic{g.RX, g.TX} {
		if tr.Packets[events.ClassTCP] != 2*uint64(n) || tr.Bytes[events.ClassTCP] != uint64(n)*(dataLen+ackLen) ||
			tr.ECN[0] != 2*uint64(n) || tr.TotalPackets() != 2*uint64(n) ||
			tr.EPPPackets[events.EPPTCPTS] != 2*uint64(n) || tr.EPPBytes[events.EPPTCPTS] != uint64(n*(len(data)+len(ack))) {
			t.Errorf("traffic rx %+v tx %+v", g.RX, g.TX)
		}
	}
	// ePPing's histogram: 4 ms bins up to the maximum's (the last one
	// open), from the same samples.
	var lin [events.LinBins]uint32
	for _, v := range rtts {
		lin[min(v/uint64(events.LinBinWidth), events.LinBins-1)]++
	}
	if last := min(int(sorted[n-1]/uint64(events.LinBinWidth))+1, events.LinBins); !slices.Equal(g.LinHist, lin[:last]) {
		t.Errorf("ePPing histogram %v, want %v", g.LinHist, lin[:last])
	}
	// The global record: every packet by protocol.
	if len(h.globals) != 1 || h.globals[0].Global.ProtoPackets[6] != 2*uint64(n) || h.globals[0].Global.ECN[0] != 2*uint64(n) {
		t.Errorf("global records %+v", h.globals)
	}
	// No per-sample event crossed to user space.
	if len(h.c.rtts) != 0 || len(h.c.flows) != 0 {
		t.Errorf("aggregated mode delivered %d RTT and %d flow events", len(h.c.rtts), len(h.c.flows))
	}
}

// Intervals follow capture time, samples land in the interval of their
// reply, prefixes (v4 /24, v6 /48 by default, or the reverse side) key them,
// and protocol classes and ECN codepoints are counted apart.
func TestAggregateIntervalsAndPrefixes(t *testing.T) {
	for _, reverse := range []bool{false, true} {
		cfg := aggConfig()
		cfg.AggReverse = reverse
		cfg.TrackICMP = true
		h := newAggHarness(t, cfg, time.Second)
		base := t0 - t0%int64(time.Second)
		p4 := path{a: ep("192.168.1.7", 1000), b: ep("10.1.2.3", 80)}
		p6 := path{a: ep("2001:db8:1:2::1", 1000), b: ep("2001:db8:aaaa:bbbb::5", 443)}
		h.sampleRTTs(p4, base+100*ms, []uint64{uint64(5 * ms), uint64(7 * ms)}) // interval 0
		h.sampleRTTs(p6, base+200*ms, []uint64{uint64(3 * ms)})                 // interval 0
		// A sample across the boundary: sent in 0, answered in 1.
		h.feed(p4.data(true, 2077, 0, 10), base+990*ms, true)
		h.feed(p4.ack(false, 1, 2077), base+1010*ms, false)
		// UDP and ICMP traffic with ECN marks in interval 2.
		udp := p4.packet(false)
		udp.TOS = 3
		udp.UDP = &pktcraft.UDP{SrcPort: 53, DstPort: 5353, Payload: payload(20)}
		h.feed(udp.MustBytes(), base+2100*ms, false)
		h.feed(p4.echo(false, false, 9, 1), base+2200*ms, false)
		if err := h.a.Finish(); err != nil {
			t.Fatal(err)
		}
		b4, b6 := "10.1.2.0/24", "2001:db8:aaaa::/48"
		if reverse {
			b4, b6 = "192.168.1.0/24", "2001:db8:1::/48"
		}
		type key struct {
			start  int64
			prefix string
		}
		got := map[key]events.Aggregate{}
		for _, g := range h.recs {
			got[key{g.Start - base, g.Prefix.String()}] = g
		}
		check := func(start int64, prefix string, count uint64, min time.Duration) {
			t.Helper()
			g, ok := got[key{start, prefix}]
			if !ok {
				t.Errorf("reverse=%v: no record for %s in interval %d; have %v", reverse, prefix, start, got)
				return
			}
			if g.Count != count || g.Min != min {
				t.Errorf("reverse=%v %s@%d: count %d min %v, want %d %v", reverse, prefix, start, g.Count, g.Min, count, min)
			}
		}
		check(0, b4, 2, 5*time.Millisecond)
		check(0, b6, 1, 3*time.Millisecond)
		check(int64(time.Second), b4, 1, 20*time.Millisecond)
		// Traffic (whatever reverse says) as ePPing counts it: b's UDP
		// and ICMP echo request count for b's prefix (rx) and a's (tx);
		// the echo request is tracked and keeps its prefixes' entries,
		// the UDP packet counts in them since they exist.
		a4, bb4 := "192.168.1.0/24", "10.1.2.0/24"
		rx, tx := got[key{2 * int64(time.Second), bb4}], got[key{2 * int64(time.Second), a4}]
		if rx.RX.Packets[events.ClassUDP] != 1 || rx.RX.Packets[events.ClassICMP] != 1 || rx.RX.ECN[3] != 1 || rx.RX.ECN[0] != 1 ||
			rx.RX.EPPPackets[events.EPPOther] != 2 || rx.Count != 0 || rx.TX.TotalPackets() != 0 {
			t.Errorf("reverse=%v: interval 2, %s: %+v", reverse, bb4, rx)
		}
		if tx.TX.Packets[events.ClassUDP] != 1 || tx.TX.Packets[events.ClassICMP] != 1 || tx.RX.TotalPackets() != 0 {
			t.Errorf("reverse=%v: interval 2, %s: %+v", reverse, a4, tx)
		}
		// Interval 0: both v4 and both v6 prefixes; 1: both v4; 2: both v4.
		if len(h.recs) != 8 {
			t.Errorf("reverse=%v: %d records, want 8: %+v", reverse, len(h.recs), h.recs)
		}
		if len(h.globals) != 3 {
			t.Errorf("reverse=%v: %d global records, want 3", reverse, len(h.globals))
		} else if g := h.globals[2].Global; g.ProtoPackets[17] != 1 || g.ProtoPackets[1] != 1 || g.ECN != [4]uint64{1, 0, 0, 1} {
			// Not-ECT is derived in user space (bpf/agg.h, struct
			// agg_global): the echo request's; CE the UDP packet's.
			t.Errorf("reverse=%v: interval 2's global record: %d UDP, %d ICMP packets, ECN %v; want 1, 1, [1 0 0 1]", reverse, g.ProtoPackets[17], g.ProtoPackets[1], g.ECN)
		}
	}
}

// While several CPUs run the program as fast as they can, intervals are
// closed again and again: the packets counted over all intervals must be
// exactly the packets run, none lost or counted twice at a boundary.
func TestAggregateBoundaryConsistency(t *testing.T) {
	cfg := aggConfig()
	h := newHarness(t, cfg)
	agg := h.e.Objects().NewAggregator(true) // live grace period
	frame := pathV4.ack(false, 1, 1)         // opens no flow; only counted
	prog := h.e.Objects().RttscopeTcIngress

	stopRuns := testutil.RunConcurrently(prog, frame)
	var counted uint64
	intervals := 0
	collect := func(g *events.Aggregate) error {
		counted += g.RX.Packets[events.ClassTCP]
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		if err := agg.Collect(0, 0, collect); err != nil {
			t.Fatal(err)
		}
		intervals++
	}
	total, err := stopRuns()
	if err != nil {
		t.Fatal(err)
	}
	// Two more flips empty both maps.
	for range 2 {
		if err := agg.Collect(0, 0, collect); err != nil {
			t.Fatal(err)
		}
	}
	if counted != total {
		t.Fatalf("counted %d packets over %d intervals, ran %d", counted, intervals, total)
	}
	t.Logf("%d packets over %d intervals", counted, intervals)
}
