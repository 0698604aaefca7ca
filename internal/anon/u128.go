package anon

import (
	"crypto/cipher"
	"encoding/binary"
)

// u128 is a 128-bit value in network order: hi holds bytes 0..7, so bit 0
// in the drafts' "first bit" sense is the top bit of hi.
type u128 struct{ hi, lo uint64 }

func u128From(b [16]byte) u128 {
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (x u128) bytes() [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:], x.lo)
	return b
}

func (x u128) and(y u128) u128 { return u128{x.hi & y.hi, x.lo & y.lo} }
func (x u128) or(y u128) u128  { return u128{x.hi | y.hi, x.lo | y.lo} }
func (x u128) xor(y u128) u128 { return u128{x.hi ^ y.hi, x.lo ^ y.lo} }
func (x u128) not() u128       { return u128{^x.hi, ^x.lo} }

// topMask has the first n bits (counted from the most significant) set.
func topMask(n int) u128 {
	switch {
	case n <= 0:
		return u128{}
	case n <= 64:
		return u128{^uint64(0) << (64 - n), 0}
	case n < 128:
		return u128{^uint64(0), ^uint64(0) << (128 - n)}
	}
	return u128{^uint64(0), ^uint64(0)}
}

// bit returns bit i counted from the most significant (i = 0 is the top
// bit of byte 0), as 0 or 1.
func (x u128) bit(i int) uint64 {
	if i < 64 {
		return x.hi >> (63 - i) & 1
	}
	return x.lo >> (127 - i) & 1
}

// withBit returns x with bit i (from the most significant) ORed with v.
func (x u128) withBit(i int, v uint64) u128 {
	if i < 64 {
		x.hi |= v << (63 - i)
	} else {
		x.lo |= v << (127 - i)
	}
	return x
}

// shl1 shifts left by one bit and puts v in the least significant bit.
func (x u128) shl1(v uint64) u128 {
	return u128{x.hi<<1 | x.lo>>63, x.lo<<1 | v}
}

// encrypt runs one AES block over x, using in as scratch and writing the
// result to out. Slices passed to a cipher.Block escape to the heap, so
// callers allocate in and out once per address rather than per block.
func encrypt(b cipher.Block, x u128, in, out []byte) {
	binary.BigEndian.PutUint64(in[:8], x.hi)
	binary.BigEndian.PutUint64(in[8:16], x.lo)
	b.Encrypt(out, in)
}
