package replay

// Aggregated mode through BPF_PROG_TEST_RUN: histograms, quantiles and
// traffic counters against known RTT sets, and interval boundaries.

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/hist"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
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
	a    *Aggregating
	recs []events.Aggregate
}

func newAggHarness(tb testing.TB, cfg loader.Config, interval time.Duration) *aggHarness {
	tb.Helper()
	h := &aggHarness{harness: newHarness(tb, cfg)}
	a, err := NewAggregating(h.e, interval, func(g *events.Aggregate) error {
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
	// Traffic: a's data left on egress (tx), b's ACKs arrived (rx), all
	// keyed on b's prefix.
	dataLen, ackLen := p.ipLen(p.data(true, 1, 0, 100)), p.ipLen(p.ack(false, 1, 1))
	if g.TX.Packets[events.ClassTCP] != uint64(n) || g.TX.Bytes[events.ClassTCP] != uint64(n)*dataLen ||
		g.RX.Packets[events.ClassTCP] != uint64(n) || g.RX.Bytes[events.ClassTCP] != uint64(n)*ackLen ||
		g.RX.ECN[0] != uint64(n) || g.TX.TotalPackets() != uint64(n) {
		t.Errorf("traffic rx %+v tx %+v", g.RX, g.TX)
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
		h.feed(p4.data(true, 77, 0, 10), base+990*ms, true)
		h.feed(p4.ack(false, 1, 77), base+1010*ms, false)
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
		// Traffic is keyed on the remote side unless reversed: b's UDP
		// and ICMP packets arrive on ingress, keyed on b (or a).
		g := got[key{2 * int64(time.Second), b4}]
		if g.RX.Packets[events.ClassUDP] != 1 || g.RX.Packets[events.ClassICMP] != 1 || g.RX.ECN[3] != 1 || g.RX.ECN[0] != 1 || g.Count != 0 {
			t.Errorf("reverse=%v: interval 2 traffic %+v", reverse, g)
		}
		if len(h.recs) != 4 {
			t.Errorf("reverse=%v: %d records, want 4", reverse, len(h.recs))
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

	var total atomic.Uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	workers := max(2, runtime.NumCPU())
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Repeat 1: a longer run interrupted by a signal
				// (EINTR) is retried whole by cilium/ebpf, though the
				// kernel already ran part of it.
				if _, err := prog.Run(&ebpf.RunOptions{Data: frame, Repeat: 1}); err != nil {
					errs <- err
					return
				}
				total.Add(1)
			}
		}()
	}
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
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Two more flips empty both maps.
	for range 2 {
		if err := agg.Collect(0, 0, collect); err != nil {
			t.Fatal(err)
		}
	}
	if counted != total.Load() {
		t.Fatalf("counted %d packets over %d intervals, ran %d", counted, intervals, total.Load())
	}
	t.Logf("%d packets over %d intervals", counted, intervals)
}

// Traffic from more prefixes than the per-CPU cache has slots, interleaved
// so that they keep taking each other's slots, on both hooks and IPv4 and
// IPv6, is counted exactly per prefix and interval: every count a slot
// hands to the prefix map on a collision, and every count still in a slot
// at the interval's end, arrives once.
func TestAggregateTrafficCacheCollisions(t *testing.T) {
	cfg := aggConfig()
	cfg.PrefixMapSize = 1024
	h := newAggHarness(t, cfg, time.Second)
	base := t0 - t0%int64(time.Second)
	const prefixes = 300 // > 64 slots per epoch
	type key struct {
		start  int64
		prefix string
		tx     bool
	}
	want := map[key]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	tm := base
	for i := range 6000 {
		n := rng.IntN(prefixes)
		egress := rng.IntN(2) == 0
		v6 := n%3 == 0
		remote := netip.AddrFrom4([4]byte{10, byte(n >> 8), byte(n), 9})
		prefix := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n >> 8), byte(n), 0}), 24).String()
		if v6 {
			remote = netip.MustParseAddr("2001:db8::1")
			a := remote.As16()
			a[4], a[5] = byte(n>>8), byte(n)
			remote = netip.AddrFrom16(a)
			prefix = netip.PrefixFrom(remote, 48).Masked().String()
		}
		local := ep("192.168.0.1", 5000)
		if v6 {
			local = ep("2001:db8:ffff::1", 5000)
		}
		p := path{a: local, b: endpoint{ip: remote, port: 53}}
		udp := p.packet(egress)
		udp.UDP = &pktcraft.UDP{SrcPort: 5000, DstPort: 53, Payload: payload(10)}
		h.feed(udp.MustBytes(), tm, egress)
		start := tm - tm%int64(time.Second)
		want[key{start - base, prefix, egress}]++
		if i%2000 == 1999 {
			tm += int64(time.Second) // three intervals
		}
		tm += int64(time.Microsecond)
	}
	if err := h.a.Finish(); err != nil {
		t.Fatal(err)
	}
	got := map[key]uint64{}
	for _, g := range h.recs {
		k := key{start: g.Start - base, prefix: g.Prefix.String()}
		if n := g.RX.Packets[events.ClassUDP]; n > 0 {
			got[k] = n
		}
		if n := g.TX.Packets[events.ClassUDP]; n > 0 {
			k.tx = true
			got[k] = n
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d (interval, prefix, hook) counts, want %d", len(got), len(want))
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%+v: %d packets, want %d", k, got[k], n)
		}
	}
}
