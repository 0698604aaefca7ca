// Package pktcraft builds exact test packets: Ethernet (optionally VLAN or
// QinQ tagged) or bare L3 frames carrying IPv4 (with options) or IPv6 (with
// extension headers) and TCP, UDP, ICMP or ICMPv6. Lengths and checksums
// (IPv4 header, TCP/UDP/ICMP/ICMPv6 including the pseudo-header) are always
// computed; the helpers in malformed.go then break a built frame on purpose.
//
// The builder is deliberately explicit: what is not set is either a
// documented default or absent, and nothing is reordered. It is meant for
// BPF unit tests (BPF_PROG_TEST_RUN) and for writing capture files.
package pktcraft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// EtherTypes used by the builder.
const (
	EtherTypeIPv4  uint16 = 0x0800
	EtherTypeIPv6  uint16 = 0x86dd
	EtherTypeARP   uint16 = 0x0806
	EtherTypeVLAN  uint16 = 0x8100 // 802.1Q
	EtherTypeQinQ  uint16 = 0x88a8 // 802.1ad service tag
	EthernetHdrLen        = 14
)

// IP protocol / IPv6 next-header numbers.
const (
	ProtoHopByHop uint8 = 0
	ProtoICMP     uint8 = 1
	ProtoTCP      uint8 = 6
	ProtoUDP      uint8 = 17
	ProtoRouting  uint8 = 43
	ProtoFragment uint8 = 44
	ProtoAH       uint8 = 51
	ProtoICMPv6   uint8 = 58
	ProtoNoNext   uint8 = 59
	ProtoDstOpts  uint8 = 60
)

// Default addresses used when SrcMAC / DstMAC are nil.
var (
	DefaultSrcMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	DefaultDstMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}
)

// DefaultTTL is used when Packet.TTL is 0 (use Frame.WithTTL for a real 0).
const DefaultTTL = 64

// Packet describes one frame. Exactly one of TCP, UDP, ICMPEcho, ICMP or
// Raw must be set when Src/Dst are set. A frame without IP (ARP, ...) is
// built by leaving Src/Dst zero and setting EtherType and L3Payload.
type Packet struct {
	// L2
	NoEthernet bool             // bare L3 frame (tun, raw IP, payload of SLL/SLL2)
	SrcMAC     net.HardwareAddr // DefaultSrcMAC if nil
	DstMAC     net.HardwareAddr // DefaultDstMAC if nil
	// VLANs are 802.1Q TCIs (PCP<<13 | DEI<<12 | VID), outermost first.
	VLANs []uint16
	// QinQ makes the outermost tag an 802.1ad tag (TPID 0x88a8); the
	// others stay 0x8100. Without QinQ every tag uses 0x8100.
	QinQ bool
	// EtherType and L3Payload build a non-IP frame (Src/Dst must be zero).
	EtherType uint16
	L3Payload []byte

	// L3. Src and Dst must be the same family (4in6-mapped counts as IPv6).
	Src, Dst netip.Addr
	TTL      uint8 // IPv4 TTL / IPv6 hop limit; 0 means DefaultTTL
	TOS      uint8 // IPv4 TOS / IPv6 traffic class; ECN in the low 2 bits
	// IPv4 only.
	IPID        uint16
	DF, MF      bool
	FragOffset  uint16 // in 8-byte units (13 bits)
	IPv4Options []byte // raw options; padded with EOL (0) to 4 bytes, max 40
	// IPv6 only.
	FlowLabel      uint32      // 20 bits
	IPv6ExtHeaders []ExtHeader // in order, between the IPv6 header and L4

	// L4, exactly one.
	TCP      *TCP
	UDP      *UDP
	ICMPEcho *ICMPEcho // ICMP or ICMPv6 depending on the address family
	ICMP     *ICMP     // any ICMP/ICMPv6 type
	Raw      *Raw      // any protocol, bytes verbatim, no checksum
}

// TCP is a TCP header plus payload. Options are laid out as
// ExtraOptions, then the timestamp option (unless NoTimestamp), then
// TrailingOptions, then EOL padding to a multiple of 4. With no extra or
// trailing options the layout is Linux's: NOP NOP TS. RawOptions, when
// non-nil, replaces all of that verbatim (still EOL padded).
type TCP struct {
	SrcPort, DstPort                       uint16
	Seq, Ack                               uint32
	FIN, SYN, RST, PSH, ACK, URG, ECE, CWR bool
	NS                                     bool // historic AE/NS bit (data-offset byte, bit 0)
	Window                                 uint16
	Urgent                                 uint16
	TSval, TSecr                           uint32
	NoTimestamp                            bool
	ExtraOptions                           []byte // before the TS option, e.g. OptMSS(1460)
	TrailingOptions                        []byte // after the TS option
	RawOptions                             []byte // replaces everything above if non-nil
	Payload                                []byte
}

// UDP is a UDP header plus payload.
type UDP struct {
	SrcPort, DstPort uint16
	Payload          []byte
	NoChecksum       bool // IPv4 only: leave the checksum 0 ("none")
}

// ICMPEcho is an echo request or reply (ICMP type 8/0, ICMPv6 128/129).
type ICMPEcho struct {
	Reply   bool
	ID, Seq uint16
	Payload []byte
}

// ICMP is any ICMP/ICMPv6 message; Body is everything after the 4-byte
// type/code/checksum header (e.g. unused word + quoted packet).
type ICMP struct {
	Type, Code uint8
	Body       []byte
}

// Raw is an arbitrary transport: Proto is the IP protocol / next header,
// Data is copied verbatim after the IP header (and extension headers).
type Raw struct {
	Proto uint8
	Data  []byte
}

// ExtHeader is one IPv6 extension header. Data is the body after the two
// fixed bytes (next header, length). The builder pads it: hop-by-hop and
// destination options with Pad1/PadN options, other types with zeros, to a
// multiple of 8 bytes. The fragment header (44) is always 8 bytes: Data is
// its 6 remaining bytes (see FragmentHeader). AH (51) uses 4-byte length
// units. Length fields and next-header chaining are computed.
type ExtHeader struct {
	Type uint8
	Data []byte
}

// Frame is a built packet with the offsets of its layers, for tests that
// need to poke at specific fields.
type Frame struct {
	Data       []byte
	L3         int   // offset of the IP header (or of L3Payload)
	L4         int   // offset of the transport header; -1 without IP
	Payload    int   // offset of the transport payload; -1 without IP
	ExtHeaders []int // offsets of the IPv6 extension headers
	IPv6       bool
	Proto      uint8 // transport protocol number
}

// MustBytes is Bytes for tests: it panics on error.
func (p Packet) MustBytes() []byte {
	b, err := p.Bytes()
	if err != nil {
		panic(err)
	}
	return b
}

// Bytes returns the full frame with correct lengths and checksums.
func (p Packet) Bytes() ([]byte, error) {
	f, err := p.Build()
	if err != nil {
		return nil, err
	}
	return f.Data, nil
}

// MustBuild is Build for tests: it panics on error.
func (p Packet) MustBuild() Frame {
	f, err := p.Build()
	if err != nil {
		panic(err)
	}
	return f
}

// Build returns the frame and the offsets of its layers.
func (p Packet) Build() (Frame, error) {
	f := Frame{L4: -1, Payload: -1}
	var b []byte

	ipOK := p.Src.IsValid() || p.Dst.IsValid()
	if ipOK && (!p.Src.IsValid() || !p.Dst.IsValid()) {
		return f, errors.New("pktcraft: both Src and Dst must be set")
	}
	if ipOK && p.Src.Is4() != p.Dst.Is4() {
		return f, fmt.Errorf("pktcraft: Src %v and Dst %v are different address families", p.Src, p.Dst)
	}
	if !ipOK && (p.TCP != nil || p.UDP != nil || p.ICMPEcho != nil || p.ICMP != nil || p.Raw != nil) {
		return f, errors.New("pktcraft: a transport needs Src and Dst")
	}
	v6 := ipOK && !p.Src.Is4()
	f.IPv6 = v6

	etherType := p.EtherType
	switch {
	case ipOK && v6:
		etherType = EtherTypeIPv6
	case ipOK:
		etherType = EtherTypeIPv4
	case etherType == 0 && !p.NoEthernet:
		return f, errors.New("pktcraft: non-IP frame needs an EtherType")
	}

	if !p.NoEthernet {
		dst, src := p.DstMAC, p.SrcMAC
		if dst == nil {
			dst = DefaultDstMAC
		}
		if src == nil {
			src = DefaultSrcMAC
		}
		if len(dst) != 6 || len(src) != 6 {
			return f, errors.New("pktcraft: MAC addresses must be 6 bytes")
		}
		b = append(b, dst...)
		b = append(b, src...)
		for i, tci := range p.VLANs {
			tpid := EtherTypeVLAN
			if i == 0 && p.QinQ {
				tpid = EtherTypeQinQ
			}
			b = binary.BigEndian.AppendUint16(b, tpid)
			b = binary.BigEndian.AppendUint16(b, tci)
		}
		b = binary.BigEndian.AppendUint16(b, etherType)
	} else if len(p.VLANs) > 0 {
		return f, errors.New("pktcraft: VLAN tags need an Ethernet header")
	}
	f.L3 = len(b)

	if !ipOK {
		f.Data = append(b, p.L3Payload...)
		return f, nil
	}
	if len(p.L3Payload) > 0 {
		return f, errors.New("pktcraft: L3Payload is only for non-IP frames")
	}

	proto, l4, err := p.transport()
	if err != nil {
		return f, err
	}
	f.Proto = proto

	ttl := p.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}

	if !v6 {
		if len(p.IPv6ExtHeaders) > 0 {
			return f, errors.New("pktcraft: IPv6 extension headers on an IPv4 packet")
		}
		opts := padTo(p.IPv4Options, 4, 0)
		if len(opts) > 40 {
			return f, fmt.Errorf("pktcraft: %d bytes of IPv4 options (max 40)", len(opts))
		}
		hl := 20 + len(opts)
		total := hl + len(l4)
		if total > 0xffff {
			return f, fmt.Errorf("pktcraft: IPv4 packet too long (%d)", total)
		}
		h := make([]byte, hl)
		h[0] = 0x40 | byte(hl/4)
		h[1] = p.TOS
		binary.BigEndian.PutUint16(h[2:], uint16(total))
		binary.BigEndian.PutUint16(h[4:], p.IPID)
		frag := p.FragOffset & 0x1fff
		if p.DF {
			frag |= 0x4000
		}
		if p.MF {
			frag |= 0x2000
		}
		binary.BigEndian.PutUint16(h[6:], frag)
		h[8] = ttl
		h[9] = proto
		s4, d4 := p.Src.As4(), p.Dst.As4()
		copy(h[12:], s4[:])
		copy(h[16:], d4[:])
		copy(h[20:], opts)
		binary.BigEndian.PutUint16(h[10:], Checksum(h))
		b = append(b, h...)
	} else {
		if len(p.IPv4Options) > 0 {
			return f, errors.New("pktcraft: IPv4 options on an IPv6 packet")
		}
		var ext []byte
		var extOff []int
		next := proto
		// Build back to front so each header knows its successor.
		chain := make([][]byte, len(p.IPv6ExtHeaders))
		for i := len(p.IPv6ExtHeaders) - 1; i >= 0; i-- {
			eh, err := p.IPv6ExtHeaders[i].encode(next)
			if err != nil {
				return f, fmt.Errorf("pktcraft: extension header %d: %w", i, err)
			}
			chain[i] = eh
			next = p.IPv6ExtHeaders[i].Type
		}
		for _, eh := range chain {
			extOff = append(extOff, f.L3+40+len(ext))
			ext = append(ext, eh...)
		}
		plen := len(ext) + len(l4)
		if plen > 0xffff {
			return f, fmt.Errorf("pktcraft: IPv6 payload too long (%d)", plen)
		}
		h := make([]byte, 40)
		vtf := uint32(6)<<28 | uint32(p.TOS)<<20 | p.FlowLabel&0xfffff
		binary.BigEndian.PutUint32(h[0:], vtf)
		binary.BigEndian.PutUint16(h[4:], uint16(plen))
		h[6] = next
		h[7] = ttl
		s16, d16 := p.Src.As16(), p.Dst.As16()
		copy(h[8:], s16[:])
		copy(h[24:], d16[:])
		b = append(b, h...)
		b = append(b, ext...)
		f.ExtHeaders = extOff
	}
	f.L4 = len(b)
	b = append(b, l4...)
	f.Data = b
	f.Payload = f.L4 + p.transportHeaderLen(l4)

	// Transport checksum over the pseudo-header.
	switch proto {
	case ProtoTCP:
		if p.TCP != nil {
			putL4Checksum(b[f.L4:], 16, p.Src, p.Dst, proto)
		}
	case ProtoUDP:
		if p.UDP != nil && !(p.UDP.NoChecksum && !v6) {
			putL4Checksum(b[f.L4:], 6, p.Src, p.Dst, proto)
			if binary.BigEndian.Uint16(b[f.L4+6:]) == 0 {
				binary.BigEndian.PutUint16(b[f.L4+6:], 0xffff)
			}
		}
	case ProtoICMP:
		if p.ICMPEcho != nil || p.ICMP != nil {
			seg := b[f.L4:]
			binary.BigEndian.PutUint16(seg[2:], 0)
			binary.BigEndian.PutUint16(seg[2:], Checksum(seg))
		}
	case ProtoICMPv6:
		if p.ICMPEcho != nil || p.ICMP != nil {
			putL4Checksum(b[f.L4:], 2, p.Src, p.Dst, proto)
		}
	}
	return f, nil
}

func (p Packet) transportHeaderLen(l4 []byte) int {
	switch {
	case p.TCP != nil:
		return int(l4[12]>>4) * 4
	case p.UDP != nil:
		return 8
	case p.ICMPEcho != nil:
		return 8
	case p.ICMP != nil:
		return 4
	}
	return 0
}

// transport encodes the L4 header and payload with a zero checksum.
func (p Packet) transport() (uint8, []byte, error) {
	n := 0
	for _, set := range []bool{p.TCP != nil, p.UDP != nil, p.ICMPEcho != nil, p.ICMP != nil, p.Raw != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return 0, nil, fmt.Errorf("pktcraft: exactly one of TCP, UDP, ICMPEcho, ICMP, Raw must be set (have %d)", n)
	}
	v6 := !p.Src.Is4()
	icmpProto := ProtoICMP
	if v6 {
		icmpProto = ProtoICMPv6
	}
	switch {
	case p.TCP != nil:
		b, err := p.TCP.encode()
		return ProtoTCP, b, err
	case p.UDP != nil:
		u := p.UDP
		b := make([]byte, 8, 8+len(u.Payload))
		binary.BigEndian.PutUint16(b[0:], u.SrcPort)
		binary.BigEndian.PutUint16(b[2:], u.DstPort)
		if 8+len(u.Payload) > 0xffff {
			return 0, nil, errors.New("pktcraft: UDP payload too long")
		}
		binary.BigEndian.PutUint16(b[4:], uint16(8+len(u.Payload)))
		return ProtoUDP, append(b, u.Payload...), nil
	case p.ICMPEcho != nil:
		e := p.ICMPEcho
		typ := uint8(8)
		switch {
		case v6 && e.Reply:
			typ = 129
		case v6:
			typ = 128
		case e.Reply:
			typ = 0
		}
		b := []byte{typ, 0, 0, 0, byte(e.ID >> 8), byte(e.ID), byte(e.Seq >> 8), byte(e.Seq)}
		return icmpProto, append(b, e.Payload...), nil
	case p.ICMP != nil:
		b := []byte{p.ICMP.Type, p.ICMP.Code, 0, 0}
		return icmpProto, append(b, p.ICMP.Body...), nil
	default:
		return p.Raw.Proto, append([]byte(nil), p.Raw.Data...), nil
	}
}

func (t *TCP) encode() ([]byte, error) {
	var opts []byte
	if t.RawOptions != nil {
		opts = append(opts, t.RawOptions...)
	} else {
		opts = append(opts, t.ExtraOptions...)
		if !t.NoTimestamp {
			if len(t.ExtraOptions) == 0 && len(t.TrailingOptions) == 0 {
				opts = append(opts, OptNOP, OptNOP)
			}
			opts = append(opts, OptTimestamp(t.TSval, t.TSecr)...)
		}
		opts = append(opts, t.TrailingOptions...)
	}
	opts = padTo(opts, 4, OptEOL)
	if len(opts) > 40 {
		return nil, fmt.Errorf("pktcraft: %d bytes of TCP options (max 40)", len(opts))
	}
	hl := 20 + len(opts)
	b := make([]byte, hl, hl+len(t.Payload))
	binary.BigEndian.PutUint16(b[0:], t.SrcPort)
	binary.BigEndian.PutUint16(b[2:], t.DstPort)
	binary.BigEndian.PutUint32(b[4:], t.Seq)
	binary.BigEndian.PutUint32(b[8:], t.Ack)
	b[12] = byte(hl/4) << 4
	if t.NS {
		b[12] |= 1
	}
	var fl byte
	for i, set := range []bool{t.FIN, t.SYN, t.RST, t.PSH, t.ACK, t.URG, t.ECE, t.CWR} {
		if set {
			fl |= 1 << i
		}
	}
	b[13] = fl
	binary.BigEndian.PutUint16(b[14:], t.Window)
	binary.BigEndian.PutUint16(b[18:], t.Urgent)
	copy(b[20:], opts)
	return append(b, t.Payload...), nil
}

func (e ExtHeader) encode(next uint8) ([]byte, error) {
	switch e.Type {
	case ProtoFragment:
		if len(e.Data) > 6 {
			return nil, fmt.Errorf("fragment header data is %d bytes (max 6)", len(e.Data))
		}
		b := make([]byte, 8)
		b[0] = next
		copy(b[2:], e.Data)
		return b, nil
	case ProtoAH:
		b := padTo(append([]byte{next, 0}, e.Data...), 8, 0)
		if len(b)/4-2 > 255 {
			return nil, fmt.Errorf("AH header too long (%d)", len(b))
		}
		b[1] = byte(len(b)/4 - 2)
		return b, nil
	case ProtoNoNext, ProtoTCP, ProtoUDP, ProtoICMPv6:
		return nil, fmt.Errorf("type %d is not an extension header", e.Type)
	}
	b := append([]byte{next, 0}, e.Data...)
	if e.Type == ProtoHopByHop || e.Type == ProtoDstOpts {
		b = append(b, tlvPadding(len(b))...)
	} else {
		b = padTo(b, 8, 0)
	}
	if len(b)/8-1 > 255 {
		return nil, fmt.Errorf("extension header too long (%d)", len(b))
	}
	b[1] = byte(len(b)/8 - 1)
	return b, nil
}

// tlvPadding returns the Pad1/PadN option that pads n bytes to a multiple of 8.
func tlvPadding(n int) []byte {
	switch pad := (8 - n%8) % 8; pad {
	case 0:
		return nil
	case 1:
		return []byte{0}
	default:
		p := make([]byte, pad)
		p[0] = 1
		p[1] = byte(pad - 2)
		return p
	}
}

func padTo(b []byte, m int, fill byte) []byte {
	out := append([]byte(nil), b...)
	for len(out)%m != 0 {
		out = append(out, fill)
	}
	return out
}

// putL4Checksum zeroes and fills the checksum at seg[off:] using the
// pseudo-header for src/dst/proto and the whole segment.
func putL4Checksum(seg []byte, off int, src, dst netip.Addr, proto uint8) {
	binary.BigEndian.PutUint16(seg[off:], 0)
	binary.BigEndian.PutUint16(seg[off:], PseudoChecksum(src, dst, proto, seg))
}

// Checksum is the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 {
	return ^fold(sum(0, b))
}

// PseudoChecksum is the TCP/UDP/ICMPv6 checksum of seg (whose own checksum
// field must be zero) with the IPv4 or IPv6 pseudo-header.
func PseudoChecksum(src, dst netip.Addr, proto uint8, seg []byte) uint16 {
	var s uint32
	if src.Is4() {
		a, b := src.As4(), dst.As4()
		s = sum(s, a[:])
		s = sum(s, b[:])
		s += uint32(proto) + uint32(len(seg))
	} else {
		a, b := src.As16(), dst.As16()
		s = sum(s, a[:])
		s = sum(s, b[:])
		s += uint32(len(seg)>>16) + uint32(len(seg)&0xffff) + uint32(proto)
	}
	return ^fold(sum(s, seg))
}

func sum(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return fold32(s)
}

func fold32(s uint32) uint32 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return s
}

func fold(s uint32) uint16 { return uint16(fold32(s)) }
