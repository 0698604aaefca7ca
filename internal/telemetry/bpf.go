package telemetry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

const bpfStatsSysctl = "/proc/sys/kernel/bpf_stats_enabled"

// EnableBPFStats turns on the kernel's run time accounting of BPF programs
// (run_cnt, run_time_ns) with BPF_ENABLE_STATS (Linux 5.8+, CAP_SYS_ADMIN).
// The accounting stays on while the returned file descriptor is open, so
// closing it (or the process dying) restores the previous state; it does
// not touch the kernel.bpf_stats_enabled sysctl.
//
// Accounting costs every BPF program on the host two clock reads per run,
// about 20-80 ns per run depending on the clock source.
func EnableBPFStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return nil, fmt.Errorf("enable BPF run time statistics (needs Linux 5.8+ and CAP_SYS_ADMIN): %w", err)
	}
	return c, nil
}

// EnableBPFStatsOrSysctl turns the accounting on for a measurement that
// must have it: with EnableBPFStats, or where that is refused, with the
// kernel.bpf_stats_enabled sysctl, which restore puts back as it was (left
// alone when it was already 1: someone else's choice). The sysctl, unlike
// the file descriptor, stays on if this process dies before restore. method
// says which way was taken. restore must be called exactly once.
func EnableBPFStatsOrSysctl() (restore func() error, method string, err error) {
	c, err := EnableBPFStats()
	if err == nil {
		return c.Close, "BPF_ENABLE_STATS (file descriptor)", nil
	}
	prev, rerr := os.ReadFile(bpfStatsSysctl)
	if rerr != nil {
		return nil, "", fmt.Errorf("%w; and cannot read %s: %w", err, bpfStatsSysctl, rerr)
	}
	old := string(bytes.TrimSpace(prev))
	if old == "1" {
		return func() error { return nil }, "kernel.bpf_stats_enabled (was already 1)", nil
	}
	if werr := os.WriteFile(bpfStatsSysctl, []byte("1"), 0o644); werr != nil {
		return nil, "", fmt.Errorf("%w; sysctl: %w", err, werr)
	}
	return func() error {
		if err := os.WriteFile(bpfStatsSysctl, []byte(old), 0o644); err != nil {
			return fmt.Errorf("restore kernel.bpf_stats_enabled=%s: %w", old, err)
		}
		return nil
	}, "kernel.bpf_stats_enabled (restored to " + old + " afterwards)", nil
}

// SysctlEnabled reports the sysctl kernel.bpf_stats_enabled. It does not
// see accounting turned on with BPF_ENABLE_STATS (by this or any other
// process): the kernel offers no way to ask about those.
func SysctlEnabled() (bool, error) {
	b, err := os.ReadFile(bpfStatsSysctl)
	if err != nil {
		return false, err
	}
	return parseSysctlBool(b)
}

func parseSysctlBool(b []byte) (bool, error) {
	switch string(bytes.TrimSpace(b)) {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("%s: unexpected content %q", bpfStatsSysctl, b)
}

// Program is an attached BPF program and its name in the stats record.
type Program struct {
	Name string
	Prog *ebpf.Program
}

// Program names in the stats record.
const (
	TCEgress   = "tc_egress"
	TCIngress  = "tc_ingress"
	XDPIngress = "xdp_ingress"
)

// ReadProgram is one reading of p's accounting: run count, run time and
// recursion misses (runs skipped). The first two move only while run time
// accounting is on.
func ReadProgram(p *ebpf.Program) (ebpf.ProgramStats, error) {
	if p == nil {
		return ebpf.ProgramStats{}, errors.New("program not loaded")
	}
	s, err := p.Stats()
	if err != nil {
		return ebpf.ProgramStats{}, err
	}
	return *s, nil
}
