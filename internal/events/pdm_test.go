package events

import (
	"testing"

	"github.com/rttscope/rttscope/internal/hist"
)

// TestDistributionSet: exact count, sum, min, mean and max; the
// non-empty bins with their bounds (the overflow bin without an upper
// one); a second Set without samples clears everything.
func TestDistributionSet(t *testing.T) {
	h := make([]uint32, hist.Bins)
	vs := []uint64{500, 1_000_000, 1_000_100, 1 << 40}
	var sum uint64
	for _, v := range vs {
		h[hist.Bin(v)]++
		sum += v
	}
	var d Distribution
	d.Set(h, uint64(len(vs)), sum, 500, 1<<40)
	if d.Count != 4 || d.Sum != 1<<40+2_000_600 || d.Mean != (1<<40+2_000_600)/4 || d.Min != 500 || d.Max != 1<<40 {
		t.Errorf("exact fields %+v", d)
	}
	want := []HistBin{{Lower: hist.Lower(hist.Bin(500)), Upper: hist.Upper(hist.Bin(500)), Count: 1},
		{Lower: hist.Lower(hist.Bin(1_000_000)), Upper: hist.Upper(hist.Bin(1_000_000)), Count: 2},
		{Lower: 1 << hist.MaxExp, Count: 1}}
	if len(d.Histogram) != len(want) {
		t.Fatalf("bins %+v, want %+v", d.Histogram, want)
	}
	for i := range want {
		if d.Histogram[i] != want[i] {
			t.Errorf("bin %d: %+v, want %+v", i, d.Histogram[i], want[i])
		}
	}
	if d.P99 != 1<<40 || d.P50 < 999_424 || d.P50 > 1_015_808 {
		t.Errorf("quantiles p50 %d p99 %d", d.P50, d.P99)
	}
	d.Set(make([]uint32, hist.Bins), 0, 0, 0, 0)
	if d.Count != 0 || d.Sum != 0 || d.Max != 0 || d.P99 != 0 || len(d.Histogram) != 0 {
		t.Errorf("after an empty Set: %+v", d)
	}
}
