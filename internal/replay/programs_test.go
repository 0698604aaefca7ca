package replay

// Tests of the BPF programs themselves, run through BPF_PROG_TEST_RUN by the
// replay engine: every packet gets an exact capture time (skb->tstamp), so
// RTTs are asserted to the nanosecond. This file holds the shared harness
// and the TCP/ICMP matching tests; *_prog_test.go hold the rest.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/testutil"
)

// t0 is the capture time of the first packet of most tests (Unix ns).
const t0 int64 = 1_700_000_000_000_000_000

const ms = int64(time.Millisecond)

// testConfig is the default configuration with small maps, so that the
// many engines the tests load are quick to create.
func testConfig() loader.Config {
	c := loader.DefaultConfig()
	c.FlowMapSize = 1024
	c.TimestampMapSize = 4096
	c.RingbufSize = 1 << 20
	// Most tests check what one data packet and its reply give; the
	// default rule (ePPing's: a flow first seen mid-stream waits for its
	// next TSval) has tests of its own.
	c.SampleFirstTSval = true
	return c
}

// collect is a Sink that keeps every event.
type collect struct {
	rtts  []events.RTT
	flows []events.FlowEvent
}

func (c *collect) RTT(e *events.RTT) error        { c.rtts = append(c.rtts, *e); return nil }
func (c *collect) Flow(e *events.FlowEvent) error { c.flows = append(c.flows, *e); return nil }

// harness is an engine loaded for one test, with its collected events.
type harness struct {
	tb   testing.TB
	e    *Engine
	c    collect
	last int64 // capture time of the newest packet fed
}

func newHarness(tb testing.TB, cfg loader.Config) *harness {
	tb.Helper()
	testutil.RequireRoot(tb)
	h := &harness{tb: tb}
	e, err := NewEngine(cfg, &h.c)
	if err != nil {
		tb.Fatalf("NewEngine: %v", err)
	}
	tb.Cleanup(func() { e.Close() })
	// These tests are about the tc programs that run live; the XDP replay
	// entry is checked against them in TestXDPReplayMatchesTC.
	e.run = e.newTCRunner()
	h.e = e
	return h
}

// feed runs one frame captured at t (Unix ns); Feed must never fail, whatever
// the frame holds (as long as TEST_RUN accepts it: >= 14 bytes).
func (h *harness) feed(frame []byte, t int64, egress bool) {
	h.tb.Helper()
	h.last = max(h.last, t)
	if err := h.e.Feed(frame, t, egress); err != nil {
		h.tb.Fatalf("Feed(%d bytes at t0%+d, egress=%v): %v", len(frame), t-t0, egress, err)
	}
}

func (h *harness) run(steps []step) {
	h.tb.Helper()
	for _, s := range steps {
		h.feed(s.frame, t0+s.at, s.egress)
	}
}

func (h *harness) expire() {
	h.tb.Helper()
	if err := h.e.Expire(); err != nil {
		h.tb.Fatalf("Expire: %v", err)
	}
}

func (h *harness) stats() events.Stats {
	h.tb.Helper()
	var s events.Stats
	if err := h.e.Stats(&s); err != nil {
		h.tb.Fatalf("Stats: %v", err)
	}
	return s
}

// takeRTTs returns the RTT events collected so far and forgets them.
func (h *harness) takeRTTs() []events.RTT {
	r := h.c.rtts
	h.c.rtts = nil
	return r
}

// takeFlows returns the flow events collected so far and forgets them.
// Seen (when the event was reported) is checked here, against the time of
// the last packet fed, and cleared: expectations name Time only.
func (h *harness) takeFlows() []events.FlowEvent {
	h.tb.Helper()
	f := h.c.flows
	h.c.flows = nil
	for i := range f {
		if f[i].Seen < f[i].Time || f[i].Seen > h.last {
			h.tb.Errorf("flow event %+v: seen outside [time, last packet %d]", f[i], h.last)
		}
		f[i].Seen = 0
	}
	return f
}

// checkSamples compares the collected RTT events with want (in order) and
// forgets them.
func (h *harness) checkSamples(want ...sample) {
	h.tb.Helper()
	got := samplesOf(h.takeRTTs())
	if slices.Equal(got, want) {
		return
	}
	if len(got)+len(want) <= 12 {
		h.tb.Errorf("RTT samples:\n got %s\nwant %s", fmtList(got), fmtList(want))
		return
	}
	missing, extra := diff(want, got), diff(got, want)
	h.tb.Errorf("RTT samples: got %d, want %d (in this order)\nmissing %s\nunexpected %s",
		len(got), len(want), fmtList(missing), fmtList(extra))
}

// diff returns the elements of a that are not in b.
func diff[T comparable](a, b []T) []T {
	var out []T
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// checkFlows compares the collected flow events with want and forgets them.
func (h *harness) checkFlows(want ...events.FlowEvent) {
	h.tb.Helper()
	got := h.takeFlows()
	if !slices.Equal(got, want) {
		h.tb.Errorf("flow events:\n got %s\nwant %s", fmtList(got), fmtList(want))
	}
}

func fmtList[T any](l []T) string {
	if len(l) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, e := range l {
		fmt.Fprintf(&b, "\n   %+v", e)
	}
	return b.String()
}

// sample is the part of an RTT event most tests check.
type sample struct {
	Time   int64 // capture time of the reply
	Flow   events.Flow
	RTT    time.Duration
	Egress bool // MatchOnEgress
}

func samplesOf(rs []events.RTT) []sample {
	var out []sample
	for _, r := range rs {
		out = append(out, sample{Time: r.Time, Flow: r.Flow, RTT: r.RTT, Egress: r.MatchOnEgress})
	}
	return out
}

// step is one packet of a scripted exchange, at offset at from t0.
type step struct {
	at     int64
	frame  []byte
	egress bool
}

// endpoint is one side of a test connection.
type endpoint struct {
	ip   netip.Addr
	port uint16
}

func ep(addr string, port uint16) endpoint {
	return endpoint{ip: netip.MustParseAddr(addr), port: port}
}

// path builds the packets of one connection between a (this host in most
// tests: its packets leave on egress) and b, with the same encapsulation
// for every packet.
type path struct {
	a, b    endpoint
	vlans   []uint16
	qinq    bool
	ext     []pktcraft.ExtHeader // IPv6 only
	ip4opts []byte               // IPv4 only
	noEth   bool
}

func (p path) ends(fromA bool) (src, dst endpoint) {
	if fromA {
		return p.a, p.b
	}
	return p.b, p.a
}

func (p path) packet(fromA bool) pktcraft.Packet {
	src, dst := p.ends(fromA)
	pk := pktcraft.Packet{NoEthernet: p.noEth, VLANs: p.vlans, QinQ: p.qinq, Src: src.ip, Dst: dst.ip}
	if src.ip.Is4() {
		pk.IPv4Options = p.ip4opts
	} else {
		pk.IPv6ExtHeaders = p.ext
	}
	return pk
}

// tcpPacket returns the packet with seg (ports filled in) as transport.
func (p path) tcpPacket(fromA bool, seg pktcraft.TCP) pktcraft.Packet {
	src, dst := p.ends(fromA)
	seg.SrcPort, seg.DstPort = src.port, dst.port
	pk := p.packet(fromA)
	pk.TCP = &seg
	return pk
}

func (p path) tcp(fromA bool, seg pktcraft.TCP) []byte { return p.tcpPacket(fromA, seg).MustBytes() }

// data is an ACK|PSH segment with n bytes of payload.
func (p path) data(fromA bool, tsval, tsecr uint32, n int) []byte {
	return p.tcp(fromA, pktcraft.TCP{ACK: true, PSH: true, TSval: tsval, TSecr: tsecr, Payload: payload(n)})
}

// ack is a pure ACK.
func (p path) ack(fromA bool, tsval, tsecr uint32) []byte {
	return p.tcp(fromA, pktcraft.TCP{ACK: true, TSval: tsval, TSecr: tsecr})
}

// echo is an ICMP or ICMPv6 echo request or reply.
func (p path) echo(fromA, reply bool, id, seq uint16) []byte {
	pk := p.packet(fromA)
	pk.ICMPEcho = &pktcraft.ICMPEcho{Reply: reply, ID: id, Seq: seq, Payload: payload(56)}
	return pk.MustBytes()
}

// tcpFlow is the TCP flow in the direction of a packet sent by a (fromA)
// or by b.
func (p path) tcpFlow(fromA bool) events.Flow {
	src, dst := p.ends(fromA)
	return events.Flow{Src: events.Endpoint{IP: src.ip, Port: src.port}, Dst: events.Endpoint{IP: dst.ip, Port: dst.port}, Proto: events.ProtoTCP}
}

// echoFlow is the ICMP flow of echo identifier id: the identifier stands in
// for both ports.
func (p path) echoFlow(fromA bool, id uint16) events.Flow {
	src, dst := p.ends(fromA)
	proto := events.ProtoICMP
	if !src.ip.Is4() {
		proto = events.ProtoICMPv6
	}
	return events.Flow{Src: events.Endpoint{IP: src.ip, Port: id}, Dst: events.Endpoint{IP: dst.ip, Port: id}, Proto: proto}
}

// payloadLen is the transport payload of a frame built by p (what
// follows the TCP header or the ICMP echo header), the unit of the byte
// counters.
func (p path) payloadLen(frame []byte) uint64 {
	pk := gopacket.NewPacket(frame, p.firstLayer(), gopacket.Default)
	if tcp, ok := pk.TransportLayer().(*layers.TCP); ok {
		return uint64(len(tcp.Payload))
	}
	if l := pk.Layer(layers.LayerTypeICMPv4); l != nil {
		return uint64(len(l.LayerPayload()))
	}
	if l := pk.Layer(layers.LayerTypeICMPv6Echo); l != nil {
		return uint64(len(l.LayerPayload()))
	}
	panic("payloadLen: no TCP or ICMP echo in the frame")
}

func (p path) firstLayer() gopacket.Decoder {
	if !p.noEth {
		return layers.LayerTypeEthernet
	}
	if p.a.ip.Is4() {
		return layers.LayerTypeIPv4
	}
	return layers.LayerTypeIPv6
}

// ipLen is the IP-layer length (header + payload) of a frame built by p,
// the unit of the aggregated traffic counters.
func (p path) ipLen(frame []byte) uint64 {
	l2 := 0
	if !p.noEth {
		l2 = 14 + 4*len(p.vlans)
	}
	return uint64(len(frame) - l2)
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

func opening(t int64, f events.Flow, r events.FlowReason, bySrc bool) events.FlowEvent {
	return events.FlowEvent{Time: t, Flow: f, Type: events.FlowOpening, Reason: r, Source: source(bySrc)}
}

func closing(t int64, f events.Flow, r events.FlowReason, bySrc bool) events.FlowEvent {
	return events.FlowEvent{Time: t, Flow: f, Type: events.FlowClosing, Reason: r, Source: source(bySrc)}
}

// Test paths. In "a after b" paths a's address (or port) sorts after b's, so
// a is the second half of the flow's canonical key: both halves get used.
var (
	pathV4        = path{a: ep("10.0.0.1", 1000), b: ep("10.0.0.2", 80)}
	pathV4Swapped = path{a: ep("10.0.0.9", 40000), b: ep("10.0.0.2", 443)}
	pathV6        = path{a: ep("2001:db8::1", 50000), b: ep("2001:db8::2", 443)}
	pathV6Swapped = path{a: ep("2001:db8:ffff::1", 50001), b: ep("2001:db8::2", 22)}
	pathV6Ports   = path{a: ep("::1", 50002), b: ep("::1", 22)} // one address, ordered by port
)

// exchange is the basic bidirectional script of the matching tests. It
// starts with the exchange of the former smoke test (RTT 40.000123 ms):
//
//	0             a->b data TSval 100 TSecr 7 "hello" (timestamped)
//	40.000123 ms  b->a pure ACK TSecr 100: sample, reply direction b->a
//	50 ms         b->a data TSval 9 (timestamped), TSecr 100 (already used)
//	51.234567 ms  a->b pure ACK TSecr 9: sample, reply direction a->b
//
// egressOf says on which hook each side's packets pass.
func exchange(p path, egressOf func(fromA bool) bool) (steps []step, want []sample) {
	at := func(ofs int64, fromA bool, frame []byte) step {
		return step{at: ofs, frame: frame, egress: egressOf(fromA)}
	}
	hello := p.tcp(true, pktcraft.TCP{ACK: true, PSH: true, TSval: 100, TSecr: 7, Payload: []byte("hello")})
	steps = []step{
		at(0, true, hello),
		at(40_000_123, false, p.ack(false, 8, 100)),
		at(50*ms, false, p.data(false, 9, 100, 200)),
		at(51_234_567, true, p.ack(true, 101, 9)),
	}
	want = []sample{
		{Time: t0 + 40_000_123, Flow: p.tcpFlow(false), RTT: 40_000_123, Egress: egressOf(false)},
		{Time: t0 + 51_234_567, Flow: p.tcpFlow(true), RTT: 1_234_567, Egress: egressOf(true)},
	}
	return steps, want
}

// exchangeFlows are the flow events of exchange: each direction opens
// when the other side first answers it, named from that side (as its
// samples are) and timed at its first timestamp (ePPing's events).
func exchangeFlows(p path) []events.FlowEvent {
	return []events.FlowEvent{
		opening(t0, p.tcpFlow(false), events.ReasonFirstObserved, false),
		opening(t0+50*ms, p.tcpFlow(true), events.ReasonFirstObserved, false),
	}
}

// Hook placements: this host (a's packets leave, b's arrive), a middlebox
// seeing both directions on ingress, and one seeing both on egress.
var hookings = []struct {
	name     string
	egressOf func(fromA bool) bool
}{
	{"host", func(fromA bool) bool { return fromA }},
	{"all-ingress", func(bool) bool { return false }},
	{"all-egress", func(bool) bool { return true }},
}

// TestTCPTimestampMatch: a's data is timestamped and b's ACK echoing its
// TSval gives RTT = reply time - data time, exactly; then the same the other
// way round. The RTT event names the reply's direction and MatchOnEgress is
// the hook of the reply. Both halves of the canonical flow key, IPv4, IPv6.
func TestTCPTimestampMatch(t *testing.T) {
	paths := []struct {
		name string
		p    path
	}{
		{"ipv4", pathV4}, {"ipv4-a-after-b", pathV4Swapped},
		{"ipv6", pathV6}, {"ipv6-a-after-b", pathV6Swapped}, {"ipv6-same-address", pathV6Ports},
	}
	for _, pc := range paths {
		for _, hk := range hookings {
			t.Run(pc.name+"/"+hk.name, func(t *testing.T) {
				h := newHarness(t, testConfig())
				steps, want := exchange(pc.p, hk.egressOf)
				h.run(steps)
				h.checkSamples(want...)
				h.checkFlows(exchangeFlows(pc.p)...)
				s := h.stats()
				if s.Packets != 4 || s.RTTEvents != 2 || s.Timestamps != 0 || s.Flows != 1 {
					t.Errorf("stats %+v: want 4 packets, 2 RTT events, 0 timestamps left, 1 flow", s)
				}
			})
		}
	}
}

// TestTCPTimestampCandidates: which packets of a carry a TSval worth
// timestamping. b's reply echoing it gives a sample only if the packet was
// timestamped: packets without payload (pure ACKs, bare FINs: ePPing's
// rule) are not, whatever the frame length, SYNs only with IncludeSYN; a
// reply without the ACK flag never matches (its TSecr is not valid).
func TestTCPTimestampCandidates(t *testing.T) {
	const rtt = 3_000_017
	padded := func(p path) []byte { // Ethernet trailer after a pure ACK
		return append(p.ack(true, 200, 0), make([]byte, 20)...)
	}
	cases := []struct {
		name       string
		fresh      bool // no earlier traffic: a's packet is the first seen
		includeSYN bool
		pkt        func(p path) []byte // a's packet, TSval 200
		reply      pktcraft.TCP        // b's reply, TSecr 200
		want       bool
	}{
		{name: "pure ACK", pkt: func(p path) []byte { return p.ack(true, 200, 0) }},
		{name: "pure ACK first packet", fresh: true, pkt: func(p path) []byte { return p.ack(true, 200, 0) }},
		{name: "pure ACK with PSH", pkt: func(p path) []byte {
			return p.tcp(true, pktcraft.TCP{ACK: true, PSH: true, TSval: 200})
		}},
		{name: "pure ACK with Ethernet padding", pkt: padded},
		{name: "pure ACK with Ethernet padding first packet", fresh: true, pkt: padded},
		{name: "one byte of data", want: true, pkt: func(p path) []byte { return p.data(true, 200, 0, 1) }},
		{name: "data first packet", fresh: true, want: true, pkt: func(p path) []byte { return p.data(true, 200, 0, 1) }},
		{name: "FIN without payload", pkt: func(p path) []byte {
			return p.tcp(true, pktcraft.TCP{FIN: true, ACK: true, TSval: 200})
		}},
		// ePPing's rule: the FIN closes a's direction right after its
		// timestamp, so the reply matches nothing.
		{name: "FIN with payload", pkt: func(p path) []byte {
			return p.tcp(true, pktcraft.TCP{FIN: true, ACK: true, TSval: 200, Payload: payload(3)})
		}},
		{name: "SYN", fresh: true, pkt: func(p path) []byte {
			return p.tcp(true, pktcraft.TCP{SYN: true, TSval: 200})
		}},
		{name: "SYN with IncludeSYN", fresh: true, includeSYN: true, want: true, pkt: func(p path) []byte {
			return p.tcp(true, pktcraft.TCP{SYN: true, TSval: 200})
		}},
		{name: "RST", pkt: func(p path) []byte {
			return p.tcp(true, pktcraft.TCP{RST: true, ACK: true, TSval: 200})
		}},
		{name: "data without timestamp option", pkt: func(p path) []byte {
			return p.tcp(true, pktcraft.TCP{ACK: true, NoTimestamp: true, Payload: payload(10)})
		}},
		{name: "data, reply without ACK flag", reply: pktcraft.TCP{PSH: true, Payload: payload(10)}, pkt: func(p path) []byte {
			return p.data(true, 200, 0, 1)
		}},
	}
	for _, fam := range []struct {
		name string
		p    path
	}{{"ipv4", pathV4}, {"ipv6", pathV6}} {
		for _, c := range cases {
			t.Run(fam.name+"/"+c.name, func(t *testing.T) {
				p := fam.p
				cfg := testConfig()
				cfg.IncludeSYN = c.includeSYN
				h := newHarness(t, cfg)
				start := int64(0)
				if !c.fresh {
					// b's data (TSval 50) makes the flow known and is
					// itself timestamped; a's packet does not echo it.
					h.feed(p.data(false, 50, 0, 100), t0, false)
					start = 10 * ms
				}
				h.feed(c.pkt(p), t0+start, true)
				reply := c.reply
				if reply.Payload == nil && !reply.PSH {
					reply = pktcraft.TCP{ACK: true, PSH: true, Payload: payload(10)}
				}
				reply.TSval, reply.TSecr = 51, 200
				h.feed(p.tcp(false, reply), t0+start+rtt, false)
				var want []sample
				if c.want {
					want = append(want, sample{Time: t0 + start + rtt, Flow: p.tcpFlow(false), RTT: rtt})
				}
				h.checkSamples(want...)
			})
		}
	}
}

// TestTCPRepeatedTSval: only the first packet carrying a TSval is
// timestamped (later ones would give samples shortened by their delay), and
// each timestamp is matched once. Rate limiting is off, so nothing but the
// identifier rule keeps the second packet from being timestamped.
func TestTCPRepeatedTSval(t *testing.T) {
	for _, p := range []path{pathV4, pathV6} {
		t.Run(p.a.ip.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.RateLimit = 0
			h := newHarness(t, cfg)
			h.run([]step{
				{0, p.data(true, 300, 0, 1000), true},
				{1*ms + 11, p.data(true, 300, 0, 1000), true},      // same TSval: not timestamped
				{5*ms + 3, p.ack(false, 900, 300), false},          // RTT from the first
				{6 * ms, p.ack(false, 901, 300), false},            // echoes 300 again: nothing
				{7 * ms, p.data(false, 902, 300, 10), false},       // and again: nothing
				{8 * ms, p.data(true, 300, 902, 1000), true},       // same TSval a third time; matches b's 902
				{9*ms + 999, p.ack(false, 903, 300), false},        // nothing
				{20 * ms, p.data(true, 301, 903, 1000), true},      // new TSval: timestamped
				{20*ms + 2_000_001, p.ack(false, 904, 301), false}, // 2.000001 ms
			})
			h.checkSamples(
				sample{Time: t0 + 5*ms + 3, Flow: p.tcpFlow(false), RTT: 5*time.Millisecond + 3},
				sample{Time: t0 + 8*ms, Flow: p.tcpFlow(true), RTT: time.Millisecond, Egress: true},
				sample{Time: t0 + 20*ms + 2_000_001, Flow: p.tcpFlow(false), RTT: 2_000_001},
			)
			if s := h.stats(); s.Timestamps != 0 {
				t.Errorf("%d timestamps left, want 0", s.Timestamps)
			}
		})
	}
}

// TestICMPEcho: echo requests are timestamped by sequence number, replies
// with the same identifier and sequence match once; the echo identifier is
// reported as both ports. Unknown sequences, other identifiers and
// duplicates give nothing.
func TestICMPEcho(t *testing.T) {
	const id, otherID, peerID = 0x1234, 0x9999, 0x0042
	for _, fam := range []struct {
		name string
		p    path
	}{{"ipv4", pathV4}, {"ipv6", pathV6}} {
		p := fam.p
		t.Run(fam.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.TrackICMP = true
			cfg.RateLimit = 0
			h := newHarness(t, cfg)
			req := func(at int64, seq uint16) step { return step{at, p.echo(true, false, id, seq), true} }
			rep := func(at int64, id, seq uint16) step { return step{at, p.echo(false, true, id, seq), false} }
			h.run([]step{
				req(0, 1),
				rep(10_000_001, id, 1),
				req(1000*ms, 2),
				req(2000*ms, 3),
				rep(2000*ms+30_000_003, id, 3), // out of order
				rep(2100*ms, id, 2),            // 1.1 s
				rep(2200*ms, id, 9),            // never requested
				req(3000*ms, 4),
				rep(3010*ms, otherID, 4), // another identifier: another flow
				rep(3020*ms+7, id, 4),
				rep(3500*ms, id, 1), // duplicate
				// b pings a: request in, reply out, matched on egress.
				{4000 * ms, p.echo(false, false, peerID, 7), false},
				{4000*ms + 100_003, p.echo(true, true, peerID, 7), true},
			})
			back := p.echoFlow(false, id)
			h.checkSamples(
				sample{Time: t0 + 10_000_001, Flow: back, RTT: 10_000_001},
				sample{Time: t0 + 2000*ms + 30_000_003, Flow: back, RTT: 30_000_003},
				sample{Time: t0 + 2100*ms, Flow: back, RTT: 1100 * time.Millisecond},
				sample{Time: t0 + 3020*ms + 7, Flow: back, RTT: 20*time.Millisecond + 7},
				sample{Time: t0 + 4000*ms + 100_003, Flow: p.echoFlow(true, peerID), RTT: 100_003, Egress: true},
			)
			h.checkFlows(
				opening(t0, back, events.ReasonFirstObserved, false),
				opening(t0+4000*ms, p.echoFlow(true, peerID), events.ReasonFirstObserved, false),
			)
		})
		t.Run(fam.name+"/not-tracked", func(t *testing.T) {
			h := newHarness(t, testConfig()) // TrackICMP off
			h.run([]step{{0, p.echo(true, false, id, 1), true}, {ms, p.echo(false, true, id, 1), false}})
			h.checkSamples()
			h.checkFlows()
		})
	}
}

// TestReplayIgnoresLocalFilter: live, packets arriving for this host are not
// timestamped (their replies would time the local application); in replay
// the capture comes from elsewhere, so the filter is off. ::1 and 127.0.0.1
// are local addresses of the namespace TEST_RUN uses.
func TestReplayIgnoresLocalFilter(t *testing.T) {
	for _, p := range []path{
		{a: ep("127.0.0.1", 5201), b: ep("127.0.0.1", 40000)},
		{a: ep("::1", 5201), b: ep("::1", 40000)},
	} {
		t.Run(p.a.ip.String(), func(t *testing.T) {
			h := newHarness(t, testConfig())
			// b's data arrives for a, a local address; a's reply leaves.
			h.run([]step{
				{0, p.data(false, 10, 0, 100), false},
				{123_457, p.ack(true, 20, 10), true},
			})
			h.checkSamples(sample{Time: t0 + 123_457, Flow: p.tcpFlow(true), RTT: 123_457, Egress: true})

			// The same program loaded for live use does filter it.
			live, err := loader.Load(testConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer live.Close()
			if _, err := live.RttscopeTcIngress.Run(&ebpf.RunOptions{Data: p.data(false, 10, 0, 100)}); err != nil {
				t.Fatal(err)
			}
			var s events.Stats
			if err := live.Stats(&s); err != nil {
				t.Fatal(err)
			}
			if s.Packets != 1 || s.Flows != 1 || s.Timestamps != 0 {
				t.Errorf("live ingress to a local address: stats %+v, want 1 packet, 1 flow, 0 timestamps", s)
			}
		})
	}
}

func source(bySrc bool) events.FlowSource {
	if bySrc {
		return events.SourceSrc
	}
	return events.SourceDest
}
