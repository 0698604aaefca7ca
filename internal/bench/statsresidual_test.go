package bench

import (
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/telemetry"
	"github.com/rttscope/rttscope/internal/testutil"
)

// The residual is what the empty program's own counters say about runs
// inside a test run, so with the accounting on it is positive and no more
// than the test run's own time per run (its loop, and the clock reads
// outside run_time_ns, come on top).
func TestStatsResidual(t *testing.T) {
	testutil.RequireRoot(t)
	r, err := newStatsResidual()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	stats, err := telemetry.EnableBPFStats()
	if err != nil {
		t.Skipf("bpf_stats cannot be switched on here: %v", err)
	}
	defer func() { _ = stats.Close() }()
	residual, err := r.measure()
	if err != nil {
		t.Fatal(err)
	}
	least := time.Duration(1 << 62)
	for range residualCalls {
		_, d, err := r.empty.EmptyTc.Benchmark(r.frame, residualRepeat, nil)
		if err != nil {
			t.Fatal(err)
		}
		least = min(least, d)
	}
	if !(residual > 0) || residual > float64(least.Nanoseconds()) {
		t.Fatalf("residual %v ns per run, want > 0 and at most the test run's %v per run", residual, least)
	}
	// Noise only adds, so a later reading never exceeds an earlier one.
	again, err := r.measure()
	if err != nil {
		t.Fatal(err)
	}
	if again > residual {
		t.Errorf("second reading %v ns above the first %v", again, residual)
	}
	t.Logf("bpf_stats residual: %.1f ns per run (test run with the accounting: %v per run)", residual, least)
}
