// Package pdm implements `rttscope pdm`: RFC 8250 Performance and
// Diagnostic Metrics for IPv6 with the tc/TCX programs of bpf/pdm.c. It
// holds the Go twin of the BPF delta encoder, the decoder, the loader and
// attach code, and the records written for each PDM option seen.
package pdm

import (
	"math"
	"math/bits"
	"time"
)

// asPerNs is the number of attoseconds in a nanosecond, the unit PDM
// deltas are counted in.
const asPerNs = 1_000_000_000

// Encode returns the PDM encoding of a delta of ns nanoseconds: the 16
// most significant bits of the delta in attoseconds and the number of bits
// shifted out (truncated). It is the twin of pdm_encode in
// bpf/pdm_encode.h; the tests hold both to the same vectors.
func Encode(ns uint64) (value uint16, scale uint8) {
	hi, lo := bits.Mul64(ns, asPerNs)
	switch {
	case hi != 0:
		shift := uint(64 + bits.Len64(hi) - 16)
		if shift >= 64 {
			return uint16(hi >> (shift - 64)), uint8(shift)
		}
		return uint16(lo>>shift | hi<<(64-shift)), uint8(shift)
	case lo>>16 != 0:
		shift := uint(bits.Len64(lo) - 16)
		return uint16(lo >> shift), uint8(shift)
	}
	return uint16(lo), 0
}

// DecodeNs returns the delta a PDM value and scale stand for, in
// nanoseconds (fractional: small scales are finer than 1 ns).
func DecodeNs(value uint16, scale uint8) float64 {
	return math.Ldexp(float64(value), int(scale)) / asPerNs
}

// Decode is DecodeNs rounded to a time.Duration (saturating).
func Decode(value uint16, scale uint8) time.Duration {
	ns := DecodeNs(value, scale)
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(math.Round(ns))
}
