package replay

// Per-flow state: rate limits, flow opening and closing events, expiry by
// the cleanup iterators, and the RTT statistics and counters of samples.

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// TestRateLimit: both sides send data every 10 ms for a second and every
// packet is answered (a's after rttA, b's after rttB). Which packets give
// samples depends only on the rate limit of their direction:
//   - RateLimit: at most one timestamp per RateLimit per direction (the
//     first packet of a new flow is always timestamped);
//   - RTTRate: once the direction has an RTT, RTTRate x min RTT replaces
//     RateLimit (which still applies before).
func TestRateLimit(t *testing.T) {
	const rttA, rttB = 25_000_001, 3_000_007
	// every returns the send offsets first, first+step, ... of one side:
	// a sends at 0, 10, ..., 990 ms, b at 5, 15, ..., 995 ms.
	every := func(first, step int64) []int64 {
		var o []int64
		for s := first; s <= 990*ms+first%(10*ms); s += step {
			o = append(o, s)
		}
		return o
	}
	cases := []struct {
		name      string
		rateLimit time.Duration
		rttRate   float64
		wantA     []int64 // send offsets of a's sampled packets
		wantB     []int64
	}{
		{"rate-limit-100ms", 100 * time.Millisecond, 0, every(0, 100*ms), every(5*ms, 100*ms)},
		{"rate-limit-35ms", 35 * time.Millisecond, 0, every(0, 40*ms), every(5*ms, 40*ms)},
		{"rate-limit-0", 0, 0, every(0, 10*ms), every(5*ms, 10*ms)},
		// No RTT yet: 0, 10, 20 (limit 0). From 25 ms the limit is
		// 25.000001 ms: 50, 80, ... b's 3 ms RTT limits nothing.
		{"rtt-rate-1", 0, 1, append([]int64{0, 10 * ms, 20 * ms}, every(50*ms, 30*ms)...), every(5*ms, 10*ms)},
		// 100 ms until the first RTT, then 2.5 x 25.000001 ms = 62.5 ms:
		// 0, 70, 140, ... For b: 100 ms until its first sample at 8 ms,
		// then 7.5 ms: every packet from 15 ms on.
		{"rtt-rate-2.5", 100 * time.Millisecond, 2.5, every(0, 70*ms), every(5*ms, 10*ms)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pathV4
			cfg := testConfig()
			cfg.RateLimit, cfg.RTTRate = c.rateLimit, c.rttRate
			h := newHarness(t, cfg)
			var steps []step
			for i := range 100 {
				at := int64(i) * 10 * ms
				ida, idb := uint32(1000+i), uint32(5000+i)
				steps = append(steps,
					step{at, p.data(true, ida, 0, 100), true},
					step{at + rttA, p.ack(false, 1, ida), false},
					step{at + 5*ms, p.data(false, idb, 0, 100), false},
					step{at + 5*ms + rttB, p.ack(true, 1, idb), true},
				)
			}
			slices.SortStableFunc(steps, func(x, y step) int { return cmp.Compare(x.at, y.at) })
			h.run(steps)

			var want []sample
			for _, s := range c.wantA {
				want = append(want, sample{Time: t0 + s + rttA, Flow: p.tcpFlow(false), RTT: rttA})
			}
			for _, s := range c.wantB {
				want = append(want, sample{Time: t0 + s + rttB, Flow: p.tcpFlow(true), RTT: rttB, Egress: true})
			}
			slices.SortFunc(want, func(x, y sample) int { return cmp.Compare(x.Time, y.Time) })
			h.checkSamples(want...)
		})
	}
}

// tick advances the replay clock (the iterators' "now") without creating
// any state: a pure ACK of an unrelated connection.
func tick() []byte {
	return path{a: ep("192.0.2.1", 1), b: ep("192.0.2.2", 2)}.ack(true, 1, 1)
}

// TestFlowEvents: ePPing's flow events. A direction opens when the other
// side first answers it (reason: SYN, SYN-ACK with IncludeSYN, first
// observed packet otherwise), and closes with its FIN or either side's RST
// if it had opened. Events name the direction as its samples are (from the
// answering side) and say which end caused them; the flow goes once
// neither direction is active.
func TestFlowEvents(t *testing.T) {
	p := pathV4Swapped // a's side is the second half of the flow key
	syn := p.tcp(true, pktcraft.TCP{SYN: true, TSval: 1, ExtraOptions: pktcraft.OptMSS(1460)})
	synAck := p.tcp(false, pktcraft.TCP{SYN: true, ACK: true, TSval: 900, TSecr: 1, ExtraOptions: pktcraft.OptMSS(1400)})
	ack := p.ack(true, 2, 900)
	ab, ba := p.tcpFlow(true), p.tcpFlow(false)

	t.Run("include-syn/handshake", func(t *testing.T) {
		cfg := testConfig()
		cfg.IncludeSYN = true
		h := newHarness(t, cfg)
		h.run([]step{{0, syn, true}, {20_000_001, synAck, false}, {20_300_001, ack, true}})
		h.checkFlows(opening(t0, ba, events.ReasonSYN, false), opening(t0+20_000_001, ab, events.ReasonSYNACK, false))
		h.checkSamples(
			sample{Time: t0 + 20_000_001, Flow: ba, RTT: 20_000_001},
			sample{Time: t0 + 20_300_001, Flow: ab, RTT: 300_000, Egress: true},
		)
	})
	t.Run("include-syn/syn-ack-first", func(t *testing.T) {
		cfg := testConfig()
		cfg.IncludeSYN = true
		h := newHarness(t, cfg)
		h.run([]step{{0, synAck, false}, {ms, ack, true}})
		h.checkFlows(opening(t0, ab, events.ReasonSYNACK, false))
		h.checkSamples(sample{Time: t0 + ms, Flow: ab, RTT: time.Millisecond, Egress: true})
	})
	t.Run("without-syn", func(t *testing.T) {
		h := newHarness(t, testConfig())
		h.run([]step{{0, syn, true}, {20 * ms, synAck, false}, {21 * ms, ack, true}})
		h.checkFlows()
		h.checkSamples()
		if s := h.stats(); s.Flows != 0 || s.Timestamps != 0 {
			t.Errorf("the handshake left state: %+v", s)
		}
		h.run([]step{{30 * ms, p.data(true, 3, 900, 10), true}, {31 * ms, p.ack(false, 901, 3), false}})
		h.checkFlows(opening(t0+30*ms, ba, events.ReasonFirstObserved, false))
		h.checkSamples(sample{Time: t0 + 31*ms, Flow: ba, RTT: time.Millisecond})
	})

	// established: a's data opened the flow, b answered.
	established := []step{{0, p.data(true, 10, 0, 10), true}, {ms, p.ack(false, 20, 10), false}}
	fin := func(fromA bool, tsval, tsecr uint32) []byte {
		return p.tcp(fromA, pktcraft.TCP{FIN: true, ACK: true, TSval: tsval, TSecr: tsecr})
	}
	for _, c := range []struct {
		name   string
		steps  []step
		flows  []events.FlowEvent
		rtts   []sample
		remain uint64 // flows left
	}{
		{
			// b never sent anything worth timestamping: a's FIN ends
			// the flow; b's FIN finds none. A bare FIN is not
			// timestamped (no payload).
			name:   "fin-from-opener-then-peer",
			steps:  []step{{100 * ms, fin(true, 11, 20), true}, {102_000_003, fin(false, 21, 11), false}, {103 * ms, p.ack(true, 12, 21), true}},
			flows:  []events.FlowEvent{closing(t0+100*ms, ba, events.ReasonFIN, false)},
			remain: 0,
		},
		{
			// b's direction never opened: its FIN closes it silently.
			name:   "fin-from-peer-then-opener",
			steps:  []step{{100 * ms, fin(false, 21, 10), false}, {100*ms + 500, fin(true, 11, 21), true}},
			flows:  []events.FlowEvent{closing(t0+100*ms+500, ba, events.ReasonFIN, false)},
			remain: 0,
		},
		{
			// b's data after a's FIN starts a new flow (b's).
			name:   "fin-from-one-side-only",
			steps:  []step{{100 * ms, fin(true, 11, 20), true}, {101 * ms, p.data(false, 21, 11, 10), false}},
			flows:  []events.FlowEvent{closing(t0+100*ms, ba, events.ReasonFIN, false)},
			remain: 1,
		},
		{
			name:   "rst-from-peer",
			steps:  []step{{100 * ms, p.tcp(false, pktcraft.TCP{RST: true, ACK: true, TSval: 21, TSecr: 10}), false}},
			flows:  []events.FlowEvent{closing(t0+100*ms, ba, events.ReasonRST, true)},
			remain: 0,
		},
		{
			name: "rst-then-reopened",
			steps: []step{
				{100 * ms, p.tcp(true, pktcraft.TCP{RST: true, TSval: 11}), true},
				{200 * ms, p.data(false, 30, 0, 10), false},
				{201 * ms, p.ack(true, 12, 30), true},
			},
			flows: []events.FlowEvent{
				closing(t0+100*ms, ba, events.ReasonRST, false),
				opening(t0+200*ms, ab, events.ReasonFirstObserved, false),
			},
			rtts:   []sample{{Time: t0 + 201*ms, Flow: ab, RTT: time.Millisecond, Egress: true}},
			remain: 1,
		},
		{
			// Both directions opened: an RST closes both, each with
			// its event.
			name: "rst-closes-both",
			steps: []step{
				{100 * ms, p.data(false, 30, 10, 10), false},
				{101 * ms, p.ack(true, 12, 30), true},
				{102 * ms, p.tcp(true, pktcraft.TCP{RST: true, ACK: true, TSval: 13, TSecr: 30}), true},
			},
			flows: []events.FlowEvent{
				opening(t0+100*ms, ab, events.ReasonFirstObserved, false),
				closing(t0+102*ms, ba, events.ReasonRST, false),
				closing(t0+102*ms, ab, events.ReasonRST, true),
			},
			rtts:   []sample{{Time: t0 + 101*ms, Flow: ab, RTT: time.Millisecond, Egress: true}},
			remain: 0,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			h.run(established)
			h.checkFlows(opening(t0, ba, events.ReasonFirstObserved, false))
			h.checkSamples(sample{Time: t0 + ms, Flow: ba, RTT: time.Millisecond})
			h.run(c.steps)
			h.checkFlows(c.flows...)
			h.checkSamples(c.rtts...)
			if s := h.stats(); s.Flows != c.remain {
				t.Errorf("%d flows left, want %d", s.Flows, c.remain)
			}
			h.checkFlowUsed()
		})
	}
	t.Run("closing-packets-open-nothing", func(t *testing.T) {
		h := newHarness(t, testConfig())
		h.run([]step{
			{0, p.tcp(true, pktcraft.TCP{RST: true, ACK: true, TSval: 5, Payload: payload(10)}), true},
			{ms, fin(false, 6, 5), false},
		})
		// A RST (even with data) or a FIN of an unknown flow is worth no
		// state: it would only be deleted again.
		h.checkFlows()
		if s := h.stats(); s.Flows != 0 {
			t.Errorf("%d flows, want 0", s.Flows)
		}
	})
}

// flowOrder sorts flow events of a map walk (hash order) for comparison.
func flowOrder(x, y events.FlowEvent) int {
	return cmp.Compare(fmt.Sprint(x.Flow), fmt.Sprint(y.Flow))
}

// TestFlowTimeout: a flow idle for more than its timeout (TCP or other) is
// removed by Expire; each of its directions that had opened reports
// "closing due to flow timeout from garbage collection" at the time of the
// newest packet, once; a flow idle for exactly the timeout is kept.
func TestFlowTimeout(t *testing.T) { forEachVariant(t, cleanupVariants, testFlowTimeout) }

func timedOut(t int64, f events.Flow) events.FlowEvent {
	return events.FlowEvent{Time: t, Flow: f, Type: events.FlowClosing, Reason: events.ReasonTimeout, Source: events.SourceGC}
}

func testFlowTimeout(t *testing.T, check func(*harness)) {
	sec := time.Second.Nanoseconds()
	cfg := testConfig()
	cfg.TCPFlowTimeout = 2 * time.Second
	cfg.OtherFlowTimeout = 1 * time.Second
	cfg.TrackICMP = true
	h := newHarness(t, cfg)
	check(h)
	x1, x2 := pathV4, pathV4Swapped // opened by the first / second half of the key
	x3 := path{a: ep("10.0.0.1", 1001), b: ep("10.0.0.2", 80)}
	x4 := path{a: ep("10.0.0.1", 1002), b: ep("10.0.0.2", 80)} // never answered
	h.run([]step{
		{0, x1.data(true, 1, 0, 10), true},
		{0, x2.data(true, 1, 0, 10), true},
		{0, x3.data(true, 1, 0, 10), true},
		{0, x4.data(true, 1, 0, 10), true},
		{ms, x1.ack(false, 2, 1), false},
		{ms, x2.ack(false, 2, 1), false},
		{ms, x3.tcp(false, pktcraft.TCP{FIN: true, ACK: true, TSval: 2, TSecr: 1}), false}, // b closes, a never does
		{500 * ms, pathV6.echo(true, false, 77, 1), true},
		{501 * ms, pathV6.echo(false, true, 77, 1), false},
	})
	h.checkFlows(
		opening(t0, x1.tcpFlow(false), events.ReasonFirstObserved, false),
		opening(t0, x2.tcpFlow(false), events.ReasonFirstObserved, false),
		opening(t0, x3.tcpFlow(false), events.ReasonFirstObserved, false), // b's FIN answers a
		opening(t0+500*ms, pathV6.echoFlow(false, 77), events.ReasonFirstObserved, false),
	)
	h.takeRTTs()

	// 1.501 s: exactly the ICMP flow's timeout (from 0.501 s): kept.
	h.feed(tick(), t0+1501*ms, true)
	h.expire()
	h.checkFlows()
	// One ns later it goes.
	h.feed(tick(), t0+1501*ms+1, true)
	h.expire()
	h.checkFlows(timedOut(t0+1501*ms+1, pathV6.echoFlow(false, 77)))
	if s := h.stats(); s.FlowsTimedOut != 1 || s.Flows != 4 {
		t.Errorf("after the ICMP timeout: %+v, want 1 timed out, 4 flows", s)
	}
	// 2 s: x4's timeout (its last packet at 0): it goes without an event
	// (it never opened); the others are kept. 2 s + 1 ms: exactly theirs,
	// kept; one ns later all three go, each with one event (x3's b side
	// had closed with its FIN, and never opened).
	h.feed(tick(), t0+2*sec+1, true)
	h.expire()
	h.checkFlows()
	if s := h.stats(); s.FlowsTimedOut != 2 || s.Flows != 3 {
		t.Errorf("after x4's timeout: %+v, want 2 timed out, 3 flows", s)
	}
	h.feed(tick(), t0+2*sec+ms, true)
	h.expire()
	h.checkFlows()
	h.feed(tick(), t0+2*sec+ms+1, true)
	h.expire()
	got := h.takeFlows()
	slices.SortFunc(got, flowOrder)
	want := []events.FlowEvent{
		timedOut(t0+2*sec+ms+1, x1.tcpFlow(false)),
		timedOut(t0+2*sec+ms+1, x2.tcpFlow(false)),
		timedOut(t0+2*sec+ms+1, x3.tcpFlow(false)),
	}
	slices.SortFunc(want, flowOrder)
	if !slices.Equal(got, want) {
		t.Errorf("timeouts:\n got %s\nwant %s", fmtList(got), fmtList(want))
	}
	if s := h.stats(); s.FlowsTimedOut != 5 || s.Flows != 0 {
		t.Errorf("after the TCP timeouts: %+v, want 5 timed out, no flows", s)
	}
	h.checkFlowUsed()
	// x4's unanswered timestamp (TimestampTimeout 10 s) is still there;
	// a late reply finds no flow and gives nothing.
	h.feed(x4.ack(false, 3, 1), t0+3*sec, false)
	h.checkSamples()
}

// TestTimestampTimeout: an unanswered timestamp is removed by Expire once
// older than TimestampTimeout, and its late reply gives nothing; the flow
// keeps measuring.
func TestTimestampTimeout(t *testing.T) { forEachVariant(t, cleanupVariants, testTimestampTimeout) }

func testTimestampTimeout(t *testing.T, check func(*harness)) {
	sec := time.Second.Nanoseconds()
	cfg := testConfig()
	cfg.TimestampTimeout = time.Second
	h := newHarness(t, cfg)
	check(h)
	p := pathV6
	h.feed(p.data(true, 10, 0, 10), t0, true)
	h.feed(p.data(false, 50, 0, 10), t0+ms, false) // b's, answered below
	h.feed(p.ack(true, 10, 50), t0+2*ms, true)
	h.checkSamples(sample{Time: t0 + 2*ms, Flow: p.tcpFlow(true), RTT: time.Millisecond, Egress: true})

	h.feed(tick(), t0+sec, true)
	h.expire()
	if s := h.stats(); s.TimestampsExpired != 0 || s.Timestamps != 1 {
		t.Errorf("at exactly the timeout: %+v, want the timestamp kept", s)
	}
	h.feed(tick(), t0+sec+1, true)
	h.expire()
	if s := h.stats(); s.TimestampsExpired != 1 || s.Timestamps != 0 || s.Flows != 1 {
		t.Errorf("after the timeout: %+v, want 1 expired, none left, the flow kept", s)
	}
	h.feed(p.ack(false, 51, 10), t0+sec+2, false)
	h.checkSamples()
	h.feed(p.data(true, 11, 51, 10), t0+2*sec, true)
	h.feed(p.ack(false, 52, 11), t0+2*sec+5, false)
	h.checkSamples(sample{Time: t0 + 2*sec + 5, Flow: p.tcpFlow(false), RTT: 5})
	h.checkFlows(opening(t0, p.tcpFlow(false), events.ReasonFirstObserved, false),
		opening(t0+ms, p.tcpFlow(true), events.ReasonFirstObserved, false))
}

// TestRTTStatistics: each sample carries the minimum and the smoothed RTT of
// the timestamped direction (srtt = srtt - srtt/8 + rtt/8 in integer ns,
// starting at the first RTT) and what that direction sent and received
// since it became active (its first packet worth timestamping), in packets
// and payload bytes (what follows the transport header), as ePPing counts.
// The other direction has its own: b's counters start with b's data, not
// with the flow.
func TestRTTStatistics(t *testing.T) {
	rtts := []uint64{50_000_003, 40_000_005, 45_000_007, 30_000_001, 60_000_011, 30_000_001, 29_999_999}
	for _, p := range []path{pathV4, pathV6, {a: pathV6.a, b: pathV6.b, vlans: []uint16{3}, ext: []pktcraft.ExtHeader{pktcraft.HopByHop()}}} {
		t.Run(fmt.Sprintf("%v-%d-vlans", p.a.ip, len(p.vlans)), func(t *testing.T) {
			h := newHarness(t, testConfig())
			sec := time.Second.Nanoseconds()
			var (
				aData, aAck, bAck = p.data(true, 100, 0, 100), p.ack(true, 100, 0), p.ack(false, 1, 100)
				dataLen, ackLen   = p.payloadLen(aData), p.payloadLen(aAck)
				bAckLen           = p.payloadLen(bAck)
				minRTT, srtt      uint64
				want              []events.RTT
			)
			for k, rtt := range rtts {
				at := int64(k) * sec
				id := uint32(100 + k)
				h.feed(p.data(true, id, 0, 100), t0+at, true)
				h.feed(p.ack(true, id, 0), t0+at+ms, true) // counted, not timestamped
				h.feed(p.ack(false, 1, id), t0+at+int64(rtt), false)
				if minRTT == 0 || rtt < minRTT {
					minRTT = rtt
				}
				if srtt == 0 {
					srtt = rtt
				} else {
					srtt = srtt - srtt>>3 + rtt>>3
				}
				n := uint64(k + 1)
				want = append(want, events.RTT{
					Time: t0 + at + int64(rtt), Flow: p.tcpFlow(false),
					RTT: time.Duration(rtt), MinRTT: time.Duration(minRTT), SmoothedRTT: time.Duration(srtt),
					SentPackets: 2 * n, SentBytes: n * (dataLen + ackLen),
					RecPackets: n, RecBytes: n * bAckLen,
				})
			}
			// b's own sample: its minimum and srtt are its own RTT.
			at := 10 * sec
			bData, aReply := p.data(false, 7000, 0, 300), p.ack(true, 200, 7000)
			h.feed(bData, t0+at, false)
			h.feed(aReply, t0+at+7_777_777, true)
			want = append(want, events.RTT{
				Time: t0 + at + 7_777_777, Flow: p.tcpFlow(true), MatchOnEgress: true,
				RTT: 7_777_777, MinRTT: 7_777_777, SmoothedRTT: 7_777_777,
				SentPackets: 1, SentBytes: p.payloadLen(bData),
				RecPackets: 1, RecBytes: p.payloadLen(aReply),
			})

			got := h.takeRTTs()
			for i := range got {
				got[i].Ifindex = 0 // loopback in TEST_RUN; not under test
			}
			if !slices.Equal(got, want) {
				t.Errorf("RTT events:\n got %s\nwant %s", fmtList(got), fmtList(want))
			}
			if dataLen != 100 || ackLen != 0 || bAckLen != 0 || p.payloadLen(bData) != 300 {
				t.Fatalf("payload lengths %d %d %d %d: want 100 0 0 300", dataLen, ackLen, bAckLen, p.payloadLen(bData))
			}
			if srtt == minRTT || srtt == rtts[len(rtts)-1] {
				t.Fatal("test data does not tell srtt from min or last RTT")
			}
		})
	}
}
