package pktcraft

import (
	"encoding/binary"
	"net/netip"
)

// Helpers for malformed input. Each returns a modified copy of the frame
// and leaves f.Data alone. Unless stated otherwise they do not fix any
// checksum: a parser under test must not depend on it.
//
// Cases that the builder itself produces:
//   - TCP option with length 0 or overrunning the header:
//     TCP{RawOptions: OptRaw(OptKindTimestamp, 0)} or OptRaw(8, 40);
//   - IPv6 extension header chain longer than a limit:
//     Packet{IPv6ExtHeaders: DestOptsChain(11)}.

// Truncate returns a copy of the first n bytes of b (n is clamped to
// [0, len(b)]).
func Truncate(b []byte, n int) []byte {
	n = max(0, min(n, len(b)))
	return append([]byte(nil), b[:n]...)
}

// Truncations returns every proper prefix of b, b[:0] through b[:len(b)-1],
// each a separate copy: run a parser on all of them.
func Truncations(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for n := range b {
		out[n] = Truncate(b, n)
	}
	return out
}

// Clone returns a copy of the frame bytes.
func (f Frame) Clone() []byte { return append([]byte(nil), f.Data...) }

// Patch returns a copy with data written at offset off.
func (f Frame) Patch(off int, data ...byte) []byte {
	b := f.Clone()
	copy(b[off:], data)
	return b
}

// WithIPv4IHL returns a copy whose IPv4 header length field is ihl (in
// 4-byte words; < 5 is invalid, larger than the packet overruns it).
func (f Frame) WithIPv4IHL(ihl uint8) []byte {
	b := f.Clone()
	b[f.L3] = b[f.L3]&0xf0 | ihl&0x0f
	return b
}

// WithIPVersion returns a copy whose IP version nibble is v.
func (f Frame) WithIPVersion(v uint8) []byte {
	b := f.Clone()
	b[f.L3] = b[f.L3]&0x0f | v<<4
	return b
}

// WithIPLength returns a copy with the IPv4 total length or the IPv6
// payload length set to n.
func (f Frame) WithIPLength(n uint16) []byte {
	b := f.Clone()
	if f.IPv6 {
		binary.BigEndian.PutUint16(b[f.L3+4:], n)
	} else {
		binary.BigEndian.PutUint16(b[f.L3+2:], n)
	}
	return b
}

// WithTTL returns a copy with the IPv4 TTL / IPv6 hop limit set (the IPv4
// header checksum is recomputed, so this is a valid packet).
func (f Frame) WithTTL(ttl uint8) []byte {
	b := f.Clone()
	if f.IPv6 {
		b[f.L3+7] = ttl
		return b
	}
	b[f.L3+8] = ttl
	f.fixIPv4Checksum(b)
	return b
}

func (f Frame) fixIPv4Checksum(b []byte) {
	h := b[f.L3 : f.L3+int(b[f.L3]&0x0f)*4]
	binary.BigEndian.PutUint16(h[10:], 0)
	binary.BigEndian.PutUint16(h[10:], Checksum(h))
}

// WithTCPDataOffset returns a copy whose TCP data offset is words (4-byte
// units). 15 on a segment with a short payload points beyond the packet;
// less than 5 is invalid.
func (f Frame) WithTCPDataOffset(words uint8) []byte {
	b := f.Clone()
	b[f.L4+12] = b[f.L4+12]&0x0f | words<<4
	return b
}

// WithTCPFlags returns a copy with the TCP flags byte replaced (e.g.
// SYN|FIN, or no flags at all) and the TCP checksum fixed.
func (f Frame) WithTCPFlags(flags uint8) []byte {
	b := f.Clone()
	b[f.L4+13] = flags
	f.fixL4Checksum(b, 16)
	return b
}

// WithBadL4Checksum returns a copy whose transport checksum is wrong.
func (f Frame) WithBadL4Checksum() []byte {
	b := f.Clone()
	off := f.L4 + l4ChecksumOffset(f.Proto)
	b[off] ^= 0x5a
	return b
}

func l4ChecksumOffset(proto uint8) int {
	switch proto {
	case ProtoTCP:
		return 16
	case ProtoUDP:
		return 6
	default:
		return 2
	}
}

// fixL4Checksum recomputes the transport checksum from the addresses in b.
func (f Frame) fixL4Checksum(b []byte, off int) {
	seg := b[f.L4:]
	binary.BigEndian.PutUint16(seg[off:], 0)
	if f.Proto == ProtoICMP {
		binary.BigEndian.PutUint16(seg[off:], Checksum(seg))
		return
	}
	src, dst := f.addrs(b)
	binary.BigEndian.PutUint16(seg[off:], PseudoChecksum(src, dst, f.Proto, seg))
}

func (f Frame) addrs(b []byte) (src, dst netip.Addr) {
	if f.IPv6 {
		return netip.AddrFrom16([16]byte(b[f.L3+8 : f.L3+24])), netip.AddrFrom16([16]byte(b[f.L3+24 : f.L3+40]))
	}
	return netip.AddrFrom4([4]byte(b[f.L3+12 : f.L3+16])), netip.AddrFrom4([4]byte(b[f.L3+16 : f.L3+20]))
}
