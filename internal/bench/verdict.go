package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Verdicts of a comparison with the baseline, from the 95 % bootstrap
// confidence interval of the ratio: only an interval that excludes 1 says
// anything.
const (
	VerdictFaster = "faster"
	VerdictSlower = "slower"
	VerdictHigher = "higher"
	VerdictLower  = "lower"
	VerdictNoDiff = "no difference at this noise"
)

// Direction says how a metric reads: whether more of it means faster
// (throughput, packets/s), slower (time per packet or per event), or
// neither (CPU time, samples/s: the verdict then says higher or lower).
type Direction int

const (
	Neutral      Direction = iota
	HigherFaster           // throughput-like
	LowerFaster            // cost-like: ns per packet, per event
)

// bootstrapResamples is enough for stable 2.5 and 97.5 percentiles (the
// interval's ends move by well under 1 % of its width between seeds).
const bootstrapResamples = 4000

// minBootstrapN is the fewest repetitions an interval is computed from:
// resampling two values tells nothing (the percentile interval of n
// values is too narrow for small n anyway: use the default 10).
const minBootstrapN = 3

// bootstrapSeed makes reports reproducible: the same values give the same
// interval.
const bootstrapSeed = 0x5eed

// BootstrapRatio is the 95 % percentile bootstrap confidence interval of
// mean(a) / mean(b) (needs minBootstrapN values on each side). With paired (the two series ran interleaved, rep i of
// one next to rep i of the other, and have the same length) the rep
// indices are resampled jointly, which cancels slow drifts of the machine
// common to both; else each series is resampled on its own. ok is false
// with fewer values or a baseline mean that can reach zero.
func BootstrapRatio(a, b []float64, paired bool) (lo, hi float64, ok bool) {
	return bootstrap(a, b, paired, func(ma, mb float64) float64 {
		if mb == 0 {
			return math.NaN()
		}
		return ma / mb
	})
}

// BootstrapDiff is the interval of mean(a) - mean(b), resampled like
// BootstrapRatio.
func BootstrapDiff(a, b []float64, paired bool) (lo, hi float64, ok bool) {
	return bootstrap(a, b, paired, func(ma, mb float64) float64 { return ma - mb })
}

func bootstrap(a, b []float64, paired bool, stat func(ma, mb float64) float64) (lo, hi float64, ok bool) {
	if len(a) < minBootstrapN || len(b) < minBootstrapN {
		return 0, 0, false
	}
	paired = paired && len(a) == len(b)
	rng := rand.New(rand.NewPCG(bootstrapSeed, uint64(len(a))<<32|uint64(len(b))))
	out := make([]float64, 0, bootstrapResamples)
	for range bootstrapResamples {
		var sa, sb float64
		if paired {
			for range a {
				i := rng.IntN(len(a))
				sa += a[i]
				sb += b[i]
			}
		} else {
			for range a {
				sa += a[rng.IntN(len(a))]
			}
			for range b {
				sb += b[rng.IntN(len(b))]
			}
		}
		// A resample whose baseline mean is 0 (windows that forwarded
		// nothing) has no ratio: left out, unless that is common.
		if v := stat(sa/float64(len(a)), sb/float64(len(b))); finite(v) {
			out = append(out, v)
		}
	}
	if len(out) < bootstrapResamples*95/100 {
		return 0, 0, false
	}
	slices.Sort(out)
	return Quantile(out, 0.025), Quantile(out, 0.975), true
}

// VerdictOf reads a ratio's confidence interval [lo, hi] for a metric of
// direction d: an interval that contains 1 is "no difference at this
// noise", whatever the medians say.
func VerdictOf(lo, hi float64, d Direction) string {
	above, below := lo > 1, hi < 1
	switch {
	case !above && !below:
		return VerdictNoDiff
	case d == HigherFaster && above, d == LowerFaster && below:
		return VerdictFaster
	case d == HigherFaster, d == LowerFaster:
		return VerdictSlower
	case above:
		return VerdictHigher
	default:
		return VerdictLower
	}
}

// NoiseWarning returns a warning when the baseline's own spread (its
// coefficient of variation, std / mean) is larger than the effect being
// measured (|mean ratio - 1|), "" otherwise: such a comparison needs more
// repetitions or a quieter machine before any difference means something.
func NoiseWarning(baseline Summary, meanRatio float64) string {
	if baseline.N < 2 || baseline.Mean == 0 || !finite(meanRatio) {
		return ""
	}
	cv := math.Abs(baseline.Std / baseline.Mean)
	effect := math.Abs(meanRatio - 1)
	if cv <= effect {
		return ""
	}
	return fmt.Sprintf("baseline spread (std %.1f%% of its mean) exceeds the effect (%.1f%%)", 100*cv, 100*effect)
}

// metricDirections lists the metrics whose verdict says faster or slower;
// every other metric is Neutral.
var metricDirections = map[string]Direction{}

// registerDirections records the direction of metrics (at init).
func registerDirections(d Direction, metrics ...string) {
	for _, m := range metrics {
		metricDirections[m] = d
	}
}

func init() {
	registerDirections(HigherFaster, MetricPacketsPerS, MetricThroughput, MetricFwdMbit, MetricFwdPPS, MetricGoodput)
	registerDirections(LowerFaster, MetricNsPerRun, MetricNsPerPacket)
}

// MetricDirection returns how metric reads (Neutral when unknown).
func MetricDirection(metric string) Direction { return metricDirections[metric] }

// ratioOfSeries is s's mean over base's as a derived figure of s's
// configuration, with the bootstrap interval of the ratio of means, paired
// by round when both series have every round (the rounds ran
// interleaved). False when either mean is unusable.
func ratioOfSeries(s, base *Series, name, what string) (Derived, bool) {
	paired := s.Missing == 0 && base.Missing == 0
	lo, hi, ok := BootstrapRatio(s.Values, base.Values, paired)
	ratio, rok := Ratio(s.Summary.Mean, base.Summary.Mean)
	if !ok || !rok {
		return Derived{}, false
	}
	return Derived{
		Group: s.Group, Case: s.Case, Config: s.Program, Name: name, Unit: "x",
		Value: ratio, Low: lo, High: hi,
		How: fmt.Sprintf("%s; 95%% bootstrap interval (paired by round: %v)", what, paired),
	}, true
}
