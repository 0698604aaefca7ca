package pktcraft

import (
	"encoding/binary"
	"net"
)

// Linux packet types (sll_pkttype), as found in SLL/SLL2 headers.
const (
	PacketHost      uint8 = 0 // to us
	PacketBroadcast uint8 = 1
	PacketMulticast uint8 = 2
	PacketOtherHost uint8 = 3 // to someone else, seen in promiscuous mode
	PacketOutgoing  uint8 = 4 // sent by us
)

// ARPHRDEther is the ARPHRD type of Ethernet devices (and of veth and lo
// in practice: lo is ARPHRD_LOOPBACK = 772).
const (
	ARPHRDEther    uint16 = 1
	ARPHRDLoopback uint16 = 772
	ARPHRDNone     uint16 = 0xfffe // tun devices
)

// Cooked describes a Linux "cooked" capture header (LINKTYPE_LINUX_SLL 113
// or LINKTYPE_LINUX_SLL2 276), as tcpdump -i any writes them.
type Cooked struct {
	PacketType uint8            // PacketHost, ..., PacketOutgoing
	ARPHRD     uint16           // 0 means ARPHRDEther
	Addr       net.HardwareAddr // link-layer source address, up to 8 bytes
	Protocol   uint16           // EtherType; 0 derives it from the IP version of l3
	IfIndex    uint32           // SLL2 only
}

func (c Cooked) proto(l3 []byte) uint16 {
	if c.Protocol != 0 || len(l3) == 0 {
		return c.Protocol
	}
	switch l3[0] >> 4 {
	case 4:
		return EtherTypeIPv4
	case 6:
		return EtherTypeIPv6
	}
	return 0
}

func (c Cooked) arphrd() uint16 {
	if c.ARPHRD == 0 {
		return ARPHRDEther
	}
	return c.ARPHRD
}

// SLL returns the 16-byte SLL header followed by l3.
func (c Cooked) SLL(l3 []byte) []byte {
	b := make([]byte, 16, 16+len(l3))
	binary.BigEndian.PutUint16(b[0:], uint16(c.PacketType))
	binary.BigEndian.PutUint16(b[2:], c.arphrd())
	binary.BigEndian.PutUint16(b[4:], uint16(len(c.Addr)))
	copy(b[6:14], c.Addr)
	binary.BigEndian.PutUint16(b[14:], c.proto(l3))
	return append(b, l3...)
}

// SLL2 returns the 20-byte SLL2 header followed by l3.
func (c Cooked) SLL2(l3 []byte) []byte {
	b := make([]byte, 20, 20+len(l3))
	binary.BigEndian.PutUint16(b[0:], c.proto(l3))
	binary.BigEndian.PutUint32(b[4:], c.IfIndex)
	binary.BigEndian.PutUint16(b[8:], c.arphrd())
	b[10] = c.PacketType
	b[11] = byte(len(c.Addr))
	copy(b[12:20], c.Addr)
	return append(b, l3...)
}

// BSD address families used in LINKTYPE_NULL / LINKTYPE_LOOP headers.
const (
	AFInet         uint32 = 2
	AFInet6Linux   uint32 = 10
	AFInet6BSD     uint32 = 24 // NetBSD, OpenBSD
	AFInet6FreeBSD uint32 = 28
	AFInet6Darwin  uint32 = 30
)

// Null returns a LINKTYPE_NULL frame: the address family in the byte order
// of the capturing host (little-endian here, bigEndian for e.g. SPARC)
// followed by l3. af 0 derives AF_INET / AF_INET6 (Darwin's 30) from l3.
func Null(af uint32, bigEndian bool, l3 []byte) []byte {
	if af == 0 && len(l3) > 0 {
		af = AFInet
		if l3[0]>>4 == 6 {
			af = AFInet6Darwin
		}
	}
	b := make([]byte, 4, 4+len(l3))
	if bigEndian {
		binary.BigEndian.PutUint32(b, af)
	} else {
		binary.LittleEndian.PutUint32(b, af)
	}
	return append(b, l3...)
}
