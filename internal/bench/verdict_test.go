package bench

import (
	"strings"
	"testing"
)

// Seed 003 measured a baseline of 18.6 ± 1.2 Mbit/s and every tracing
// program 4-10 % "faster" with the same spread. These two series have that
// shape: the configuration is 3 % above the baseline, less than the
// baseline's own spread (6 %).
var (
	seed003Baseline = []float64{17.2, 19.9, 18.1, 20.0, 17.5, 19.3, 16.9, 18.8, 20.1, 18.2}
	seed003Config   = []float64{19.5, 18.0, 20.6, 18.4, 19.9, 17.6, 20.3, 19.0, 18.2, 20.1}
)

func TestVerdictSeed003IsNoDifference(t *testing.T) {
	lo, hi, ok := BootstrapRatio(seed003Config, seed003Baseline, true)
	if !ok {
		t.Fatal("no interval")
	}
	if !(lo < 1 && hi > 1) {
		t.Errorf("interval [%.3f, %.3f] should contain 1", lo, hi)
	}
	if v := VerdictOf(lo, hi, HigherFaster); v != VerdictNoDiff {
		t.Errorf("verdict %q, want %q", v, VerdictNoDiff)
	}
	b := Summarize(seed003Baseline)
	mr := Summarize(seed003Config).Mean / b.Mean
	if w := NoiseWarning(b, mr); !strings.Contains(w, "exceeds the effect") {
		t.Errorf("no noise warning for a 3%% effect on a 6%% spread: %q", w)
	}
}

// Every configuration of a seed-003-like run goes through Finalize: each is
// above the baseline's median, none may be called faster.
func TestFinalizeSeed003AllConfigsNoDifference(t *testing.T) {
	r := &Result{}
	base := r.series("hooks", "udp", "baseline", "", MetricPacketsPerS, "packets/s", "")
	base.Values = seed003Baseline
	for i, shift := range []float64{0.01, 0.02, 0.03, 0.04} {
		s := r.series("hooks", "udp", []string{"a", "b", "c", "d"}[i], "", MetricPacketsPerS, "packets/s", "")
		for j, v := range seed003Config {
			s.Values = append(s.Values, v*(1+shift)-0.5*float64(j%2))
		}
		s.Baseline = base.ID()
	}
	r.Finalize()
	for _, s := range r.Series[1:] {
		if s.Compare == nil || s.Summary.Median <= base.Summary.Median {
			t.Fatalf("%s: the synthetic config should sit above the baseline: %+v", s.Program, s.Summary)
		}
		if s.Compare.Verdict != VerdictNoDiff {
			t.Errorf("%s: verdict %q (CI %.3f-%.3f), want %q", s.Program, s.Compare.Verdict, *s.Compare.RatioLow, *s.Compare.RatioHigh, VerdictNoDiff)
		}
	}
}

func TestVerdictClearEffects(t *testing.T) {
	base := []float64{100, 101, 99, 100.5, 99.5, 100, 100.2, 99.8}
	slow := []float64{90, 91, 89, 90.5, 89.5, 90, 90.2, 89.8}
	lo, hi, ok := BootstrapRatio(slow, base, true)
	if !ok || hi >= 1 {
		t.Fatalf("interval [%v, %v] should lie below 1", lo, hi)
	}
	for _, c := range []struct {
		d    Direction
		want string
	}{{HigherFaster, VerdictSlower}, {LowerFaster, VerdictFaster}, {Neutral, VerdictLower}} {
		if v := VerdictOf(lo, hi, c.d); v != c.want {
			t.Errorf("direction %d: verdict %q, want %q", c.d, v, c.want)
		}
	}
	lo, hi, _ = BootstrapRatio(base, slow, false)
	if v := VerdictOf(lo, hi, HigherFaster); v != VerdictFaster {
		t.Errorf("unpaired, 11%% more throughput: verdict %q (CI %v-%v)", v, lo, hi)
	}
	if w := NoiseWarning(Summarize(base), 0.9); w != "" {
		t.Errorf("1%% spread against a 10%% effect warned: %q", w)
	}
}

func TestBootstrapDeterministicAndDiff(t *testing.T) {
	a := []float64{5, 6, 7, 8, 9}
	b := []float64{1, 2, 3, 4, 5}
	l1, h1, _ := BootstrapDiff(a, b, true)
	l2, h2, _ := BootstrapDiff(a, b, true)
	if l1 != l2 || h1 != h2 {
		t.Error("the same values gave different intervals")
	}
	// Paired, every difference is exactly 4: the interval is the point.
	if !near(l1, 4) || !near(h1, 4) {
		t.Errorf("paired constant difference: interval [%v, %v], want [4, 4]", l1, h1)
	}
	if _, _, ok := BootstrapRatio([]float64{1}, b, true); ok {
		t.Error("one value must give no interval")
	}
	if _, _, ok := BootstrapRatio(a, []float64{0, 0, 0}, false); ok {
		t.Error("a zero baseline must give no interval")
	}
}
