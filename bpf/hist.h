/* SPDX-License-Identifier: GPL-2.0 */
/* Log-linear RTT histogram (HDR style). Values are ns. Below 2^10 ns the
 * bins are linear, 32 ns wide; from 2^10 ns each power of two is split into
 * 32 equal sub-buckets, so a bin is at most 1/32 (3.1%) of its lower bound
 * wide; from 2^36 ns (68.7 s) on everything falls into one overflow bin.
 * internal/hist implements the same function: keep both in step. */
#ifndef RTTSCOPE_HIST_H
#define RTTSCOPE_HIST_H

#include "common.h"

#define HIST_SUB_BITS 5
#define HIST_SUBS     (1 << HIST_SUB_BITS)
#define HIST_MIN_EXP  10 /* first log bucket: [2^10, 2^11) ns */
#define HIST_MAX_EXP  36 /* overflow from 2^36 ns */
#define HIST_OVERFLOW ((HIST_MAX_EXP - HIST_MIN_EXP + 1) * HIST_SUBS)
#define HIST_BINS     (HIST_OVERFLOW + 1)

/* floor(log2(v)) for v > 0 in six branch-free steps (BPF has no clz). */
static __always_inline __u32 ilog2_u64(__u64 v)
{
	__u32 r = 0, s;

	s = (v > 0xffffffffULL) << 5;
	v >>= s;
	r |= s;
	s = (v > 0xffff) << 4;
	v >>= s;
	r |= s;
	s = (v > 0xff) << 3;
	v >>= s;
	r |= s;
	s = (v > 0xf) << 2;
	v >>= s;
	r |= s;
	s = (v > 0x3) << 1;
	v >>= s;
	r |= s;
	r |= (__u32)(v >> 1);
	return r;
}

/* Bin of an RTT of v ns; always < HIST_BINS. */
static __always_inline __u32 hist_bin(__u64 v)
{
	__u32 e;

	if (v < (1ULL << HIST_MIN_EXP))
		return (__u32)v >> (HIST_MIN_EXP - HIST_SUB_BITS);
	if (v >= (1ULL << HIST_MAX_EXP))
		return HIST_OVERFLOW;
	e = ilog2_u64(v);
	return (e - (HIST_MIN_EXP - 1)) * HIST_SUBS +
	       ((__u32)(v >> (e - HIST_SUB_BITS)) & (HIST_SUBS - 1));
}

#endif /* RTTSCOPE_HIST_H */
