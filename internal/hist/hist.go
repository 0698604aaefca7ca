// Package hist is the user-space half of rttscope's log-linear RTT
// histogram (bpf/hist.h): the same bin function, the bounds of each bin,
// and quantiles estimated from bin counts.
//
// Bins: below 2^10 ns (1.024 µs) linear, 32 ns wide (bins 0..31); from
// 2^10 ns each power of two [2^e, 2^(e+1)) is split into 32 equal
// sub-buckets (bins 32..863 for e = 10..35); from 2^36 ns (68.7 s) one
// overflow bin (864). A bin from 1.024 µs up is at most 1/32 = 3.125% of its
// lower bound wide.
//
// Error bound of a quantile: the estimate is the midpoint of the bin that
// holds the sample of the requested rank (nearest-rank definition), clamped
// to the exact minimum and maximum. It is within half a bin of that sample:
// at most 1/64 (1.5625%) of it from 1.024 µs up, at most 16 ns below. In the
// overflow bin the estimate is the exact maximum.
package hist

import "math/bits"

// Layout, as in bpf/hist.h.
const (
	SubBits  = 5
	Subs     = 1 << SubBits
	MinExp   = 10
	MaxExp   = 36
	Overflow = (MaxExp - MinExp + 1) * Subs
	Bins     = Overflow + 1
)

// Bin returns the bin of an RTT of v ns.
func Bin(v uint64) int {
	if v < 1<<MinExp {
		return int(v >> (MinExp - SubBits))
	}
	if v >= 1<<MaxExp {
		return Overflow
	}
	e := bits.Len64(v) - 1
	return (e-(MinExp-1))*Subs + int(v>>(e-SubBits))&(Subs-1)
}

// Lower returns the smallest value (ns) in bin b.
func Lower(b int) uint64 {
	switch {
	case b < Subs:
		return uint64(b) << (MinExp - SubBits)
	case b >= Overflow:
		return 1 << MaxExp
	}
	e := b/Subs + MinExp - 1
	return uint64(Subs+b%Subs) << (e - SubBits)
}

// Upper returns the first value (ns) past bin b; for the overflow bin it
// returns the largest uint64.
func Upper(b int) uint64 {
	if b >= Overflow {
		return ^uint64(0)
	}
	return Lower(b + 1)
}

// Quantile estimates the q-quantile (0 < q <= 1) of the samples counted in
// h (Bins counts, total count), whose exact minimum and maximum are min and
// max: the midpoint of the bin holding the sample of rank ceil(q*count),
// clamped to [min, max]. It returns 0 for an empty histogram.
func Quantile(h []uint32, count uint64, q float64, min, max uint64) uint64 {
	if count == 0 {
		return 0
	}
	rank := uint64(q * float64(count))
	if float64(rank) < q*float64(count) {
		rank++
	}
	if rank < 1 {
		rank = 1
	}
	if rank > count {
		rank = count
	}
	var seen uint64
	for b, n := range h {
		seen += uint64(n)
		if seen < rank {
			continue
		}
		if b >= Overflow {
			return max
		}
		lo, hi := Lower(b), Upper(b)
		v := lo + (hi-lo)/2
		if v < min {
			v = min
		}
		if v > max {
			v = max
		}
		return v
	}
	return max
}

// NearestRank returns the 1-based rank of the q-quantile of n samples,
// ceil(q*n) clamped to [1, n]: the definition Quantile estimates.
func NearestRank(n int, q float64) int {
	r := int(q * float64(n))
	if float64(r) < q*float64(n) {
		r++
	}
	return max(1, min(r, n))
}

// Per-flow summaries use a coarser histogram: CoarseBins bins, bin Bin(v)
// >> CoarseShift, 8 sub-buckets per power of two (at most 12.5% wide), so a
// quantile from it is within 1/16 (6.25%) of the sample from 1.024 µs up.
const (
	CoarseShift = 2
	CoarseBins  = Bins>>CoarseShift + 1
)

// CoarseLower and CoarseUpper bound coarse bin c.
func CoarseLower(c int) uint64 { return Lower(c << CoarseShift) }

// CoarseUpper returns the first value past coarse bin c.
func CoarseUpper(c int) uint64 {
	last := c<<CoarseShift + 1<<CoarseShift - 1
	if last >= Overflow {
		return Upper(Overflow)
	}
	return Upper(last)
}

// CoarseQuantile is Quantile for a coarse histogram of 16-bit counts.
func CoarseQuantile(h []uint16, count uint64, q float64, min, max uint64) uint64 {
	if count == 0 {
		return 0
	}
	var total uint64
	for _, n := range h {
		total += uint64(n)
	}
	// Saturated bins undercount: rank within what was counted.
	rank := uint64(NearestRank(int(total), q))
	var seen uint64
	for c, n := range h {
		seen += uint64(n)
		if seen < rank || n == 0 {
			continue
		}
		if c<<CoarseShift >= Overflow {
			return max
		}
		lo, hi := CoarseLower(c), CoarseUpper(c)
		return clamp(lo+(hi-lo)/2, min, max)
	}
	return max
}

func clamp(v, lo, hi uint64) uint64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}
