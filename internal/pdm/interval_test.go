package pdm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/hist"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
)

// intervalRecord and distribution are a pdm_interval record as json/jsonl
// show it (docs/pdm.md): the tests decode the output into them.
type intervalRecord struct {
	recordFlow
	IntervalStart int64        `json:"interval_start"`
	DTLR          distribution `json:"dtlr"`
	DTLS          distribution `json:"dtls"`
	NetworkRTT    distribution `json:"network_rtt"`
}

type distribution struct {
	Count                                 uint64
	Min, Mean, Median, P90, P95, P99, Max uint64
	Histogram                             [][3]*uint64
}

// check: the quantiles are ordered within [min, max] and the bins count
// every sample.
func (d distribution) check(t *testing.T, rec []byte) {
	t.Helper()
	var n uint64
	for _, b := range d.Histogram {
		n += *b[2]
	}
	if n != d.Count || d.Count > 0 && !(d.Min <= d.Median && d.Median <= d.P90 && d.P90 <= d.P95 &&
		d.P95 <= d.P99 && d.P99 <= d.Max && d.Min <= d.Mean && d.Mean <= d.Max) {
		t.Errorf("inconsistent %+v in %s", d, rec)
	}
}

// intervalExchange runs an exchange through A's programs (packet mode)
// and returns the records the ring buffer gave. The deltas are SPEC's
// vectors: 0xE35F/34 is 999,988.65 ns (999,989 rounded), 0xE8D4/24
// 999.99 (1,000), 0xDE0B/44 999,992,631.32, 0xA688/46 2,999,960,301.78,
// 0xEE6B/14 0.99999744 (1).
func intervalExchange(t *testing.T, h *harness) []events.PDM {
	tc := transports()[1] // UDP, A:5353 -> B:53
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353, Payload: []byte("answer")}}
	other := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5354}}
	const t0 = 5_000_000_000
	ms := uint64(time.Millisecond)
	p := binary.BigEndian.Uint16(h.egress(tc.pkt.MustBytes(), t0)[60:62])
	// Reply to p after 3 ms, DTLR 999,989 ns: network RTT 2,000,011.
	h.ingress(withPDM(reply, 34, 0, 0x7000, p, 0xE35F, 0), t0+3*ms)
	// A sends p+1 at +5 ms; the reply at +7 ms: round trip 2 ms, DTLR
	// 1,000 ns (network RTT 1,999,000), DTLS 999,992,631.
	h.egress(tc.pkt.MustBytes(), t0+5*ms)
	h.ingress(withPDM(reply, 24, 44, 0x7001, p+1, 0xE8D4, 0xDE0B), t0+7*ms)
	// A stale PSNLR: DTLR 2,999,960,302 and DTLS 1, no network RTT.
	h.ingress(withPDM(reply, 46, 14, 0x7002, p, 0xA688, 0xEE6B), t0+8*ms)
	// No PDM: no record.
	h.ingress(reply.MustBytes(), t0+9*ms)
	// Another 5-tuple, DTLR 1 ns.
	h.ingress(withPDM(other, 14, 0, 1, 0, 0xEE6B, 0), t0+9*ms)
	var out []events.PDM
	for _, e := range h.events() {
		out = append(out, events.PDM{})
		NewRecord(&e, 0, &out[len(out)-1])
	}
	return out
}

// collectIntervals closes a's interval [start, end) and returns its
// records as json shows them.
func collectIntervals(t *testing.T, a *Aggregator, start, end int64) []intervalRecord {
	t.Helper()
	var b bytes.Buffer
	w, _ := format.New("jsonl", &b, format.Options{})
	if err := a.Close(start, end, w.WritePDMInterval); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	var out []intervalRecord
	for _, l := range bytes.Split(bytes.TrimSpace(b.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var r intervalRecord
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		for _, d := range []distribution{r.DTLR, r.DTLS, r.NetworkRTT} {
			d.check(t, l)
		}
		out = append(out, r)
	}
	return out
}

// exact is the distribution of samples vs through the histogram, worked
// out here from the bins' bounds.
func exact(vs ...uint64) distribution {
	d := distribution{Count: uint64(len(vs))}
	if len(vs) == 0 {
		return d
	}
	h := make([]uint32, hist.Bins)
	var sum uint64
	d.Min, d.Max = vs[0], vs[0]
	for _, v := range vs {
		h[hist.Bin(v)]++
		sum += v
		d.Min, d.Max = min(d.Min, v), max(d.Max, v)
	}
	d.Mean = sum / d.Count
	q := func(p float64) uint64 { return hist.Quantile(h, d.Count, p, d.Min, d.Max) }
	d.Median, d.P90, d.P95, d.P99 = q(0.5), q(0.9), q(0.95), q(0.99)
	return d
}

func sameDist(got, want distribution) bool {
	return got.Count == want.Count && got.Min == want.Min && got.Mean == want.Mean && got.Max == want.Max &&
		got.Median == want.Median && got.P90 == want.P90 && got.P95 == want.P95 && got.P99 == want.P99
}

// TestIntervalDistributions: the records of an exchange (from the
// programs) folded into one interval give, per 5-tuple, the samples
// worked out by hand, to the ns, and the histogram's quantiles; the next
// interval starts empty.
func TestIntervalDistributions(t *testing.T) {
	h := newHarness(t, Config{})
	recs := intervalExchange(t, h)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	a := NewAggregator()
	for i := range recs {
		a.Add(&recs[i])
	}
	got := collectIntervals(t, a, 1e9, 11e9)
	want := map[uint16][3]distribution{
		5353: {exact(999_989, 1_000, 2_999_960_302), exact(999_992_631, 1), exact(2_000_011, 1_999_000)},
		5354: {exact(1), exact(), exact()},
	}
	if len(got) != len(want) {
		t.Fatalf("%d interval records, want %d: %+v", len(got), len(want), got)
	}
	for _, r := range got {
		w, ok := want[r.DestPort]
		if !ok || !sameDist(r.DTLR, w[0]) || !sameDist(r.DTLS, w[1]) || !sameDist(r.NetworkRTT, w[2]) {
			t.Errorf("port %d: got %+v\nwant %+v", r.DestPort, r, w)
		}
		if r.SrcIP != hostB.String() || r.SrcPort != 53 || r.DestIP != hostA.String() || r.Direction != "ingress" ||
			r.Protocol != "UDP" || r.Type != "pdm_interval" || r.Timestamp != 11e9 || r.IntervalStart != 1e9 {
			t.Errorf("record %+v", r)
		}
	}
	if got[0].DestPort != 5353 || len(got[0].DTLR.Histogram) != 3 || *got[0].DTLR.Histogram[0][0] != hist.Lower(hist.Bin(1_000)) {
		t.Errorf("records out of order or bins wrong: %+v", got)
	}
	// The next interval starts empty.
	if got := collectIntervals(t, a, 11e9, 12e9); len(got) != 0 {
		t.Errorf("second interval %+v, want none", got)
	}
}

// TestIntervalSplit: records timed at or after the Split boundary go to
// the next interval, whatever the order they arrive in.
func TestIntervalSplit(t *testing.T) {
	a := NewAggregator()
	rec := func(ts int64, d time.Duration) *events.PDM {
		return &events.PDM{Time: ts, Flow: events.Flow{Proto: events.ProtoUDP}, DeltaLastRecv: 1, DTLR: d}
	}
	a.Add(rec(5, 100))
	a.Split(10)
	a.Add(rec(12, 200)) // after the boundary, read first
	a.Add(rec(9, 300))  // before it, read later
	got := collectIntervals(t, a, 0, 10)
	if len(got) != 1 || !sameDist(got[0].DTLR, exact(100, 300)) {
		t.Fatalf("first interval %+v", got)
	}
	a.Add(rec(15, 400))
	got = collectIntervals(t, a, 10, 20)
	if len(got) != 1 || !sameDist(got[0].DTLR, exact(200, 400)) {
		t.Fatalf("second interval %+v", got)
	}
}

// TestIntervalPassive: in passive mode the network RTT of a paired packet
// is folded under its direction, the sender as source.
func TestIntervalPassive(t *testing.T) {
	h := newHarness(t, Config{Passive: true})
	req := transports()[1].pkt
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}}
	// B replies to PSN 10 with DTLR 999,989 ns; A's next names it with
	// DTLS 999,992,631: network RTT 999,992,631 - 999,989.
	h.ingress(withPDM(reply, 34, 0, 20, 10, 0xE35F, 0), 1000)
	h.egress(withPDM(req, 0, 44, 11, 20, 0, 0xDE0B), 2000)
	a := NewAggregator()
	for _, e := range h.events() {
		var p events.PDM
		NewRecord(&e, 0, &p)
		a.Add(&p)
	}
	got := collectIntervals(t, a, 0, 3000)
	if len(got) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(got), got)
	}
	for _, r := range got {
		switch r.Direction {
		case "ingress":
			if !sameDist(r.DTLR, exact(999_989)) || r.DTLS.Count != 0 || r.NetworkRTT.Count != 0 || r.SrcIP != hostB.String() {
				t.Errorf("ingress %+v", r)
			}
		case "egress":
			if !sameDist(r.DTLS, exact(999_992_631)) || !sameDist(r.NetworkRTT, exact(999_992_631-999_989)) ||
				r.SrcIP != hostA.String() || r.SrcPort != 5353 {
				t.Errorf("egress %+v", r)
			}
		}
	}
}

// TestIntervalBoundaryConsistency: the ingress program runs on every CPU
// as fast as it can, with the real clock, while the run loop closes
// intervals every 5 ms (loader.WaitForPrograms, then the ring buffer read
// to its end): every record submitted is counted in exactly one interval
// (the DTLR counts over all intervals equal the records the program
// sent) and none arrives after its interval was written (Late).
func TestIntervalBoundaryConsistency(t *testing.T) {
	testutil.RequireRoot(t)
	objs, err := Load(Config{MapSize: DefaultMapSize, Lifetime: DefaultLifetime})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = objs.Close() }()
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}}
	frame := withPDM(reply, 34, 0, 7, 0, 0xE35F, 0) // DTLR 999,989 ns: one sample per run
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	w, _ := format.New("jsonl", &out, format.Options{})
	var late uint64
	loopDone := make(chan error, 1)
	go func() {
		var err error
		late, err = objs.loop(ctx, w, 5*time.Millisecond)
		loopDone <- err
	}()
	stopRuns := testutil.RunConcurrently(objs.PdmTcIngress, frame)
	time.Sleep(2 * time.Second)
	runs, runErr := stopRuns()
	cancel()
	if err := <-loopDone; err != nil {
		t.Fatal(err)
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	_ = w.Close()
	c, err := objs.ReadCounters()
	if err != nil {
		t.Fatal(err)
	}
	var counted uint64
	intervals := map[int64]bool{}
	prevEnd := int64(0)
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var r intervalRecord
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if r.IntervalStart >= r.Timestamp || r.IntervalStart < prevEnd {
			t.Errorf("interval [%d, %d) after one ending at %d", r.IntervalStart, r.Timestamp, prevEnd)
		}
		prevEnd = r.Timestamp
		intervals[r.Timestamp] = true
		counted += r.DTLR.Count
	}
	sent := c[probe.PdmPdmCounterPDM_C_EVENTS]
	if counted != sent || late != 0 || counted == 0 {
		t.Fatalf("counted %d samples over %d intervals, the program sent %d records (ran %d, ring buffer full %d); %d late",
			counted, len(intervals), sent, runs, c[probe.PdmPdmCounterPDM_C_RINGBUF_FULL], late)
	}
	t.Logf("%d samples over %d intervals (%d runs, ring buffer full %d)", counted, len(intervals), runs,
		c[probe.PdmPdmCounterPDM_C_RINGBUF_FULL])
}
