package bench

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

const bpfStatsSysctl = "/proc/sys/kernel/bpf_stats_enabled"

// enableStats turns on the kernel's per-program run time accounting
// (run_time_ns, run_cnt). It prefers BPF_ENABLE_STATS, whose file
// descriptor keeps the stats on only as long as it is open (so even a
// killed process cannot leave them on), and falls back to the
// kernel.bpf_stats_enabled sysctl, whose previous value restore puts
// back. restore must be called exactly once.
func enableStats() (restore func() error, method string, err error) {
	c, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err == nil {
		return c.Close, "BPF_ENABLE_STATS (file descriptor)", nil
	}
	prev, rerr := os.ReadFile(bpfStatsSysctl)
	if rerr != nil {
		return nil, "", fmt.Errorf("enable BPF run time stats: %w; and cannot read %s: %v", err, bpfStatsSysctl, rerr)
	}
	old := strings.TrimSpace(string(prev))
	if old == "1" {
		// Already on (someone else's choice): leave it as found.
		return func() error { return nil }, "kernel.bpf_stats_enabled (was already 1)", nil
	}
	if werr := os.WriteFile(bpfStatsSysctl, []byte("1"), 0o644); werr != nil {
		return nil, "", fmt.Errorf("enable BPF run time stats: %w; sysctl: %v", err, werr)
	}
	return func() error {
		if err := os.WriteFile(bpfStatsSysctl, []byte(old), 0o644); err != nil {
			return fmt.Errorf("restore kernel.bpf_stats_enabled=%s: %w", old, err)
		}
		return nil
	}, "kernel.bpf_stats_enabled (restored to " + old + " afterwards)", nil
}

// progStats is one reading of a program's accounting.
type progStats struct {
	RunTimeNs uint64
	RunCnt    uint64
	Misses    uint64 // recursion misses (program not run)
}

func readStats(p *ebpf.Program) (progStats, error) {
	if p == nil {
		return progStats{}, errors.New("no program")
	}
	s, err := p.Stats()
	if err != nil {
		return progStats{}, err
	}
	return progStats{RunTimeNs: uint64(s.Runtime.Nanoseconds()), RunCnt: s.RunCount, Misses: s.RecursionMisses}, nil
}

// nsPerRun is the mean run time between two readings; NaN when the
// program did not run in between.
func nsPerRun(a, b progStats) float64 {
	if b.RunCnt <= a.RunCnt || b.RunTimeNs < a.RunTimeNs {
		return nan()
	}
	return float64(b.RunTimeNs-a.RunTimeNs) / float64(b.RunCnt-a.RunCnt)
}
