package replay

import "encoding/binary"

// pktInfo is what the direction rules need to know about a packet: its
// addresses, ports (the echo identifier for ICMP echo) and a few flags. It
// is NOT what the BPF programs match on: they parse every packet themselves.
type pktInfo struct {
	ok       bool // an IPv4/IPv6 packet whose addresses were found
	ipv6     bool
	proto    uint8
	src, dst [16]byte // IPv4 as v4-mapped IPv6
	sport    uint16
	dport    uint16
	syn, ack bool // TCP flags
	request  bool // ICMP/ICMPv6 echo request
	reply    bool // ICMP/ICMPv6 echo reply
	l4off    int  // offset of the transport header in the frame; 0 if unknown
}

const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
	protoICMP     = 1
	protoTCP      = 6
	protoUDP      = 17
	protoICMPv6   = 58
	maxVLANTags   = 2
	maxExtHeaders = 8
)

var v4Mapped = [12]byte{10: 0xff, 11: 0xff}

// parsePkt fills pi from an Ethernet frame (up to two VLAN tags, IPv4 with
// options, IPv6 with up to maxExtHeaders extension headers). Packets it
// cannot read leave pi.ok false. It does not allocate.
func parsePkt(b []byte, pi *pktInfo) {
	*pi = pktInfo{}
	if len(b) < 14 {
		return
	}
	et := binary.BigEndian.Uint16(b[12:])
	off := 14
	for i := 0; i < maxVLANTags && (et == etherTypeVLAN || et == etherTypeQinQ); i++ {
		if len(b) < off+4 {
			return
		}
		et = binary.BigEndian.Uint16(b[off+2:])
		off += 4
	}
	var l4 []byte
	switch et {
	case etherTypeIPv4:
		ip := b[off:]
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return
		}
		ihl := int(ip[0]&0x0f) * 4
		if ihl < 20 || len(ip) < ihl {
			return
		}
		copy(pi.src[:12], v4Mapped[:])
		copy(pi.src[12:], ip[12:16])
		copy(pi.dst[:12], v4Mapped[:])
		copy(pi.dst[12:], ip[16:20])
		pi.proto = ip[9]
		pi.ok = true
		// Later fragments carry no transport header.
		if binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 {
			return
		}
		l4 = ip[ihl:]
	case etherTypeIPv6:
		ip := b[off:]
		if len(ip) < 40 || ip[0]>>4 != 6 {
			return
		}
		copy(pi.src[:], ip[8:24])
		copy(pi.dst[:], ip[24:40])
		pi.ipv6, pi.ok = true, true
		nh, pos := ip[6], 40
		for i := 0; i <= maxExtHeaders; i++ {
			switch nh {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if len(ip) < pos+8 {
					return
				}
				nh, pos = ip[pos], pos+(int(ip[pos+1])+1)*8
				continue
			case 44: // fragment
				if len(ip) < pos+8 {
					return
				}
				if binary.BigEndian.Uint16(ip[pos+2:])&0xfff8 != 0 {
					pi.proto = 44
					return
				}
				nh, pos = ip[pos], pos+8
				continue
			case 51: // AH
				if len(ip) < pos+8 {
					return
				}
				nh, pos = ip[pos], pos+(int(ip[pos+1])+2)*4
				continue
			}
			break
		}
		pi.proto = nh
		if len(ip) < pos {
			return
		}
		l4 = ip[pos:]
	default:
		return
	}
	pi.l4off = len(b) - len(l4)
	switch pi.proto {
	case protoTCP:
		if len(l4) >= 14 {
			pi.sport = binary.BigEndian.Uint16(l4)
			pi.dport = binary.BigEndian.Uint16(l4[2:])
			pi.syn = l4[13]&0x02 != 0
			pi.ack = l4[13]&0x10 != 0
		}
	case protoUDP:
		if len(l4) >= 4 {
			pi.sport = binary.BigEndian.Uint16(l4)
			pi.dport = binary.BigEndian.Uint16(l4[2:])
		}
	case protoICMP, protoICMPv6:
		if len(l4) >= 8 && l4[1] == 0 {
			req, rep := byte(8), byte(0)
			if pi.proto == protoICMPv6 {
				req, rep = 128, 129
			}
			if l4[0] == req || l4[0] == rep {
				pi.request, pi.reply = l4[0] == req, l4[0] == rep
				pi.sport = binary.BigEndian.Uint16(l4[4:])
				pi.dport = pi.sport
			}
		}
	}
}

// maxL4Header is the most the programs read of a transport header: a TCP
// header with 40 bytes of options.
const maxL4Header = 60

// headerBytes returns how much of a frame of n bytes the BPF programs can
// read: everything up to the end of the largest transport header, never
// less than minKeep. The programs take lengths from the IP header and never
// read payload, so feeding only these bytes gives exactly the same result
// and lets many packets share one BPF_PROG_TEST_RUN call. Frames whose
// transport header was not found are kept whole.
func headerBytes(pi *pktInfo, n int) int {
	const minKeep = 128
	if !pi.ok || pi.l4off == 0 {
		return n
	}
	return min(n, max(minKeep, pi.l4off+maxL4Header))
}
