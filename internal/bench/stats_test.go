package bench

import (
	"math"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestQuantile(t *testing.T) {
	s := []float64{1, 2, 3, 4}
	for _, c := range []struct{ q, want float64 }{
		{0, 1}, {0.25, 1.75}, {0.5, 2.5}, {0.75, 3.25}, {1, 4},
		{-1, 1}, {2, 4}, // clamped
	} {
		if got := Quantile(s, c.q); !near(got, c.want) {
			t.Errorf("Quantile(%v, %v) = %v, want %v", s, c.q, got, c.want)
		}
	}
	if got := Quantile([]float64{7}, 0.3); got != 7 {
		t.Errorf("single value: got %v", got)
	}
	if !math.IsNaN(Quantile(nil, 0.5)) || !math.IsNaN(Quantile(s, math.NaN())) {
		t.Error("empty input or NaN q must give NaN")
	}
}

func TestMedianDoesNotReorder(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	orig := slices.Clone(v)
	if m := Median(v); m != 3 {
		t.Errorf("Median = %v, want 3", m)
	}
	if !slices.Equal(v, orig) {
		t.Errorf("Median reordered its input: %v", v)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("even count: Median = %v, want 2.5", m)
	}
}

func TestSummarize(t *testing.T) {
	got := Summarize([]float64{10, 40, 20, 30, 100})
	// Std: sqrt(((-30)^2+(-20)^2+(-10)^2+0^2+60^2)/4) = sqrt(1250).
	want := Summary{N: 5, Median: 30, Q1: 20, Q3: 40, IQR: 20, Min: 10, Max: 100, Mean: 40, Std: math.Sqrt(1250)}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if s := Summarize(nil); s != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", s)
	}
}

func TestRatio(t *testing.T) {
	if r, ok := Ratio(30, 10); !ok || r != 3 {
		t.Errorf("Ratio(30, 10) = %v, %v", r, ok)
	}
	for _, c := range [][2]float64{{1, 0}, {math.NaN(), 1}, {1, math.Inf(1)}, {math.Inf(1), 1}} {
		if _, ok := Ratio(c[0], c[1]); ok {
			t.Errorf("Ratio(%v, %v) should be undefined", c[0], c[1])
		}
	}
}

func TestPairedRatios(t *testing.T) {
	got := PairedRatios([]float64{20, 30, 40, 50}, []float64{10, 0, 20})
	if want := []float64{2, 2}; !slices.Equal(got, want) {
		t.Errorf("PairedRatios = %v, want %v (zero baseline skipped, extra rep ignored)", got, want)
	}
	if got := PairedRatios(nil, []float64{1}); len(got) != 0 {
		t.Errorf("PairedRatios(nil, ...) = %v", got)
	}
}

func TestRotateAndReverse(t *testing.T) {
	p := []string{"a", "b", "c"}
	for k, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotate(p, k); !slices.Equal(got, want) {
			t.Errorf("rotate(%v, %d) = %v, want %v", p, k, got, want)
		}
	}
	if got := reversed(p); !slices.Equal(got, []string{"c", "b", "a"}) {
		t.Errorf("reversed = %v", got)
	}
	if !slices.Equal(p, []string{"a", "b", "c"}) {
		t.Errorf("input modified: %v", p)
	}
	if rotate([]int(nil), 3) != nil {
		t.Error("rotate of nothing should be nil")
	}
}

func TestHookDelta(t *testing.T) {
	a := ebpf.ProgramStats{Runtime: 1000, RunCount: 10, RecursionMisses: 1}
	b := ebpf.ProgramStats{Runtime: 6000, RunCount: 60, RecursionMisses: 3}
	want := HookCounters{RunCnt: 50, RunTimeNs: 5000, Misses: 2, NsPerRun: 100}
	if got := hookDelta(a, b); *got != want || got.nsPerPacket() != 100 {
		t.Errorf("hookDelta = %+v, want %+v", *got, want)
	}
	// Not run: no NaN for JSON, missing in the series.
	if got := hookDelta(a, a); got.NsPerRun != 0 || !math.IsNaN(got.nsPerPacket()) {
		t.Errorf("no runs: hookDelta = %+v, nsPerPacket %v; want 0 and NaN", *got, got.nsPerPacket())
	}
	if h := (*HookCounters)(nil); !math.IsNaN(h.nsPerPacket()) {
		t.Error("nothing attached: nsPerPacket must be NaN")
	}
}
