/* SPDX-License-Identifier: GPL-2.0 */
/* RFC 8250 delta time encoding. A PDM delta is value * 2^scale attoseconds
 * with a 16-bit value: the 16 most significant bits of the delta in
 * attoseconds, scale the number of bits shifted out (truncated, not
 * rounded). 1 ns is 10^9 as, so an hour (3.6 * 10^21 as) needs more than 64
 * bits: the product ns * 10^9 is formed as a 128-bit number from two 32x30
 * bit products. internal/pdm/encode.go is the Go twin; the tests hold both
 * to the same vectors. */
#ifndef RTTSCOPE_PDM_ENCODE_H
#define RTTSCOPE_PDM_ENCODE_H

#include "common.h"

#define AS_PER_NS 1000000000ULL

/* Index of the highest set bit of a non-zero x (0..63). BPF has no
 * count-leading-zeros instruction: a binary search of six steps. */
static __always_inline __u32 pdm_fls64(__u64 x)
{
	__u32 r = 0;

	if (x >> 32) {
		x >>= 32;
		r += 32;
	}
	if (x >> 16) {
		x >>= 16;
		r += 16;
	}
	if (x >> 8) {
		x >>= 8;
		r += 8;
	}
	if (x >> 4) {
		x >>= 4;
		r += 4;
	}
	if (x >> 2) {
		x >>= 2;
		r += 2;
	}
	if (x >> 1)
		r += 1;
	return r;
}

/* Encodes a delta of ns nanoseconds into *scale and returns the 16-bit
 * value. 0 ns encodes as 0/0. */
static __always_inline __u16 pdm_encode(__u64 ns, __u8 *scale)
{
	__u64 p_lo = (ns & 0xffffffffULL) * AS_PER_NS; /* < 2^62 */
	__u64 p_hi = (ns >> 32) * AS_PER_NS; /* < 2^62 */
	__u64 lo = p_lo + (p_hi << 32);
	__u64 hi = (p_hi >> 32) + (lo < p_lo); /* carry */
	__u32 msb, shift;

	if (hi) {
		msb = 64 + pdm_fls64(hi);
		shift = msb - 15; /* 49 .. 79 */
		*scale = shift;
		if (shift >= 64)
			return hi >> (shift - 64);
		return (lo >> shift) | (hi << (64 - shift));
	}
	if (lo >> 16) {
		shift = pdm_fls64(lo) - 15;
		*scale = shift;
		return lo >> shift;
	}
	*scale = 0;
	return lo;
}

#endif /* RTTSCOPE_PDM_ENCODE_H */
