package capture

import "encoding/binary"

// Ethernet types written into synthetic headers.
const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
)

// Linux packet types (sll_pkttype).
const (
	pktHost      = 0
	pktBroadcast = 1
	pktMulticast = 2
	pktOtherHost = 3
	pktOutgoing  = 4
)

func sllDirection(t uint16) Direction {
	switch t {
	case pktHost, pktBroadcast, pktMulticast, pktOtherHost:
		return DirInbound
	case pktOutgoing:
		return DirOutbound
	}
	return DirUnknown
}

// normalise fills p.Data, WireLen, SrcMAC, LinkType and (when p.Direction
// is still unknown) Direction from a frame of link type lt stored at
// buf[off:off+capLen]; buf[:off] is scratch space of at least headroom
// bytes the synthetic Ethernet header may overwrite.
func normalise(p *Packet, lt uint16, buf []byte, off, capLen, wireLen, fcsLen int) {
	p.LinkType = LinkTypeName(lt)
	normaliseFrame(p, lt, buf, off, capLen, wireLen, fcsLen)
	// Some writers record a wire length below the captured length.
	p.WireLen = max(p.WireLen, len(p.Data))
}

func normaliseFrame(p *Packet, lt uint16, buf []byte, off, capLen, wireLen, fcsLen int) {
	frame := buf[off : off+capLen]
	switch lt {
	case LinkTypeEthernet:
		if fcsLen > 0 && capLen == wireLen && capLen >= 14+fcsLen {
			capLen -= fcsLen
			wireLen -= fcsLen
			frame = frame[:capLen]
		}
		p.Data, p.WireLen = frame, wireLen
		if capLen >= 12 {
			copy(p.SrcMAC[:], frame[6:12])
		}

	case LinkTypeLinuxSLL:
		// pkttype(2) hatype(2) halen(2) addr(8) protocol(2)
		if capLen < 16 {
			p.Data, p.WireLen = frame[:0], max(0, wireLen-16+14)
			return
		}
		if p.Direction == DirUnknown {
			p.Direction = sllDirection(binary.BigEndian.Uint16(frame[0:]))
		}
		var src []byte
		if binary.BigEndian.Uint16(frame[4:]) == 6 {
			src = frame[6:12]
			copy(p.SrcMAC[:], src)
		}
		proto := binary.BigEndian.Uint16(frame[14:])
		p.Data = synthEthernet(buf, off+16, capLen-16, src, proto)
		p.WireLen = wireLen - 16 + 14

	case LinkTypeLinuxSLL2:
		// protocol(2) reserved(2) ifindex(4) hatype(2) pkttype(1) halen(1) addr(8)
		if capLen < 20 {
			p.Data, p.WireLen = frame[:0], max(0, wireLen-20+14)
			return
		}
		if p.Direction == DirUnknown {
			p.Direction = sllDirection(uint16(frame[10]))
		}
		var src []byte
		if frame[11] == 6 {
			src = frame[12:18]
			copy(p.SrcMAC[:], src)
		}
		proto := binary.BigEndian.Uint16(frame[0:])
		p.Data = synthEthernet(buf, off+20, capLen-20, src, proto)
		p.WireLen = wireLen - 20 + 14

	case LinkTypeRaw, LinkTypeDLTRaw12, LinkTypeDLTRaw14, LinkTypeIPv4, LinkTypeIPv6:
		var proto uint16
		switch lt {
		case LinkTypeIPv4:
			proto = etherTypeIPv4
		case LinkTypeIPv6:
			proto = etherTypeIPv6
		default:
			proto = ipEtherType(frame)
		}
		p.Data = synthEthernet(buf, off, capLen, nil, proto)
		p.WireLen = wireLen + 14

	case LinkTypeNull, LinkTypeLoop:
		if capLen < 4 {
			p.Data, p.WireLen = frame[:0], max(0, wireLen-4+14)
			return
		}
		var af uint32
		if lt == LinkTypeLoop {
			af = binary.BigEndian.Uint32(frame)
		} else if af = binary.LittleEndian.Uint32(frame); af > 0xffff {
			// Written by a big-endian host.
			af = binary.BigEndian.Uint32(frame)
		}
		var proto uint16
		switch af {
		case 2:
			proto = etherTypeIPv4
		case 10, 24, 28, 30: // AF_INET6 on Linux, Net/OpenBSD, FreeBSD, Darwin
			proto = etherTypeIPv6
		default:
			proto = ipEtherType(frame[4:])
		}
		p.Data = synthEthernet(buf, off+4, capLen-4, nil, proto)
		p.WireLen = wireLen - 4 + 14
	}
}

// ipEtherType guesses the EtherType of a bare IP packet from its version.
func ipEtherType(b []byte) uint16 {
	if len(b) == 0 {
		return 0
	}
	switch b[0] >> 4 {
	case 4:
		return etherTypeIPv4
	case 6:
		return etherTypeIPv6
	}
	return 0
}

// synthEthernet writes an Ethernet header (zero destination, src or zero
// source, EtherType proto) into the 14 bytes before buf[l3] and returns
// the frame header plus n bytes of L3.
func synthEthernet(buf []byte, l3, n int, src []byte, proto uint16) []byte {
	h := buf[l3-14 : l3]
	// src may alias h (SLL address lies inside the old header): move it first.
	var s [6]byte
	copy(s[:], src)
	clear(h[0:6])
	copy(h[6:12], s[:])
	binary.BigEndian.PutUint16(h[12:], proto)
	return buf[l3-14 : l3+n]
}
