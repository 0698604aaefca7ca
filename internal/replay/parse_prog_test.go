package replay

// Parser coverage: encapsulations that must still yield the same samples
// (VLAN tags, IPv6 extension headers, IPv4 options, TCP option layouts) and
// truncated or malformed headers that must yield nothing, without error.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// result is everything a script produced.
type result struct {
	rtts  []events.RTT
	flows []events.FlowEvent
	stats events.Stats
}

func runScript(t *testing.T, steps []step) result {
	t.Helper()
	return runScriptWith(t, testConfig(), steps)
}

func runScriptWith(t *testing.T, cfg loader.Config, steps []step) result {
	t.Helper()
	h := newHarness(t, cfg)
	h.run(steps)
	return result{rtts: h.takeRTTs(), flows: h.takeFlows(), stats: h.stats()}
}

// sameAs checks that got equals ref in every field of every event (byte
// counters included: they count IP-layer bytes, not the encapsulation),
// and in the counters.
func sameAs(t *testing.T, got, ref result) {
	t.Helper()
	if len(ref.rtts) == 0 {
		t.Fatal("reference run gave no samples")
	}
	if !slices.Equal(got.rtts, ref.rtts) {
		t.Errorf("RTT events:\n got %s\nwant %s", fmtList(got.rtts), fmtList(ref.rtts))
	}
	if !slices.Equal(got.flows, ref.flows) {
		t.Errorf("flow events:\n got %s\nwant %s", fmtList(got.flows), fmtList(ref.flows))
	}
	if got.stats != ref.stats {
		t.Errorf("stats: got %+v, want %+v", got.stats, ref.stats)
	}
}

// isEmpty checks that a script produced no event and left no state.
func isEmpty(t *testing.T, got result, packets int) {
	t.Helper()
	if len(got.rtts) != 0 || len(got.flows) != 0 {
		t.Errorf("want no events, got RTT %s\nflow %s", fmtList(got.rtts), fmtList(got.flows))
	}
	want := events.Stats{Packets: uint64(packets)}
	if got.stats != want {
		t.Errorf("stats: got %+v, want %+v", got.stats, want)
	}
}

func hostHooks(fromA bool) bool { return fromA }

// echoExchange: a pings b twice (sequence 1 and 2), b answers both.
func echoExchange(p path) []step {
	return []step{
		{0, p.echo(true, false, 77, 1), true},
		{7_000_009, p.echo(false, true, 77, 1), false},
		{1000 * ms, p.echo(true, false, 77, 2), true},
		{1000*ms + 123, p.echo(false, true, 77, 2), false},
	}
}

// TestVLAN: one 802.1Q tag, QinQ (802.1ad outer tag) and two 802.1Q tags
// give exactly the events of the untagged frames. More tags than the
// parser's two are not looked into.
func TestVLAN(t *testing.T) {
	for _, base := range []path{pathV4, pathV6} {
		tcpRef, _ := exchange(base, hostHooks)
		var ref, echoRef result
		t.Run(base.a.ip.String()+"/untagged", func(t *testing.T) {
			ref = runScript(t, tcpRef)
			echoRef = runEchoScript(t, echoExchange(base))
		})
		for _, c := range []struct {
			name  string
			vlans []uint16
			qinq  bool
			want  bool
		}{
			{"802.1Q", []uint16{100}, false, true},
			{"802.1Q-pcp-dei", []uint16{7<<13 | 1<<12 | 4094}, false, true},
			{"QinQ-802.1ad", []uint16{200, 100}, true, true},
			{"double-802.1Q", []uint16{200, 100}, false, true},
			{"three-tags", []uint16{300, 200, 100}, true, false},
		} {
			t.Run(base.a.ip.String()+"/"+c.name, func(t *testing.T) {
				p := base
				p.vlans, p.qinq = c.vlans, c.qinq
				steps, _ := exchange(p, hostHooks)
				got := runScript(t, steps)
				echo := runEchoScript(t, echoExchange(p))
				if c.want {
					sameAs(t, got, ref)
					sameAs(t, echo, echoRef)
				} else {
					isEmpty(t, got, len(steps))
					isEmpty(t, echo, 4)
				}
			})
		}
	}
}

func runEchoScript(t *testing.T, steps []step) result {
	t.Helper()
	cfg := testConfig()
	cfg.TrackICMP = true
	h := newHarness(t, cfg)
	h.run(steps)
	return result{rtts: h.takeRTTs(), flows: h.takeFlows(), stats: h.stats()}
}

// TestIPv6ExtensionHeaders: TCP and ICMPv6 behind hop-by-hop, routing,
// destination options, AH and first-fragment headers are found; a chain of
// up to 8 extension headers is walked, a longer one and non-first
// fragments (no transport header) give nothing.
func TestIPv6ExtensionHeaders(t *testing.T) {
	seg1 := netip.MustParseAddr("2001:db8:5::1").As16()
	seg2 := netip.MustParseAddr("2001:db8:6::1").As16()
	ah := pktcraft.ExtHeader{Type: pktcraft.ProtoAH, Data: make([]byte, 22)} // SPI, seq, 96-bit ICV
	pdm := pktcraft.DestOpts(pktcraft.PDMOption(1, 2, 3, 4, 5, 6)...)
	cases := []struct {
		name string
		ext  []pktcraft.ExtHeader
		want bool
	}{
		{"hop-by-hop", []pktcraft.ExtHeader{pktcraft.HopByHop()}, true},
		{"hop-by-hop-router-alert", []pktcraft.ExtHeader{pktcraft.HopByHop(5, 2, 0, 0)}, true},
		{"routing-srh", []pktcraft.ExtHeader{pktcraft.RoutingHeader(4, 1, seg1, seg2)}, true},
		{"destination-options-pdm", []pktcraft.ExtHeader{pdm}, true},
		{"first-fragment", []pktcraft.ExtHeader{pktcraft.FragmentHeader(0, true, 0xabcd)}, true},
		{"atomic-fragment", []pktcraft.ExtHeader{pktcraft.FragmentHeader(0, false, 7)}, true},
		{"ah", []pktcraft.ExtHeader{ah}, true},
		{"all-kinds", []pktcraft.ExtHeader{
			pktcraft.HopByHop(5, 2, 0, 0), pktcraft.DestOpts(), pktcraft.RoutingHeader(4, 0, seg1),
			pktcraft.FragmentHeader(0, true, 1), ah, pdm,
		}, true},
		{"chain-of-8", pktcraft.DestOptsChain(8), true},
		{"chain-of-9", pktcraft.DestOptsChain(9), false},
		{"chain-of-12", pktcraft.DestOptsChain(12), false},
		{"non-first-fragment", []pktcraft.ExtHeader{pktcraft.FragmentHeader(1, true, 9)}, false},
		{"last-fragment", []pktcraft.ExtHeader{pktcraft.FragmentHeader(185, false, 9)}, false},
		{"non-first-fragment-after-hop-by-hop", []pktcraft.ExtHeader{pktcraft.HopByHop(), pktcraft.FragmentHeader(3, true, 9)}, false},
	}
	tcpRef, _ := exchange(pathV6, hostHooks)
	var ref, echoRef result
	t.Run("none", func(t *testing.T) {
		ref = runScript(t, tcpRef)
		echoRef = runEchoScript(t, echoExchange(pathV6))
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pathV6
			p.ext = c.ext
			steps, _ := exchange(p, hostHooks)
			got := runScript(t, steps)
			echo := runEchoScript(t, echoExchange(p))
			if c.want {
				sameAs(t, got, shiftBytes(ref, p, pathV6))
				sameAs(t, echo, shiftBytes(echoRef, p, pathV6))
			} else {
				isEmpty(t, got, len(steps))
				isEmpty(t, echo, 4)
			}
		})
	}
}

// shiftBytes adjusts the byte counters of a reference run for packets that
// are longer by the extension headers (or options) of p compared to base:
// every packet of the scripts carries them, and the counters include them.
func shiftBytes(ref result, p, base path) result {
	extra := uint64(len(p.ack(true, 1, 1)) - len(base.ack(true, 1, 1)))
	out := ref
	out.rtts = slices.Clone(ref.rtts)
	for i := range out.rtts {
		r := &out.rtts[i]
		r.SentBytes += r.SentPackets * extra
		r.RecBytes += r.RecPackets * extra
	}
	return out
}

// TestIPv4Options: headers up to the maximum 60 bytes are skipped by IHL;
// a first fragment (MF set, offset 0) still carries TCP.
func TestIPv4Options(t *testing.T) {
	tcpRef, _ := exchange(pathV4, hostHooks)
	var ref, echoRef result
	t.Run("none", func(t *testing.T) {
		ref = runScript(t, tcpRef)
		echoRef = runEchoScript(t, echoExchange(pathV4))
	})
	for _, c := range []struct {
		name string
		opts []byte
	}{
		{"router-alert", pktcraft.IPv4OptRouterAlert()},
		{"record-route-40-bytes", pktcraft.IPv4OptRecordRoute(9)},
		{"nop-router-alert-record-route", pktcraft.Opts([]byte{pktcraft.IPv4OptNOP}, pktcraft.IPv4OptRouterAlert(), pktcraft.IPv4OptRecordRoute(8))},
		{"odd-length-padded", []byte{pktcraft.IPv4OptNOP}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := pathV4
			p.ip4opts = c.opts
			steps, _ := exchange(p, hostHooks)
			sameAs(t, runScript(t, steps), shiftBytes(ref, p, pathV4))
			sameAs(t, runEchoScript(t, echoExchange(p)), shiftBytes(echoRef, p, pathV4))
		})
	}
	t.Run("first-fragment", func(t *testing.T) {
		h := newHarness(t, testConfig())
		pk := pathV4.tcpPacket(true, pktcraft.TCP{ACK: true, TSval: 100, Payload: payload(100)})
		pk.MF, pk.IPID = true, 4242
		h.feed(pk.MustBytes(), t0, true)
		h.feed(pathV4.ack(false, 8, 100), t0+1234, false)
		h.checkSamples(sample{Time: t0 + 1234, Flow: pathV4.tcpFlow(false), RTT: 1234})
	})
}

// TestTCPOptionLayouts: the timestamp option is found wherever common
// stacks put it, aligned or not, after SACK blocks or before them.
func TestTCPOptionLayouts(t *testing.T) {
	ts := pktcraft.OptTimestamp
	nop := []byte{pktcraft.OptNOP}
	sack2 := pktcraft.OptSACK([2]uint32{1000, 2000}, [2]uint32{3000, 4000})
	sack3 := pktcraft.OptSACK([2]uint32{1000, 2000}, [2]uint32{3000, 4000}, [2]uint32{5000, 6000})
	for _, c := range []struct {
		name   string
		layout func(tsval, tsecr uint32) []byte
	}{
		{"linux-data", func(v, e uint32) []byte { return pktcraft.Opts(nop, nop, ts(v, e)) }},
		{"mss-sackperm-ws-then-ts", func(v, e uint32) []byte {
			return pktcraft.Opts(pktcraft.OptMSS(1460), pktcraft.OptSACKPermitted(), pktcraft.OptWScale(7), ts(v, e))
		}},
		{"linux-syn", func(v, e uint32) []byte {
			return pktcraft.Opts(pktcraft.OptMSS(1460), pktcraft.OptSACKPermitted(), ts(v, e), nop, pktcraft.OptWScale(7))
		}},
		{"windows-syn", func(v, e uint32) []byte {
			return pktcraft.Opts(pktcraft.OptMSS(1460), nop, pktcraft.OptWScale(8), nop, nop, ts(v, e), nop, nop, pktcraft.OptSACKPermitted())
		}},
		{"freebsd-syn", func(v, e uint32) []byte {
			return pktcraft.Opts(pktcraft.OptMSS(1460), nop, pktcraft.OptWScale(6), pktcraft.OptSACKPermitted(), ts(v, e))
		}},
		{"ts-after-3-sack-blocks-40-bytes", func(v, e uint32) []byte { return pktcraft.Opts(nop, nop, sack3, nop, nop, ts(v, e)) }},
		{"ts-before-sack-blocks", func(v, e uint32) []byte { return pktcraft.Opts(nop, nop, ts(v, e), nop, nop, sack2) }},
		{"unaligned-ts", func(v, e uint32) []byte { return pktcraft.Opts(pktcraft.OptWScale(7), ts(v, e)) }},
		{"ts-after-8-nops", func(v, e uint32) []byte { return pktcraft.Opts(make8(pktcraft.OptNOP), ts(v, e)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			seg := func(fromA bool, tsval, tsecr uint32, n int) []byte {
				return pathV4.tcp(fromA, pktcraft.TCP{ACK: true, RawOptions: c.layout(tsval, tsecr), Payload: payload(n)})
			}
			h.run([]step{
				{0, seg(true, 100, 0, 10), true},
				{777_777, seg(false, 5000, 100, 20), false},
				{800_000, seg(true, 101, 5000, 0), true},
			})
			h.checkSamples(
				sample{Time: t0 + 777_777, Flow: pathV4.tcpFlow(false), RTT: 777_777},
				sample{Time: t0 + 800_000, Flow: pathV4.tcpFlow(true), RTT: 22_223, Egress: true},
			)
		})
	}
}

func make8(b byte) []byte { return []byte{b, b, b, b, b, b, b, b} }

// malformedCase is a broken data packet from a to b (TSval 100). b's valid
// pure ACK echoing TSval 100 follows it; nothing may come of either.
type malformedCase struct {
	name  string
	frame func(p path) []byte
}

func malformedCases() []malformedCase {
	dataPkt := func(p path) pktcraft.Frame {
		return p.tcpPacket(true, pktcraft.TCP{ACK: true, TSval: 100, Payload: []byte("hello")}).MustBuild()
	}
	withOpts := func(opts ...[]byte) func(p path) []byte {
		return func(p path) []byte {
			return p.tcp(true, pktcraft.TCP{ACK: true, RawOptions: pktcraft.Opts(opts...), Payload: []byte("hello")})
		}
	}
	ts := pktcraft.OptTimestamp(100, 0)
	nop := []byte{pktcraft.OptNOP}
	var cs []malformedCase
	for ihl := uint8(0); ihl < 5; ihl++ {
		cs = append(cs, malformedCase{fmt.Sprint("ipv4-ihl-", ihl), func(p path) []byte { return dataPkt(p).WithIPv4IHL(ihl) }})
	}
	cs = append(cs,
		malformedCase{"ipv4-ihl-15-beyond-packet", func(p path) []byte { return dataPkt(p).WithIPv4IHL(15) }},
		malformedCase{"ip-version-mismatch", func(p path) []byte {
			if p.a.ip.Is4() {
				return dataPkt(p).WithIPVersion(6)
			}
			return dataPkt(p).WithIPVersion(4)
		}},
		malformedCase{"ipv4-non-first-fragment", func(p path) []byte {
			pk := p.tcpPacket(true, pktcraft.TCP{ACK: true, TSval: 100, Payload: []byte("hello")})
			pk.FragOffset = 1
			return pk.MustBytes()
		}},
	)
	for doff := uint8(0); doff < 5; doff++ {
		cs = append(cs, malformedCase{fmt.Sprint("tcp-data-offset-", doff), func(p path) []byte { return dataPkt(p).WithTCPDataOffset(doff) }})
	}
	cs = append(cs,
		malformedCase{"tcp-data-offset-15-beyond-packet", func(p path) []byte { return dataPkt(p).WithTCPDataOffset(15) }},
		malformedCase{"tcp-ts-option-length-0", withOpts(pktcraft.OptRaw(pktcraft.OptKindTimestamp, 0, ts[2:]...))},
		malformedCase{"tcp-option-length-0-before-ts", withOpts(pktcraft.OptRaw(pktcraft.OptKindMSS, 0), nop, nop, ts)},
		malformedCase{"tcp-option-length-1-before-ts", withOpts(pktcraft.OptRaw(pktcraft.OptKindMSS, 1), nop, nop, ts)},
		malformedCase{"tcp-ts-option-overrunning", withOpts(pktcraft.OptRaw(pktcraft.OptKindTimestamp, 40, ts[2:]...))},
		malformedCase{"tcp-option-overrunning-before-ts", withOpts(pktcraft.OptRaw(pktcraft.OptKindMSS, 40, 5, 180), ts)},
		malformedCase{"tcp-ts-option-cut-by-header-end", withOpts(nop, nop, nop, nop, ts[:8])},
		malformedCase{"tcp-ts-option-wrong-length", withOpts(pktcraft.OptRaw(pktcraft.OptKindTimestamp, 8, ts[2:8]...))},
		malformedCase{"tcp-eol-before-ts", withOpts([]byte{pktcraft.OptEOL}, nop, nop, ts)},
		malformedCase{"garbage-ethertype", func(p path) []byte { return relabel(dataPkt(p), 0x1234) }},
		malformedCase{"arp-ethertype", func(p path) []byte { return relabel(dataPkt(p), pktcraft.EtherTypeARP) }},
		malformedCase{"ethertype-below-0x600", func(p path) []byte { return relabel(dataPkt(p), 0x05dc) }},
	)
	return cs
}

// testRunRefuses says whether BPF_PROG_TEST_RUN rejects a frame for a tc
// program with EINVAL before running it: frames shorter than an Ethernet
// header, and untagged IPv4/IPv6 frames too short for the fixed IP header
// (the kernel checks that much of the network header itself; seen on Linux
// 6.18). The XDP test
// run has no such check, so those prefixes are run there instead.
func testRunRefuses(b []byte) bool {
	if len(b) < pktcraft.EthernetHdrLen {
		return true
	}
	switch uint16(b[12])<<8 | uint16(b[13]) {
	case pktcraft.EtherTypeIPv4:
		return len(b) < pktcraft.EthernetHdrLen+20
	case pktcraft.EtherTypeIPv6:
		return len(b) < pktcraft.EthernetHdrLen+40
	}
	return false
}

// relabel returns the frame with another EtherType (untagged frames).
func relabel(f pktcraft.Frame, etherType uint16) []byte {
	return f.Patch(12, byte(etherType>>8), byte(etherType))
}

// TestMalformedHeaders: broken L2/L3/L4 headers and TCP options produce no
// timestamp, no flow and no sample, and the run does not fail.
func TestMalformedHeaders(t *testing.T) {
	for _, fam := range []struct {
		name string
		p    path
	}{{"ipv4", pathV4}, {"ipv6", pathV6}} {
		p := fam.p
		t.Run(fam.name+"/valid", func(t *testing.T) {
			h := newHarness(t, testConfig())
			h.feed(p.tcp(true, pktcraft.TCP{ACK: true, TSval: 100, Payload: []byte("hello")}), t0, true)
			h.feed(p.ack(false, 5, 100), t0+ms, false)
			h.checkSamples(sample{Time: t0 + ms, Flow: p.tcpFlow(false), RTT: time.Millisecond})
		})
		for _, c := range malformedCases() {
			if fam.name == "ipv6" && strings.HasPrefix(c.name, "ipv4") {
				continue
			}
			t.Run(fam.name+"/"+c.name, func(t *testing.T) {
				// The timestamp source alone: in auto mode a segment
				// whose option cannot be read is timed by its
				// sequence numbers instead (TestSeqAutoMode).
				cfg := testConfig()
				cfg.TCPMode = loader.TCPTimestamps
				got := runScriptWith(t, cfg, []step{{0, c.frame(p), true}, {ms, p.ack(false, 5, 100), false}})
				isEmpty(t, got, 2)
			})
		}
	}
}

// TestTruncatedPackets feeds every prefix of a data packet (at least the
// 14 bytes TEST_RUN requires). A prefix that cuts into any header the
// parser needs (Ethernet, VLAN, IP, extension headers, TCP with its
// options, ICMP echo) creates no flow and no timestamp, so the valid reply
// that follows gives no sample.
//
// A prefix that keeps every header and only cuts the payload is what a
// capture with a small snap length holds (tcpdump -s 96): the IP length
// still says the packet carried data, so it is timestamped like the full
// packet and matched. (The live programs rely on the IP length in the same
// way: with GRO or paged skbs the payload is often not in the linear area
// that data_end bounds.)
func TestTruncatedPackets(t *testing.T) {
	hbh := []pktcraft.ExtHeader{pktcraft.HopByHop(5, 2, 0, 0), pktcraft.DestOpts()}
	type tcase struct {
		name  string
		p     path
		icmp  bool
		build func(p path, id uint32) pktcraft.Frame // a's request/data with identifier id
		reply func(p path, id uint32) []byte
	}
	tcpData := func(p path, id uint32) pktcraft.Frame {
		return p.tcpPacket(true, pktcraft.TCP{ACK: true, PSH: true, TSval: id, TSecr: 1, Payload: payload(40)}).MustBuild()
	}
	tcpReply := func(p path, id uint32) []byte { return p.ack(false, 2, id) }
	echoReq := func(p path, id uint32) pktcraft.Frame {
		pk := p.packet(true)
		pk.ICMPEcho = &pktcraft.ICMPEcho{ID: 5, Seq: uint16(id), Payload: payload(40)}
		return pk.MustBuild()
	}
	echoRep := func(p path, id uint32) []byte { return p.echo(false, true, 5, uint16(id)) }
	var cases []tcase
	for _, b := range []struct {
		name string
		p    path
	}{
		{"ipv4", pathV4},
		{"ipv4-options-vlan", path{a: pathV4.a, b: pathV4.b, vlans: []uint16{10}, ip4opts: pktcraft.IPv4OptRecordRoute(2)}},
		{"ipv6", pathV6},
		{"ipv6-ext-qinq", path{a: pathV6.a, b: pathV6.b, vlans: []uint16{20, 10}, qinq: true, ext: hbh}},
	} {
		cases = append(cases,
			tcase{name: b.name + "/tcp", p: b.p, build: tcpData, reply: tcpReply},
			tcase{name: b.name + "/icmp", p: b.p, icmp: true, build: echoReq, reply: echoRep},
		)
	}
	for _, c := range cases {
		t.Run(c.name+"/headers-cut", func(t *testing.T) {
			cfg := testConfig()
			cfg.TrackICMP = c.icmp
			cfg.RateLimit = 0
			// Options cut off: the sequence source would still time
			// the segment (TestSeqTruncated).
			cfg.TCPMode = loader.TCPTimestamps
			h := newHarness(t, cfg)
			f := c.build(c.p, 100)
			fed := 0
			for _, b := range pktcraft.Truncations(f.Data)[:f.Payload] {
				if testRunRefuses(b) {
					continue // see TestXDPTruncatedPackets
				}
				h.feed(b, t0+int64(len(b)), true)
				fed++
			}
			if s := h.stats(); s.Timestamps != 0 || s.Flows != 0 || s.Packets != uint64(fed) {
				t.Errorf("after %d truncated packets: stats %+v, want no timestamps and no flows", fed, s)
			}
			h.feed(c.reply(c.p, 100), t0+time.Second.Nanoseconds(), false)
			h.checkSamples()
			h.checkFlows()
			// The complete packet does give a sample.
			h.feed(f.Data, t0+2*time.Second.Nanoseconds(), true)
			h.feed(c.reply(c.p, 100), t0+2*time.Second.Nanoseconds()+1, false)
			if got := h.takeRTTs(); len(got) != 1 || got[0].RTT != 1 {
				t.Errorf("complete packet: samples %s, want one of 1 ns", fmtList(got))
			}
		})
		t.Run(c.name+"/payload-cut", func(t *testing.T) {
			cfg := testConfig()
			cfg.TrackICMP = c.icmp
			cfg.RateLimit = 0
			h := newHarness(t, cfg)
			full := c.build(c.p, 0)
			var want []sample
			at := t0
			for n := full.Payload; n < len(full.Data); n++ {
				id := uint32(1000 + n)
				h.feed(pktcraft.Truncate(c.build(c.p, id).Data, n), at, true)
				h.feed(c.reply(c.p, id), at+int64(n), false)
				flow := c.p.tcpFlow(false)
				if c.icmp {
					flow = c.p.echoFlow(false, 5)
				}
				want = append(want, sample{Time: at + int64(n), Flow: flow, RTT: time.Duration(n)})
				at += ms
			}
			h.checkSamples(want...)
		})
	}
}
