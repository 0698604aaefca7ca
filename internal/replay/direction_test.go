package replay

// Unit tests of the replay's Go side that need no BPF: the direction
// rules, the header parser behind them, the flow sharding of parallel
// replay, and the progress line.

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

var (
	dirIn4  = netip.MustParseAddr("10.0.0.1")
	dirOut4 = netip.MustParseAddr("198.51.100.7")
	dirIn6  = netip.MustParseAddr("2001:db8:1::1")
	dirOut6 = netip.MustParseAddr("2001:db8:9::9")
)

func TestParsePkt(t *testing.T) {
	for _, c := range []struct {
		name string
		pkt  pktcraft.Packet
		want pktInfo
		noL4 bool // no transport header to find (later fragments)
	}{
		{"tcp4-syn", pktcraft.Packet{Src: dirIn4, Dst: dirOut4, TCP: &pktcraft.TCP{SrcPort: 1000, DstPort: 80, SYN: true}},
			pktInfo{ok: true, proto: protoTCP, sport: 1000, dport: 80, syn: true}, false},
		{"tcp4-synack-qinq", pktcraft.Packet{VLANs: []uint16{1, 2}, QinQ: true, Src: dirOut4, Dst: dirIn4, TCP: &pktcraft.TCP{SrcPort: 80, DstPort: 1000, SYN: true, ACK: true}},
			pktInfo{ok: true, proto: protoTCP, sport: 80, dport: 1000, syn: true, ack: true}, false},
		{"tcp4-options", pktcraft.Packet{Src: dirIn4, Dst: dirOut4, IPv4Options: pktcraft.IPv4OptRecordRoute(3), TCP: &pktcraft.TCP{SrcPort: 1, DstPort: 2, ACK: true}},
			pktInfo{ok: true, proto: protoTCP, sport: 1, dport: 2, ack: true}, false},
		{"udp6", pktcraft.Packet{Src: dirIn6, Dst: dirOut6, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}},
			pktInfo{ok: true, ipv6: true, proto: protoUDP, sport: 53, dport: 5353}, false},
		{"icmp-request", pktcraft.Packet{Src: dirIn4, Dst: dirOut4, ICMPEcho: &pktcraft.ICMPEcho{ID: 77, Seq: 1}},
			pktInfo{ok: true, proto: protoICMP, sport: 77, dport: 77, request: true}, false},
		{"icmp6-reply-ext", pktcraft.Packet{Src: dirOut6, Dst: dirIn6, IPv6ExtHeaders: []pktcraft.ExtHeader{pktcraft.HopByHop(), pktcraft.RoutingHeader(0, 0), pktcraft.DestOpts()}, ICMPEcho: &pktcraft.ICMPEcho{Reply: true, ID: 78, Seq: 1}},
			pktInfo{ok: true, ipv6: true, proto: protoICMPv6, sport: 78, dport: 78, reply: true}, false},
		{"icmp-unreachable", pktcraft.Packet{Src: dirOut4, Dst: dirIn4, ICMP: &pktcraft.ICMP{Type: 3, Code: 1, Body: make([]byte, 32)}},
			pktInfo{ok: true, proto: protoICMP}, false},
		{"ipv4-later-fragment", pktcraft.Packet{Src: dirIn4, Dst: dirOut4, FragOffset: 10, Raw: &pktcraft.Raw{Proto: protoTCP, Data: make([]byte, 40)}},
			pktInfo{ok: true, proto: protoTCP}, true},
		{"ipv6-later-fragment", pktcraft.Packet{Src: dirIn6, Dst: dirOut6, IPv6ExtHeaders: []pktcraft.ExtHeader{pktcraft.FragmentHeader(10, false, 1)}, Raw: &pktcraft.Raw{Proto: protoTCP, Data: make([]byte, 40)}},
			pktInfo{ok: true, ipv6: true, proto: 44}, true},
		{"arp", pktcraft.Packet{EtherType: pktcraft.EtherTypeARP, L3Payload: make([]byte, 28)}, pktInfo{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.pkt.MustBuild()
			want := c.want
			if want.ok {
				src, dst := c.pkt.Src.As16(), c.pkt.Dst.As16()
				want.src, want.dst = src, dst
			}
			if !c.noL4 {
				want.l4off = f.L4
			}
			var got pktInfo
			parsePkt(f.Data, &got)
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			// Every truncation parses without panicking.
			for _, b := range pktcraft.Truncations(f.Data) {
				parsePkt(b, &got)
			}
		})
	}
}

func dirFrame(t *testing.T, p pktcraft.Packet) *capture.Packet {
	t.Helper()
	b := p.MustBytes()
	var mac [6]byte
	copy(mac[:], b[6:12])
	return &capture.Packet{Data: b, SrcMAC: mac}
}

func TestDirectionRules(t *testing.T) {
	out := func(p pktcraft.Packet) pktcraft.Packet { p.Src, p.Dst = dirIn4, dirOut4; return p }
	in := func(p pktcraft.Packet) pktcraft.Packet { p.Src, p.Dst = dirOut4, dirIn4; return p }
	tcp := func(sp, dp uint16, syn, ack bool) pktcraft.Packet {
		return pktcraft.Packet{TCP: &pktcraft.TCP{SrcPort: sp, DstPort: dp, SYN: syn, ACK: ack}}
	}
	insideMAC := [6]byte{2, 0, 0, 0, 0, 0x11}

	t.Run("capture-direction-wins", func(t *testing.T) {
		d := newDirector(DirectionRules{LocalNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, time.Hour, time.Hour)
		p := dirFrame(t, out(tcp(1, 2, false, true)))
		p.Direction = capture.DirInbound
		if d.egress(p, 1) {
			t.Error("inbound flag: egress")
		}
		p.Direction = capture.DirOutbound
		if !d.egress(p, 2) {
			t.Error("outbound flag: ingress")
		}
		if d.counts[DirFromCapture] != 2 || d.counts[DirFromLocal] != 0 {
			t.Errorf("counts %v", d.counts)
		}
	})
	t.Run("local-net", func(t *testing.T) {
		d := newDirector(DirectionRules{LocalNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:1::/48")}}, time.Hour, time.Hour)
		for _, c := range []struct {
			p    pktcraft.Packet
			want bool
		}{
			{out(tcp(1, 2, false, true)), true},
			{in(tcp(2, 1, false, true)), false},
			{pktcraft.Packet{Src: dirIn6, Dst: dirOut6, UDP: &pktcraft.UDP{}}, true},
			{pktcraft.Packet{Src: dirOut6, Dst: dirIn6, UDP: &pktcraft.UDP{}}, false},
			// v4-mapped IPv6 addresses are IPv6 packets, not 10/8.
			{pktcraft.Packet{Src: netip.MustParseAddr("::ffff:10.0.0.1"), Dst: dirOut6, UDP: &pktcraft.UDP{}}, false},
			{pktcraft.Packet{EtherType: pktcraft.EtherTypeARP, L3Payload: make([]byte, 28)}, false},
		} {
			if got := d.egress(dirFrame(t, c.p), 1); got != c.want {
				t.Errorf("%v -> %v: egress %v, want %v", c.p.Src, c.p.Dst, got, c.want)
			}
		}
	})
	t.Run("local-mac", func(t *testing.T) {
		d := newDirector(DirectionRules{LocalMACs: [][6]byte{insideMAC}}, time.Hour, time.Hour)
		p := out(tcp(1, 2, false, true))
		p.SrcMAC = insideMAC[:]
		if !d.egress(dirFrame(t, p), 1) {
			t.Error("frame from the local MAC: ingress")
		}
		p.SrcMAC = nil
		if d.egress(dirFrame(t, p), 1) {
			t.Error("frame from another MAC: egress")
		}
		if d.counts[DirFromLocal] != 2 {
			t.Errorf("counts %v", d.counts)
		}
	})
	t.Run("flow-rule", func(t *testing.T) {
		d := newDirector(DirectionRules{}, 10*time.Second, 5*time.Second)
		steps := []struct {
			name string
			p    pktcraft.Packet
			at   int64
			want bool
		}{
			// The SYN's sender is inside.
			{"syn from outside", in(tcp(5000, 22, true, false)), 1, true},
			{"synack", out(tcp(22, 5000, true, true)), 2, false},
			{"data", in(tcp(5000, 22, false, true)), 3, true},
			// First packet a SYN-ACK: its receiver is inside.
			{"synack first", in(tcp(443, 6000, true, true)), 4, false},
			{"ack", out(tcp(6000, 443, false, true)), 5, true},
			// No SYN: the first packet's sender is inside...
			{"midstream", in(tcp(7000, 80, false, true)), 6, true},
			{"midstream reply", out(tcp(80, 7000, false, true)), 7, false},
			// ...until a SYN says otherwise.
			{"new syn", out(tcp(80, 7000, true, false)), 8, true},
			{"its synack", in(tcp(7000, 80, true, true)), 9, false},
			// Echo reply first: its receiver is inside.
			{"echo reply first", in(pktcraft.Packet{ICMPEcho: &pktcraft.ICMPEcho{Reply: true, ID: 5, Seq: 1}}), 10, false},
			{"echo request", out(pktcraft.Packet{ICMPEcho: &pktcraft.ICMPEcho{ID: 5, Seq: 2}}), 11, true},
			// A different echo ID is another flow.
			{"echo request other id", in(pktcraft.Packet{ICMPEcho: &pktcraft.ICMPEcho{ID: 6, Seq: 1}}), 12, true},
			// Idle longer than the ICMP timeout: forgotten, decided anew.
			{"echo reply after timeout", out(pktcraft.Packet{ICMPEcho: &pktcraft.ICMPEcho{Reply: true, ID: 5, Seq: 3}}), 12 + int64(20*time.Second), false},
		}
		for _, s := range steps {
			if got := d.egress(dirFrame(t, s.p), s.at); got != s.want {
				t.Errorf("%s: egress %v, want %v", s.name, got, s.want)
			}
		}
		// After the sweep only flows seen within their timeout are left:
		// the two echo flows were idle 20 s (> 5 s), the TCP ones too
		// (> 10 s); only the echo flow just seen remains.
		if len(d.flows) != 1 {
			t.Errorf("%d flows remembered after the sweep, want 1", len(d.flows))
		}
	})
}

func TestShardSymmetric(t *testing.T) {
	var a, b pktInfo
	parsePkt(pktcraft.Packet{Src: dirIn6, Dst: dirOut6, TCP: &pktcraft.TCP{SrcPort: 40000, DstPort: 443}}.MustBytes(), &a)
	parsePkt(pktcraft.Packet{Src: dirOut6, Dst: dirIn6, TCP: &pktcraft.TCP{SrcPort: 443, DstPort: 40000, ACK: true}}.MustBytes(), &b)
	if shardOf(&a) != shardOf(&b) {
		t.Error("the two directions of a flow hash differently")
	}
	// Flows spread over workers.
	var n [4]int
	for port := uint16(1); port <= 400; port++ {
		parsePkt(pktcraft.Packet{Src: dirIn4, Dst: dirOut4, TCP: &pktcraft.TCP{SrcPort: port, DstPort: 80}}.MustBytes(), &a)
		n[shardOf(&a)%4]++
	}
	for i, c := range n {
		if c < 60 {
			t.Errorf("worker %d of 4 gets %d of 400 flows: %v", i, c, n)
		}
	}
}

func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	t0 := time.Unix(1000, 0)
	p := newProgress(&buf, "big.pcap", 1000, t0)
	p.update(t0.Add(500*time.Millisecond), 10, 100)
	if buf.Len() != 0 {
		t.Errorf("progress shown before %v: %q", progressDelay, buf.String())
	}
	p.update(t0.Add(2*time.Second), 2_000_000, 250)
	if got, want := buf.String(), "\rrttscope: replay big.pcap:  25.0%, 2000000 packets, 1M packets/s\033[K"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	buf.Reset()
	p.update(t0.Add(2100*time.Millisecond), 2_100_000, 260)
	if buf.Len() != 0 {
		t.Errorf("progress repeated within %v: %q", progressEvery, buf.String())
	}
	p.done(t0.Add(4*time.Second), 3_000_000)
	if got := buf.String(); !strings.HasPrefix(got, "\rrttscope: replay big.pcap: 3000000 packets in 4s, 750k packets/s") || !strings.HasSuffix(got, "\n") {
		t.Errorf("summary %q", got)
	}

	// A short replay prints nothing at all; a pipe has no percentage.
	buf.Reset()
	q := newProgress(&buf, "-", -1, t0)
	q.done(t0.Add(100*time.Millisecond), 5)
	if buf.Len() != 0 {
		t.Errorf("short replay printed %q", buf.String())
	}
	q.update(t0.Add(3*time.Second), 3000, 1<<20)
	if strings.Contains(buf.String(), "%") {
		t.Errorf("percentage without a size: %q", buf.String())
	}
}
