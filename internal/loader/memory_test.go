package loader

import (
	"testing"

	"github.com/cilium/ebpf/features"

	"github.com/rttscope/rttscope/internal/testutil"
)

// The formula matches the kernel's own figure within 1% per large map, and
// the defaults hold 100,000 flows in at most 108 MiB on this machine (with
// aggregation, the biggest default configuration; 76 MiB before the flow
// table, whose buckets of 4 slots need two slots per flow where the hash
// map needed one entry: loader/flowtable.go; 64 MiB before the
// ePPing-compatible counters: 64 bytes more per flow, ePPing's 4 ms bins
// per prefix, docs/epping.md; and the sources' 32 bytes per flow and
// per-source counts per prefix, docs/sources.md; and the ACK filter's last
// two TSvals and newest echo per direction, 32 bytes per flow,
// docs/performance.md; 102 MiB before aggregated mode's fold, whose
// counts take 16 bytes more per direction, 6.3 MiB, bpf/agg_fold.h).
func TestMemoryFormula(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := DefaultConfig()
	cfg.Aggregate = true
	objs, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	ms, err := objs.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	// Before 6.4 (no map_mem_usage) fdinfo's memlock is a page-rounded
	// product of entries and key+value size, not the memory used.
	exact := kernelAtLeast(t, 6, 4)
	if !exact {
		t.Log("kernel before 6.4: its memlock figure is an estimate of its own; only the totals are checked")
	}
	var kern uint64
	for _, m := range ms {
		t.Logf("%-16s %7d entries  formula %10d  kernel %10d", m.Name, m.Entries, m.Estimate, m.Kernel)
		kern += m.Kernel
		if m.Kernel == 0 {
			t.Skip("kernel reports no map memory (fdinfo memlock)")
		}
		if exact && m.Estimate > 1<<20 {
			d := float64(m.Estimate) - float64(m.Kernel)
			if d < 0 {
				d = -d
			}
			if d > float64(m.Kernel)/100 {
				t.Errorf("%s: formula %d, kernel %d", m.Name, m.Estimate, m.Kernel)
			}
		}
	}
	t.Log(MemorySummary(ms))
	if cfg.FlowMapSize < 100000 {
		t.Errorf("default flow map holds %d flows", cfg.FlowMapSize)
	}
	if kern > 108<<20 {
		t.Errorf("default maps take %d bytes, more than 108 MiB", kern)
	}
}

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(t *testing.T, major, minor uint32) bool {
	t.Helper()
	v, err := features.LinuxVersionCode()
	if err != nil {
		t.Fatalf("kernel version: %v", err)
	}
	return v>>16 > major || (v>>16 == major && (v>>8)&0xff >= minor)
}
