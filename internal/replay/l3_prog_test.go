package replay

// Frames without an Ethernet header (tun, WireGuard, PPP) and the XDP
// ingress program.
//
// How BPF_PROG_TEST_RUN presents a frame to a tc program: it builds an skb
// on the loopback device, sets skb->protocol = eth_type_trans(), which reads
// bytes 12-13 of the buffer as the EtherType and pulls 14 bytes, and then
// pushes the device's hard_header_len (14 for lo) back. skb->data therefore
// points at the first byte handed in, and skb->ifindex is 1 (lo). So a bare
// IP packet can be fed as is and the program, told that ifindex 1 has no
// L2 header, parses it from its first byte, as on a tun device; only
// skb->protocol (which the program takes as the L3 protocol of such
// interfaces) comes from bytes 12-13 of the IP header, i.e. from the source
// address. The L3 test addresses are chosen so that those bytes are the
// right EtherType: 8.0.0.x (IPv4 header bytes 12-13 = 08 00) and
// 2001:db8:86dd::x (IPv6 header bytes 12-13 = 86 dd). The test is then an
// honest one: skb->data, data_end and skb->protocol are what a tun device
// delivers. Controls check both halves of that claim.
//
// The XDP test run hands the data as is (ingress_ifindex 1 as well), but
// the XDP program times packets with bpf_ktime_get_ns, not the capture
// time: its samples are bounded by CLOCK_MONOTONIC read around the run.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

const loIfindex = 1 // the device BPF_PROG_TEST_RUN runs packets on

var (
	pathL3v4 = path{a: ep("8.0.0.1", 1000), b: ep("8.0.0.2", 80), noEth: true}
	pathL3v6 = path{a: ep("2001:db8:86dd::1", 50000), b: ep("2001:db8:86dd::2", 443), noEth: true}
)

// newL3Harness loads the programs with L3-only interface support and marks
// the loopback device (ifindex 1) as having no Ethernet header.
func newL3Harness(t *testing.T, cfg loader.Config) *harness {
	t.Helper()
	cfg.HaveL3Ifaces = true
	h := newHarness(t, cfg)
	if err := h.e.Objects().MarkL3Interface(loIfindex); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestL3OnlyTC: bare IP packets on an interface marked L3-only give the same
// exact samples as Ethernet frames, TCP and ICMP, IPv4 and IPv6.
func TestL3OnlyTC(t *testing.T) {
	for _, p := range []path{pathL3v4, pathL3v6} {
		t.Run(p.a.ip.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.TrackICMP = true
			h := newL3Harness(t, cfg)
			steps, want := exchange(p, hostHooks)
			h.run(steps)
			rtts := h.takeRTTs()
			if got := samplesOf(rtts); !slices.Equal(got, want) {
				t.Errorf("RTT samples:\n got %s\nwant %s", fmtList(got), fmtList(want))
			} else if rtts[0].SentBytes != uint64(len(steps[0].frame)) {
				t.Errorf("sent bytes %d, want the whole L3 frame, %d", rtts[0].SentBytes, len(steps[0].frame))
			}
			h.checkFlows(opening(t0, p.tcpFlow(true), events.ReasonFirstObserved, true))

			h.run([]step{
				{10 * time.Second.Nanoseconds(), p.echo(true, false, 3, 1), true},
				{10*time.Second.Nanoseconds() + 4_000_004, p.echo(false, true, 3, 1), false},
			})
			got := h.takeRTTs()
			if len(got) != 1 || got[0].RTT != 4_000_004 || got[0].Flow != p.echoFlow(false, 3) {
				t.Errorf("echo: got %s, want one 4.000004 ms sample", fmtList(got))
			}
		})
		t.Run(p.a.ip.String()+"/control-not-marked", func(t *testing.T) {
			// Without the L3 marking the program reads the IP header as
			// an Ethernet header and finds nothing.
			h := newHarness(t, testConfig())
			steps, _ := exchange(p, hostHooks)
			h.run(steps)
			h.checkSamples()
			if s := h.stats(); s.Flows != 0 || s.Timestamps != 0 {
				t.Errorf("stats %+v, want no state", s)
			}
		})
		t.Run(p.a.ip.String()+"/control-ethernet-unmarked", func(t *testing.T) {
			// L3 support on, ifindex 1 not marked: Ethernet frames are
			// parsed as before.
			cfg := testConfig()
			cfg.HaveL3Ifaces = true
			h := newHarness(t, cfg)
			q := p
			q.noEth = false
			steps, want := exchange(q, hostHooks)
			h.run(steps)
			h.checkSamples(want...)
		})
		t.Run(p.a.ip.String()+"/control-skb-protocol", func(t *testing.T) {
			// Addresses whose bytes 12-13 are no IP EtherType give a
			// wrong skb->protocol: nothing, so the samples above did
			// come from the L3 path with the protocol TEST_RUN set.
			q := p
			if p.a.ip.Is4() {
				q.a.ip, q.b.ip = pathV4.a.ip, pathV4.b.ip
			} else {
				q.a.ip, q.b.ip = pathV6.a.ip, pathV6.b.ip
			}
			h := newL3Harness(t, testConfig())
			steps, _ := exchange(q, hostHooks)
			h.run(steps)
			h.checkSamples()
		})
	}
}

func monoNow(tb testing.TB) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		tb.Fatal(err)
	}
	return ts.Nano()
}

// xdp runs frame through the XDP ingress program and delivers its events.
// It returns CLOCK_MONOTONIC (bpf_ktime_get_ns) read before and after.
func (h *harness) xdp(frame []byte) (before, after int64) {
	h.tb.Helper()
	before = monoNow(h.tb)
	ret, err := h.e.Objects().RttscopeXdpIngress.Run(&ebpf.RunOptions{Data: frame})
	after = monoNow(h.tb)
	if err != nil {
		h.tb.Fatalf("XDP run on %d bytes: %v", len(frame), err)
	}
	if ret != 2 { // XDP_PASS
		h.tb.Errorf("XDP verdict %d, want XDP_PASS", ret)
	}
	if err := h.e.Drain(); err != nil {
		h.tb.Fatal(err)
	}
	return before, after
}

// checkBounded checks for exactly one sample in direction flow, matched on
// ingress, whose time and RTT lie within the given bounds.
func (h *harness) checkBounded(flow events.Flow, timeLo, timeHi, rttLo, rttHi int64) {
	h.tb.Helper()
	got := h.takeRTTs()
	if len(got) != 1 {
		h.tb.Errorf("want one sample %+v, got %s", flow, fmtList(got))
		return
	}
	r := got[0]
	if r.Flow != flow || r.MatchOnEgress || r.Time < timeLo || r.Time > timeHi ||
		int64(r.RTT) < rttLo || int64(r.RTT) > rttHi {
		h.tb.Errorf("sample %+v: want flow %+v, ingress, time in [%d, %d], RTT in [%v, %v]",
			r, flow, timeLo, timeHi, time.Duration(rttLo), time.Duration(rttHi))
	}
}

// xdpRoundTrips times one exchange in each direction across the XDP
// ingress program, the other side going through tc egress at a chosen
// capture time on the same (monotonic) clock:
//   - a's data leaves (tc egress) 3 s "ago", b's ACK arrives (XDP):
//     RTT = ktime at the XDP run - (now - 3 s);
//   - b's data arrives (XDP, ktime k), a's ACK leaves 5 ms after the run:
//     RTT = after + 5 ms - k.
func xdpRoundTrips(t *testing.T, h *harness, p path) {
	sent := monoNow(t) - 3*time.Second.Nanoseconds()
	h.feed(p.data(true, 100, 0, 10), sent, true)
	lo, hi := h.xdp(p.ack(false, 900, 100))
	h.checkBounded(p.tcpFlow(false), lo, hi, lo-sent, hi-sent)

	lo, hi = h.xdp(p.data(false, 901, 0, 10))
	h.feed(p.ack(true, 101, 901), hi+5*ms, true)
	got := h.takeRTTs()
	if len(got) != 1 || got[0].Flow != p.tcpFlow(true) || !got[0].MatchOnEgress ||
		int64(got[0].RTT) < 5*ms || int64(got[0].RTT) > hi-lo+5*ms {
		t.Errorf("b's data timestamped by XDP: got %s, want one egress sample with RTT in [5ms, %v]",
			fmtList(got), time.Duration(hi-lo+5*ms))
	}

	// ICMP echo: request out, reply in through XDP.
	sent = monoNow(t) - 2*time.Second.Nanoseconds()
	h.feed(p.echo(true, false, 9, 1), sent, true)
	lo, hi = h.xdp(p.echo(false, true, 9, 1))
	h.checkBounded(p.echoFlow(false, 9), lo, hi, lo-sent, hi-sent)
}

// TestL3OnlyXDP: the XDP program on an L3-only interface takes the L3
// protocol from the IP version nibble.
func TestL3OnlyXDP(t *testing.T) {
	for _, p := range []path{
		pathL3v4, pathL3v6,
		// XDP does not use skb->protocol: any addresses work.
		{a: pathV4.a, b: pathV4.b, noEth: true}, {a: pathV6.a, b: pathV6.b, noEth: true},
	} {
		t.Run(p.a.ip.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.TrackICMP = true
			h := newL3Harness(t, cfg)
			if p.a.ip == pathV4.a.ip || p.a.ip == pathV6.a.ip {
				// tc egress needs the skb->protocol trick: send a's
				// packets with the Ethernet-framed engine instead.
				xdpOneWay(t, h, p)
				return
			}
			xdpRoundTrips(t, h, p)
		})
	}
	t.Run("bad-version-nibble", func(t *testing.T) {
		h := newL3Harness(t, testConfig())
		sent := monoNow(t) - time.Second.Nanoseconds()
		h.feed(pathL3v4.data(true, 100, 0, 10), sent, true)
		ack := pathL3v4.ack(false, 900, 100)
		ack[0] = 0x55 // version 5
		h.xdp(ack)
		h.checkSamples()
	})
}

// xdpOneWay: both packets through XDP (b's data, then a's data echoing it
// as if it arrived too, as on a router): RTT is the time between the runs.
func xdpOneWay(t *testing.T, h *harness, p path) {
	lo1, hi1 := h.xdp(p.data(false, 500, 0, 10))
	lo2, hi2 := h.xdp(p.data(true, 100, 500, 10))
	h.checkBounded(p.tcpFlow(true), lo2, hi2, lo2-hi1, hi2-lo1)
}

// TestXDPIngress: the XDP program parses Ethernet frames like the tc
// programs (its own walkers: bpf_xdp_load_bytes, xdp_md offsets).
func TestXDPIngress(t *testing.T) {
	seg := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	for _, c := range []struct {
		name string
		p    path
	}{
		{"ipv4", pathV4},
		{"ipv4-options-vlan", path{a: pathV4.a, b: pathV4.b, vlans: []uint16{5}, ip4opts: pktcraft.IPv4OptRecordRoute(9)}},
		{"ipv6", pathV6},
		{"ipv6-ext-qinq", path{a: pathV6.a, b: pathV6.b, vlans: []uint16{6, 7}, qinq: true, ext: []pktcraft.ExtHeader{
			pktcraft.HopByHop(), pktcraft.RoutingHeader(4, 0, seg), pktcraft.FragmentHeader(0, true, 3),
			{Type: pktcraft.ProtoAH, Data: make([]byte, 22)}, pktcraft.DestOpts(),
		}}},
		{"ipv6-chain-of-8", path{a: pathV6.a, b: pathV6.b, ext: pktcraft.DestOptsChain(8)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.TrackICMP = true
			xdpRoundTrips(t, newHarness(t, cfg), c.p)
		})
	}
	t.Run("ipv6-chain-of-9", func(t *testing.T) {
		h := newHarness(t, testConfig())
		p := path{a: pathV6.a, b: pathV6.b, ext: pktcraft.DestOptsChain(9)}
		h.xdp(p.data(false, 901, 0, 10))
		if s := h.stats(); s.Packets != 1 || s.Flows != 0 || s.Timestamps != 0 {
			t.Errorf("stats %+v, want 1 packet and no state", s)
		}
	})
}

// TestXDPTruncatedPackets runs every prefix (>= 14 bytes) of a data packet
// and of the malformed packets through the XDP program, including the short
// IP headers the tc test run refuses: no state, no sample, no error.
func TestXDPTruncatedPackets(t *testing.T) {
	hbh := []pktcraft.ExtHeader{pktcraft.HopByHop(5, 2, 0, 0), pktcraft.DestOpts()}
	for _, c := range []struct {
		name string
		p    path
	}{
		{"ipv4", pathV4}, {"ipv6", pathV6},
		{"ipv6-ext-vlan", path{a: pathV6.a, b: pathV6.b, vlans: []uint16{4}, ext: hbh}},
		{"l3-ipv4", pathL3v4}, {"l3-ipv6", pathL3v6},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.TrackICMP = true
			// The timestamp source alone: with the options cut off,
			// the sequence source would still time a segment
			// (TestSeqTruncated).
			cfg.TCPMode = loader.TCPTimestamps
			var h *harness
			if c.p.noEth {
				h = newL3Harness(t, cfg)
			} else {
				h = newHarness(t, cfg)
			}
			data := c.p.tcpPacket(true, pktcraft.TCP{ACK: true, TSval: 100, Payload: payload(40)}).MustBuild()
			echo := c.p.packet(true)
			echo.ICMPEcho = &pktcraft.ICMPEcho{ID: 1, Seq: 1, Payload: payload(40)}
			req := echo.MustBuild()
			n := 0
			for _, f := range []pktcraft.Frame{data, req} {
				for _, b := range pktcraft.Truncations(f.Data)[:f.Payload] {
					if len(b) < pktcraft.EthernetHdrLen {
						continue // refused by the XDP test run
					}
					h.xdp(b)
					n++
				}
			}
			if !c.p.noEth {
				for _, m := range malformedCases() {
					if c.p.a.ip.Is6() && strings.HasPrefix(m.name, "ipv4") {
						continue
					}
					h.xdp(m.frame(c.p))
					n++
				}
			}
			if s := h.stats(); s.Packets != uint64(n) || s.Flows != 0 || s.Timestamps != 0 || s.RTTEvents != 0 {
				t.Errorf("after %d packets: stats %+v, want no state", n, s)
			}
			h.checkFlows()
		})
	}
}
