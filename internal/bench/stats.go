package bench

import (
	"math"
	"slices"
)

// Summary describes the repetitions of one measured series. Spread is given
// both as the interquartile range (robust) and as min/max (everything).
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
	IQR    float64 `json:"iqr"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	// Std is the sample standard deviation (n-1); 0 for one value.
	Std float64 `json:"std"`
}

// Quantile returns the q-quantile (0 <= q <= 1) of sorted, interpolating
// linearly between the closest ranks (the "type 7" definition of R and
// NumPy's default). It returns NaN for an empty slice.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	q = math.Max(0, math.Min(1, q))
	pos := q * float64(n-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return sorted[lo]
	}
	frac := pos - float64(lo)
	return sorted[lo] + frac*(sorted[hi]-sorted[lo])
}

// Median is the 0.5-quantile of values (in any order); NaN when empty.
func Median(values []float64) float64 {
	s := slices.Clone(values)
	slices.Sort(s)
	return Quantile(s, 0.5)
}

// Summarize computes the summary of values (in any order). The zero
// Summary (N == 0) is returned for no values.
func Summarize(values []float64) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	q1, q3 := Quantile(s, 0.25), Quantile(s, 0.75)
	mean := sum / float64(len(s))
	var sq float64
	for _, v := range s {
		sq += (v - mean) * (v - mean)
	}
	std := 0.0
	if len(s) > 1 {
		std = math.Sqrt(sq / float64(len(s)-1))
	}
	return Summary{
		Std:    std,
		N:      len(s),
		Median: Quantile(s, 0.5),
		Q1:     q1,
		Q3:     q3,
		IQR:    q3 - q1,
		Min:    s[0],
		Max:    s[len(s)-1],
		Mean:   mean,
	}
}

// Ratio returns a/b, or ok == false when the ratio is undefined (b == 0,
// or either value is not finite).
func Ratio(a, b float64) (r float64, ok bool) {
	if b == 0 || !finite(a) || !finite(b) {
		return 0, false
	}
	r = a / b
	return r, finite(r)
}

// PairedRatios returns a[i]/b[i] for every repetition i present in both
// series (the shorter length) where the ratio is defined. Because the
// configurations run interleaved, rep i of a and rep i of b ran next to
// each other, and the paired ratio cancels slow drifts of the machine.
func PairedRatios(a, b []float64) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		if r, ok := Ratio(a[i], b[i]); ok {
			out = append(out, r)
		}
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func nan() float64 { return math.NaN() }

// tQuantile975 is the 0.975 quantile of Student's t distribution with df
// degrees of freedom (df >= 1): the two-sided 95 % interval.
func tQuantile975(df int) float64 {
	table := []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086}
	if df < 1 {
		return math.NaN()
	}
	if df <= len(table) {
		return table[df-1]
	}
	return 1.96 + 2.4/float64(df) // within 0.5 % of the exact value from df 21 on
}

// RatioCI is the 95 % confidence interval of the geometric mean of paired
// ratios (t interval on their logarithms). ok is false with fewer than two
// ratios or a ratio <= 0.
func RatioCI(ratios []float64) (geo, lo, hi float64, ok bool) {
	n := len(ratios)
	if n < 2 {
		return 0, 0, 0, false
	}
	var sum, sq float64
	logs := make([]float64, n)
	for i, r := range ratios {
		if !(r > 0) || !finite(r) {
			return 0, 0, 0, false
		}
		logs[i] = math.Log(r)
		sum += logs[i]
	}
	mean := sum / float64(n)
	for _, l := range logs {
		sq += (l - mean) * (l - mean)
	}
	half := tQuantile975(n-1) * math.Sqrt(sq/float64(n-1)/float64(n))
	return math.Exp(mean), math.Exp(mean - half), math.Exp(mean + half), true
}
