package pktcraft

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	v4a = netip.MustParseAddr("192.0.2.1")
	v4b = netip.MustParseAddr("198.51.100.7")
	v6a = netip.MustParseAddr("2001:db8::1")
	v6b = netip.MustParseAddr("2001:db8:ffff::42")
)

// decode parses b with gopacket and fails the test on any decode error.
func decode(t *testing.T, b []byte, first gopacket.LayerType) gopacket.Packet {
	t.Helper()
	pkt := gopacket.NewPacket(b, first, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		t.Fatalf("gopacket decode error: %v\n%s", el.Error(), pkt.Dump())
	}
	return pkt
}

type verifier interface {
	VerifyChecksum() (error, gopacket.ChecksumVerificationResult)
}

type checksummer interface {
	SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
}

// checkChecksums verifies every checksum gopacket knows how to verify:
// IPv4 header, TCP, UDP (pseudo-header), ICMPv4, ICMPv6 (pseudo-header).
// It returns how many were verified.
func checkChecksums(t *testing.T, pkt gopacket.Packet) int {
	t.Helper()
	n := 0
	for _, l := range pkt.Layers() {
		if c, ok := l.(checksummer); ok {
			if err := c.SetNetworkLayerForChecksum(pkt.NetworkLayer()); err != nil {
				t.Fatal(err)
			}
		}
		v, ok := l.(verifier)
		if !ok {
			continue
		}
		err, res := v.VerifyChecksum()
		if err != nil {
			t.Fatalf("%v: %v", l.LayerType(), err)
		}
		if !res.Valid {
			t.Errorf("%v checksum invalid: have %#x want %#x", l.LayerType(), res.Actual, res.Correct)
		}
		n++
	}
	return n
}

func TestTCPv4Default(t *testing.T) {
	payload := []byte("hello, world")
	p := Packet{
		Src: v4a, Dst: v4b, TTL: 17, TOS: 0x2 | 0xb8, IPID: 0x1234, DF: true,
		TCP: &TCP{SrcPort: 40000, DstPort: 443, Seq: 0xdeadbeef, Ack: 7,
			ACK: true, PSH: true, Window: 502, TSval: 1111, TSecr: 2222, Payload: payload},
	}
	f := p.MustBuild()
	pkt := decode(t, f.Data, layers.LayerTypeEthernet)
	if got := checkChecksums(t, pkt); got != 2 {
		t.Fatalf("verified %d checksums, want 2 (IPv4, TCP)", got)
	}
	eth := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !bytes.Equal(eth.SrcMAC, DefaultSrcMAC) || !bytes.Equal(eth.DstMAC, DefaultDstMAC) || eth.EthernetType != layers.EthernetTypeIPv4 {
		t.Errorf("ethernet: %+v", eth)
	}
	ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip.TTL != 17 || ip.TOS != 0xba || ip.Id != 0x1234 || ip.Flags != layers.IPv4DontFragment ||
		ip.IHL != 5 || int(ip.Length) != len(f.Data)-14 || !ip.SrcIP.Equal(net.IP(v4a.AsSlice())) {
		t.Errorf("ipv4: %+v", ip)
	}
	tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if tcp.SrcPort != 40000 || tcp.DstPort != 443 || tcp.Seq != 0xdeadbeef || tcp.Ack != 7 ||
		!tcp.ACK || !tcp.PSH || tcp.SYN || tcp.FIN || tcp.RST || tcp.Window != 502 || tcp.DataOffset != 8 {
		t.Errorf("tcp: %+v", tcp)
	}
	if !bytes.Equal(tcp.Payload, payload) {
		t.Errorf("payload %q", tcp.Payload)
	}
	// Linux layout: NOP NOP TS.
	kinds := optionKinds(tcp)
	if want := []layers.TCPOptionKind{1, 1, 8}; !equalKinds(kinds, want) {
		t.Errorf("options %v, want %v", kinds, want)
	}
	ts := tcp.Options[2].OptionData
	if binary.BigEndian.Uint32(ts) != 1111 || binary.BigEndian.Uint32(ts[4:]) != 2222 {
		t.Errorf("timestamp option %x", ts)
	}
	if f.L3 != 14 || f.L4 != 34 || f.Payload != 34+32 || !bytes.Equal(f.Data[f.Payload:], payload) {
		t.Errorf("offsets %+v", f)
	}
}

func optionKinds(tcp *layers.TCP) []layers.TCPOptionKind {
	var k []layers.TCPOptionKind
	for _, o := range tcp.Options {
		k = append(k, o.OptionType)
	}
	return k
}

func equalKinds(a, b []layers.TCPOptionKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTCPOptionOrders(t *testing.T) {
	cases := []struct {
		name              string
		extra, trailing   []byte
		want              []layers.TCPOptionKind
		wantDataOffsetMin uint8
	}{
		{"syn-linux", Opts(OptMSS(1460), OptSACKPermitted()), Opts([]byte{OptNOP}, OptWScale(7)),
			[]layers.TCPOptionKind{2, 4, 8, 1, 3}, 10},
		{"ws-mss-first", Opts(OptWScale(14), []byte{OptNOP}, OptMSS(1200), []byte{OptNOP, OptNOP}), nil,
			[]layers.TCPOptionKind{3, 1, 2, 1, 1, 8}, 10},
		{"sack-before-ts", Opts([]byte{OptNOP, OptNOP}, OptSACK([2]uint32{100, 200}, [2]uint32{300, 400})), nil,
			[]layers.TCPOptionKind{1, 1, 5, 8}, 5 + 7},
		{"unaligned-ts-then-eol", []byte{OptNOP}, nil, []layers.TCPOptionKind{1, 8, 0}, 8},
	}
	for _, tc := range cases {
		for _, dst := range []netip.Addr{v4b, v6b} {
			src := v4a
			if dst.Is6() {
				src = v6a
			}
			t.Run(tc.name+"/"+dst.String(), func(t *testing.T) {
				p := Packet{Src: src, Dst: dst, TCP: &TCP{SrcPort: 1, DstPort: 2, SYN: true, ACK: true,
					TSval: 0x01020304, TSecr: 0xa0b0c0d0, ExtraOptions: tc.extra, TrailingOptions: tc.trailing}}
				pkt := decode(t, p.MustBytes(), layers.LayerTypeEthernet)
				checkChecksums(t, pkt)
				tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
				got := optionKinds(tcp)
				// gopacket reports EOL padding as one option; compare the prefix.
				if len(got) < len(tc.want) || !equalKinds(got[:len(tc.want)], tc.want) {
					t.Fatalf("options %v, want %v", got, tc.want)
				}
				if tcp.DataOffset < tc.wantDataOffsetMin {
					t.Errorf("data offset %d", tcp.DataOffset)
				}
				for _, o := range tcp.Options {
					if o.OptionType == 8 && !bytes.Equal(o.OptionData, []byte{1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0}) {
						t.Errorf("ts data %x", o.OptionData)
					}
				}
				if len(tcp.Payload) != 0 || !tcp.SYN || !tcp.ACK {
					t.Errorf("tcp %+v", tcp)
				}
			})
		}
	}
}

func TestTCPAllFlagsNoTimestamp(t *testing.T) {
	p := Packet{Src: v4a, Dst: v4b, TCP: &TCP{FIN: true, SYN: true, RST: true, PSH: true, ACK: true,
		URG: true, ECE: true, CWR: true, Urgent: 9, NoTimestamp: true}}
	f := p.MustBuild()
	pkt := decode(t, f.Data, layers.LayerTypeEthernet)
	checkChecksums(t, pkt)
	tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !(tcp.FIN && tcp.SYN && tcp.RST && tcp.PSH && tcp.ACK && tcp.URG && tcp.ECE && tcp.CWR) ||
		tcp.DataOffset != 5 || len(tcp.Options) != 0 || tcp.Urgent != 9 {
		t.Errorf("tcp %+v", tcp)
	}
	if len(f.Data) != 14+20+20 {
		t.Errorf("len %d", len(f.Data))
	}
	if _, err := (Packet{Src: v4a, Dst: v4b, TCP: &TCP{ExtraOptions: make([]byte, 31)}}).Bytes(); err == nil ||
		!strings.Contains(err.Error(), "max 40") {
		t.Errorf("too many options: %v", err)
	}
}

func TestIPv4Options(t *testing.T) {
	opts := Opts(IPv4OptRouterAlert(), IPv4OptRecordRoute(2)) // 4 + 11 -> padded to 16
	p := Packet{Src: v4a, Dst: v4b, IPv4Options: opts, DF: true,
		TCP: &TCP{SrcPort: 5, DstPort: 6, Payload: []byte{1, 2, 3}}}
	f := p.MustBuild()
	pkt := decode(t, f.Data, layers.LayerTypeEthernet)
	if n := checkChecksums(t, pkt); n != 2 {
		t.Fatalf("checked %d", n)
	}
	ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip.IHL != 9 || ip.Flags != layers.IPv4DontFragment || f.L4 != 14+36 {
		t.Errorf("ipv4 IHL %d flags %v L4 %d", ip.IHL, ip.Flags, f.L4)
	}
	if len(ip.Options) < 2 || ip.Options[0].OptionType != 0x94 || ip.Options[1].OptionType != 7 {
		t.Errorf("options %+v", ip.Options)
	}
	if _, err := (Packet{Src: v4a, Dst: v4b, IPv4Options: make([]byte, 41), UDP: &UDP{}}).Bytes(); err == nil {
		t.Error("41 bytes of IPv4 options accepted")
	}
}

func TestIPv6ExtensionChain(t *testing.T) {
	pdm := DestOpts(PDMOption(14, 24, 0x1111, 0x2222, 0xee6b, 0xe8d4)...)
	p := Packet{Src: v6a, Dst: v6b, TOS: 0xb9, FlowLabel: 0xabcde, TTL: 3,
		IPv6ExtHeaders: []ExtHeader{
			HopByHop(0x05, 0x02, 0x00, 0x00), // router alert
			RoutingHeader(4, 0, [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 9}),
			pdm,
		},
		TCP: &TCP{SrcPort: 1000, DstPort: 2000, Seq: 1, ACK: true, Payload: []byte("x")}}
	f := p.MustBuild()
	pkt := decode(t, f.Data, layers.LayerTypeEthernet)
	if n := checkChecksums(t, pkt); n != 1 {
		t.Fatalf("checked %d", n)
	}
	ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if ip.NextHeader != layers.IPProtocolIPv6HopByHop || ip.TrafficClass != 0xb9 || ip.FlowLabel != 0xabcde ||
		ip.HopLimit != 3 || int(ip.Length) != len(f.Data)-14-40 {
		t.Errorf("ipv6 %+v", ip)
	}
	if ip.HopByHop == nil || len(ip.HopByHop.Options) == 0 || ip.HopByHop.Options[0].OptionType != 5 {
		t.Errorf("hop-by-hop %+v", ip.HopByHop)
	}
	rt, _ := pkt.Layer(layers.LayerTypeIPv6Routing).(*layers.IPv6Routing)
	if rt == nil || rt.NextHeader != layers.IPProtocolIPv6Destination || rt.RoutingType != 4 || rt.ActualLength != 24 {
		t.Fatalf("routing %+v", rt)
	}
	do, _ := pkt.Layer(layers.LayerTypeIPv6Destination).(*layers.IPv6Destination)
	if do == nil || do.NextHeader != layers.IPProtocolTCP || do.ActualLength != 16 {
		t.Fatalf("destination options %+v", do)
	}
	// The spec's 16-byte PDM header: NH 01 | 0F 0A ... | 01 00.
	want := []byte{6, 1, 0x0f, 0x0a, 14, 24, 0x11, 0x11, 0x22, 0x22, 0xee, 0x6b, 0xe8, 0xd4, 1, 0}
	if got := f.Data[f.ExtHeaders[2] : f.ExtHeaders[2]+16]; !bytes.Equal(got, want) {
		t.Errorf("PDM header % x, want % x", got, want)
	}
	if len(f.ExtHeaders) != 3 || f.ExtHeaders[0] != 54 || f.ExtHeaders[1] != 62 || f.ExtHeaders[2] != 86 || f.L4 != 102 {
		t.Errorf("offsets %v L4 %d", f.ExtHeaders, f.L4)
	}
}

func TestIPv6FragmentAndAH(t *testing.T) {
	p := Packet{Src: v6a, Dst: v6b,
		IPv6ExtHeaders: []ExtHeader{FragmentHeader(0, false, 0x01020304), {Type: ProtoAH, Data: make([]byte, 14)}},
		UDP:            &UDP{SrcPort: 53, DstPort: 5353, Payload: []byte{1}}}
	f := p.MustBuild()
	b := f.Data
	frag := b[f.ExtHeaders[0]:]
	if frag[0] != ProtoAH || frag[1] != 0 || !bytes.Equal(frag[2:8], []byte{0, 0, 1, 2, 3, 4}) {
		t.Errorf("fragment header % x", frag[:8])
	}
	ah := b[f.ExtHeaders[1]:]
	if ah[0] != ProtoUDP || ah[1] != 2 || f.L4-f.ExtHeaders[1] != 16 {
		t.Errorf("AH header % x", ah[:4])
	}
	if b[14+6] != ProtoFragment {
		t.Errorf("ipv6 next header %d", b[20])
	}
	// gopacket does not decode beyond AH in IPv6 by default; verify the
	// UDP checksum by hand with an independent sum over the pseudo-header.
	seg := append([]byte(nil), b[f.L4:]...)
	if PseudoChecksum(v6a, v6b, ProtoUDP, seg) != 0 {
		t.Errorf("UDP checksum does not verify")
	}
	// More fragments / offset encoding.
	fh := FragmentHeader(185, true, 7)
	if !bytes.Equal(fh.Data, []byte{0x05, 0xc9, 0, 0, 0, 7}) {
		t.Errorf("fragment data % x", fh.Data)
	}
}

func TestVLANs(t *testing.T) {
	cases := []struct {
		name  string
		vlans []uint16
		qinq  bool
		tpids []uint16
	}{
		{"none", nil, false, nil},
		{"dot1q", []uint16{0x2064}, false, []uint16{0x8100}},
		{"qinq", []uint16{100, 200}, true, []uint16{0x88a8, 0x8100}},
		{"double-8100", []uint16{100, 200}, false, []uint16{0x8100, 0x8100}},
	}
	for _, tc := range cases {
		for _, dst := range []netip.Addr{v4b, v6b} {
			src := v4a
			if dst.Is6() {
				src = v6a
			}
			t.Run(tc.name+"/"+dst.String(), func(t *testing.T) {
				p := Packet{VLANs: tc.vlans, QinQ: tc.qinq, Src: src, Dst: dst,
					SrcMAC:   net.HardwareAddr{1, 2, 3, 4, 5, 6},
					ICMPEcho: &ICMPEcho{ID: 77, Seq: 3, Payload: []byte("ping")}}
				f := p.MustBuild()
				if f.L3 != 14+4*len(tc.vlans) {
					t.Fatalf("L3 offset %d", f.L3)
				}
				for i, tp := range tc.tpids {
					if got := binary.BigEndian.Uint16(f.Data[12+4*i:]); got != tp {
						t.Errorf("tag %d TPID %#x want %#x", i, got, tp)
					}
				}
				pkt := decode(t, f.Data, layers.LayerTypeEthernet)
				checkChecksums(t, pkt)
				var ids []uint16
				for _, l := range pkt.Layers() {
					if d, ok := l.(*layers.Dot1Q); ok {
						ids = append(ids, d.VLANIdentifier)
					}
				}
				if len(ids) != len(tc.vlans) {
					t.Fatalf("decoded %d tags", len(ids))
				}
				for i := range ids {
					if ids[i] != tc.vlans[i]&0xfff {
						t.Errorf("vid %d = %d", i, ids[i])
					}
				}
				if pkt.NetworkLayer() == nil || !bytes.Equal(pkt.NetworkLayer().NetworkFlow().Src().Raw(), src.AsSlice()) {
					t.Errorf("network layer %v", pkt.NetworkLayer())
				}
			})
		}
	}
	if _, err := (Packet{NoEthernet: true, VLANs: []uint16{1}, Src: v4a, Dst: v4b, UDP: &UDP{}}).Bytes(); err == nil {
		t.Error("VLAN without Ethernet accepted")
	}
}

func TestICMPEcho(t *testing.T) {
	for _, reply := range []bool{false, true} {
		for _, v6 := range []bool{false, true} {
			src, dst := v4a, v4b
			if v6 {
				src, dst = v6a, v6b
			}
			p := Packet{Src: src, Dst: dst, ICMPEcho: &ICMPEcho{Reply: reply, ID: 0xbeef, Seq: 42, Payload: []byte("0123456789abcdef0")}}
			pkt := decode(t, p.MustBytes(), layers.LayerTypeEthernet)
			if n := checkChecksums(t, pkt); (v6 && n != 1) || (!v6 && n != 2) {
				t.Errorf("checked %d", n)
			}
			if v6 {
				ic := pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
				want := uint8(layers.ICMPv6TypeEchoRequest)
				if reply {
					want = uint8(layers.ICMPv6TypeEchoReply)
				}
				echo := pkt.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo)
				if ic.TypeCode.Type() != want || echo.Identifier != 0xbeef || echo.SeqNumber != 42 {
					t.Errorf("icmpv6 %v %+v", ic.TypeCode, echo)
				}
			} else {
				ic := pkt.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
				want := uint8(layers.ICMPv4TypeEchoRequest)
				if reply {
					want = uint8(layers.ICMPv4TypeEchoReply)
				}
				if ic.TypeCode.Type() != want || ic.Id != 0xbeef || ic.Seq != 42 || string(ic.Payload) != "0123456789abcdef0" {
					t.Errorf("icmp %+v", ic)
				}
			}
		}
	}
	// Generic ICMP: destination unreachable quoting a packet.
	quoted := Packet{NoEthernet: true, Src: v4b, Dst: v4a, UDP: &UDP{SrcPort: 1, DstPort: 2}}.MustBytes()
	p := Packet{Src: v4a, Dst: v4b, ICMP: &ICMP{Type: 3, Code: 3, Body: append(make([]byte, 4), quoted...)}}
	checkChecksums(t, decode(t, p.MustBytes(), layers.LayerTypeEthernet))
}

func TestUDP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		src, dst := v4a, v4b
		if v6 {
			src, dst = v6a, v6b
		}
		p := Packet{Src: src, Dst: dst, UDP: &UDP{SrcPort: 5000, DstPort: 9999, Payload: []byte("odd")}}
		pkt := decode(t, p.MustBytes(), layers.LayerTypeEthernet)
		checkChecksums(t, pkt)
		u := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if u.SrcPort != 5000 || u.DstPort != 9999 || u.Length != 11 || string(u.Payload) != "odd" || u.Checksum == 0 {
			t.Errorf("udp %+v", u)
		}
	}
	b := Packet{Src: v4a, Dst: v4b, UDP: &UDP{NoChecksum: true}}.MustBuild()
	if b.Data[b.L4+6] != 0 || b.Data[b.L4+7] != 0 {
		t.Error("NoChecksum ignored")
	}
}

func TestNoEthernetAndNonIP(t *testing.T) {
	f := Packet{NoEthernet: true, Src: v6a, Dst: v6b, TCP: &TCP{SYN: true}}.MustBuild()
	if f.L3 != 0 || f.Data[0]>>4 != 6 {
		t.Fatalf("frame % x", f.Data[:4])
	}
	checkChecksums(t, decode(t, f.Data, layers.LayerTypeIPv6))
	arp := Packet{EtherType: EtherTypeARP, L3Payload: make([]byte, 28)}.MustBytes()
	if len(arp) != 42 || binary.BigEndian.Uint16(arp[12:]) != EtherTypeARP {
		t.Errorf("arp % x", arp)
	}
	for _, bad := range []Packet{
		{Src: v4a, Dst: v6b, UDP: &UDP{}},
		{Src: v4a, UDP: &UDP{}},
		{Src: v4a, Dst: v4b},
		{Src: v4a, Dst: v4b, UDP: &UDP{}, TCP: &TCP{}},
		{TCP: &TCP{}},
		{Src: v4a, Dst: v4b, UDP: &UDP{}, IPv6ExtHeaders: DestOptsChain(1)},
		{Src: v6a, Dst: v6b, UDP: &UDP{}, IPv6ExtHeaders: []ExtHeader{{Type: ProtoFragment, Data: make([]byte, 7)}}},
	} {
		if _, err := bad.Bytes(); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

func TestCooked(t *testing.T) {
	l3 := Packet{NoEthernet: true, Src: v4a, Dst: v4b, TCP: &TCP{ACK: true}}.MustBytes()
	mac := net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	sll := Cooked{PacketType: PacketOutgoing, Addr: mac}.SLL(l3)
	pkt := decode(t, sll, layers.LayerTypeLinuxSLL)
	s := pkt.Layer(layers.LayerTypeLinuxSLL).(*layers.LinuxSLL)
	if s.PacketType != layers.LinuxSLLPacketTypeOutgoing || !bytes.Equal(s.Addr, mac) || s.EthernetType != layers.EthernetTypeIPv4 {
		t.Errorf("sll %+v", s)
	}
	checkChecksums(t, pkt)

	l3v6 := Packet{NoEthernet: true, Src: v6a, Dst: v6b, UDP: &UDP{}}.MustBytes()
	sll2 := Cooked{PacketType: PacketHost, Addr: mac, IfIndex: 7}.SLL2(l3v6)
	pkt = decode(t, sll2, layers.LayerTypeLinuxSLL2)
	s2 := pkt.Layer(layers.LayerTypeLinuxSLL2).(*layers.LinuxSLL2)
	if s2.PacketType != layers.LinuxSLL2PacketTypeHost || s2.InterfaceIndex != 7 || s2.ProtocolType != layers.EthernetTypeIPv6 ||
		!bytes.Equal(s2.Addr, mac) {
		t.Errorf("sll2 %+v", s2)
	}
	checkChecksums(t, pkt)

	null := Null(0, false, l3v6)
	if binary.LittleEndian.Uint32(null) != AFInet6Darwin || !bytes.Equal(null[4:], l3v6) {
		t.Errorf("null % x", null[:4])
	}
}

func TestMalformed(t *testing.T) {
	f := Packet{Src: v4a, Dst: v4b, TCP: &TCP{ACK: true, Payload: []byte("abc")}}.MustBuild()

	tr := Truncations(f.Data)
	if len(tr) != len(f.Data) || len(tr[0]) != 0 || !bytes.Equal(tr[len(tr)-1], f.Data[:len(f.Data)-1]) {
		t.Errorf("truncations")
	}
	if got := Truncate(f.Data, 1000); !bytes.Equal(got, f.Data) || &got[0] == &f.Data[0] {
		t.Errorf("Truncate beyond length must copy the whole frame")
	}
	if len(Truncate(f.Data, -1)) != 0 {
		t.Error("negative truncate")
	}

	if b := f.WithIPv4IHL(4); b[14] != 0x44 || f.Data[14] != 0x45 {
		t.Errorf("IHL %#x (orig %#x)", b[14], f.Data[14])
	}
	if b := f.WithTCPDataOffset(15); b[f.L4+12]>>4 != 15 || 15*4 <= len(b)-f.L4 {
		t.Errorf("data offset does not point beyond the packet")
	}
	if b := f.WithIPLength(1500); binary.BigEndian.Uint16(b[16:]) != 1500 {
		t.Error("ip length")
	}
	// WithTTL and WithTCPFlags keep the packet valid.
	checkChecksums(t, decode(t, f.WithTTL(0), layers.LayerTypeEthernet))
	pkt := decode(t, f.WithTCPFlags(0x03), layers.LayerTypeEthernet)
	checkChecksums(t, pkt)
	if tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP); !tcp.SYN || !tcp.FIN || tcp.ACK {
		t.Errorf("flags %+v", tcp)
	}
	bad := decode(t, f.WithBadL4Checksum(), layers.LayerTypeEthernet)
	tcp := bad.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if err := tcp.SetNetworkLayerForChecksum(bad.NetworkLayer()); err != nil {
		t.Fatal(err)
	}
	if _, res := tcp.VerifyChecksum(); res.Valid {
		t.Error("bad checksum verifies")
	}

	// TCP option with length 0 and with an overrunning length.
	for _, opt := range [][]byte{OptRaw(OptKindTimestamp, 0), OptRaw(OptKindTimestamp, 40, 1, 2)} {
		f := Packet{Src: v4a, Dst: v4b, TCP: &TCP{RawOptions: Opts([]byte{OptNOP, OptNOP}, opt)}}.MustBuild()
		opts := f.Data[f.L4+20 : f.Payload]
		if len(opts)%4 != 0 || !bytes.Equal(opts[:len(opt)+2], append([]byte{1, 1}, opt...)) {
			t.Errorf("raw options % x", opts)
		}
	}

	// An 11-header destination options chain.
	f6 := Packet{Src: v6a, Dst: v6b, IPv6ExtHeaders: DestOptsChain(11), TCP: &TCP{}}.MustBuild()
	n, nh, off := 0, f6.Data[14+6], 14+40
	for nh == ProtoDstOpts {
		n++
		nh = f6.Data[off]
		off += (int(f6.Data[off+1]) + 1) * 8
	}
	if n != 11 || nh != ProtoTCP || off != f6.L4 {
		t.Errorf("chain: %d headers, next %d, at %d (L4 %d)", n, nh, off, f6.L4)
	}
	checkChecksums(t, decode(t, f6.Data, layers.LayerTypeEthernet))
}

func TestChecksumOddAndLong(t *testing.T) {
	// RFC 1071 example: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
	if got := Checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != ^uint16(0xddf2) {
		t.Errorf("checksum %#x", got)
	}
	big := make([]byte, 65000)
	for i := range big {
		big[i] = 0xff
	}
	p := Packet{Src: v6a, Dst: v6b, UDP: &UDP{Payload: big[:65000-8-40]}}
	checkChecksums(t, decode(t, p.MustBytes(), layers.LayerTypeEthernet))
}

func TestIPv4Fragment(t *testing.T) {
	f := Packet{Src: v4a, Dst: v4b, MF: true, FragOffset: 185, Raw: &Raw{Proto: ProtoUDP, Data: make([]byte, 16)}}.MustBuild()
	if got := binary.BigEndian.Uint16(f.Data[f.L3+6:]); got != 0x2000|185 {
		t.Errorf("flags/fragment %#x", got)
	}
	if Checksum(f.Data[f.L3:f.L4]) != 0 {
		t.Error("IPv4 header checksum does not verify")
	}
}
