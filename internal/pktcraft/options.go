package pktcraft

import "encoding/binary"

// TCP option kinds and single-byte options.
const (
	OptEOL byte = 0
	OptNOP byte = 1

	OptKindMSS           byte = 2
	OptKindWScale        byte = 3
	OptKindSACKPermitted byte = 4
	OptKindSACK          byte = 5
	OptKindTimestamp     byte = 8
)

// Opts concatenates option encodings, e.g.
// Opts(OptMSS(1460), []byte{OptNOP}, OptWScale(7)).
func Opts(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// OptMSS is the maximum segment size option (kind 2, length 4).
func OptMSS(mss uint16) []byte { return []byte{OptKindMSS, 4, byte(mss >> 8), byte(mss)} }

// OptWScale is the window scale option (kind 3, length 3).
func OptWScale(shift uint8) []byte { return []byte{OptKindWScale, 3, shift} }

// OptSACKPermitted is the SACK-permitted option (kind 4, length 2).
func OptSACKPermitted() []byte { return []byte{OptKindSACKPermitted, 2} }

// OptSACK is a SACK option (kind 5) with the given [left, right) edges.
func OptSACK(blocks ...[2]uint32) []byte {
	b := []byte{OptKindSACK, byte(2 + 8*len(blocks))}
	for _, blk := range blocks {
		b = binary.BigEndian.AppendUint32(b, blk[0])
		b = binary.BigEndian.AppendUint32(b, blk[1])
	}
	return b
}

// OptTimestamp is the timestamp option (kind 8, length 10).
func OptTimestamp(tsval, tsecr uint32) []byte {
	b := []byte{OptKindTimestamp, 10}
	b = binary.BigEndian.AppendUint32(b, tsval)
	return binary.BigEndian.AppendUint32(b, tsecr)
}

// OptRaw is an option with an arbitrary kind and length byte followed by
// data, the length byte is NOT derived from data. OptRaw(8, 0) is a
// timestamp option with length 0; OptRaw(8, 40) overruns any header.
func OptRaw(kind, length byte, data ...byte) []byte {
	return append([]byte{kind, length}, data...)
}

// IPv4 option helpers (raw bytes for Packet.IPv4Options).

// IPv4OptNOP is the IPv4 no-operation option.
const IPv4OptNOP byte = 1

// IPv4OptRecordRoute is an empty Record Route option with room for n addresses.
func IPv4OptRecordRoute(n int) []byte {
	b := make([]byte, 3+4*n)
	b[0] = 7
	b[1] = byte(len(b))
	b[2] = 4
	return b
}

// IPv4OptRouterAlert is the Router Alert option (RFC 2113).
func IPv4OptRouterAlert() []byte { return []byte{0x94, 4, 0, 0} }

// IPv6 extension header helpers.

// HopByHop is a hop-by-hop options header holding the given raw options
// (padded with Pad1/PadN by the builder).
func HopByHop(opts ...byte) ExtHeader { return ExtHeader{Type: ProtoHopByHop, Data: opts} }

// DestOpts is a destination options header holding the given raw options.
func DestOpts(opts ...byte) ExtHeader { return ExtHeader{Type: ProtoDstOpts, Data: opts} }

// RoutingHeader is a routing header of the given type with segments left
// and addresses (type 0 / segment routing style: 4 reserved bytes, then
// the addresses).
func RoutingHeader(routingType, segmentsLeft uint8, addrs ...[16]byte) ExtHeader {
	d := []byte{routingType, segmentsLeft, 0, 0, 0, 0}
	for _, a := range addrs {
		d = append(d, a[:]...)
	}
	return ExtHeader{Type: ProtoRouting, Data: d}
}

// FragmentHeader is an IPv6 fragment header; offset is in 8-byte units.
func FragmentHeader(offset uint16, more bool, id uint32) ExtHeader {
	fo := offset << 3
	if more {
		fo |= 1
	}
	// Data follows next-header and the reserved byte: offset/flags, id.
	d := binary.BigEndian.AppendUint16(nil, fo)
	return ExtHeader{Type: ProtoFragment, Data: binary.BigEndian.AppendUint32(d, id)}
}

// PDMOption is the RFC 8250 Performance and Diagnostic Metrics destination
// option (type 0x0F, length 10). Put it in DestOpts(...) to get the
// 16-byte header from the spec: NH 01 | 0F 0A ... | 01 00.
func PDMOption(scaleDTLR, scaleDTLS uint8, psntp, psnlr, dtlr, dtls uint16) []byte {
	b := []byte{0x0f, 10, scaleDTLR, scaleDTLS}
	b = binary.BigEndian.AppendUint16(b, psntp)
	b = binary.BigEndian.AppendUint16(b, psnlr)
	b = binary.BigEndian.AppendUint16(b, dtlr)
	return binary.BigEndian.AppendUint16(b, dtls)
}

// DestOptsChain returns n empty destination options headers (8 bytes
// each), for chains longer than a parser's limit.
func DestOptsChain(n int) []ExtHeader {
	hs := make([]ExtHeader, n)
	for i := range hs {
		hs[i] = ExtHeader{Type: ProtoDstOpts}
	}
	return hs
}
