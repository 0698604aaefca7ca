package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CollectMachine describes this machine and the checkout in the current
// directory. Nothing here fails: what cannot be found reads "unknown".
func CollectMachine(start time.Time) Machine {
	m := Machine{
		CPUModel:        "unknown",
		NProc:           runtime.NumCPU(),
		Kernel:          "unknown",
		Arch:            runtime.GOARCH,
		GoVersion:       runtime.Version(),
		Commit:          "unknown",
		Date:            start.UTC().Format(time.RFC3339),
		LoadAvgStart:    readTrim("/proc/loadavg"),
		BPFStatsEnabled: readTrim("/proc/sys/kernel/bpf_stats_enabled"),
		BPFJIT:          readTrim("/proc/sys/net/core/bpf_jit_enable"),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = ParseCPUModel(string(b))
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if c, err := git("rev-parse", "--short", "HEAD"); err == nil && c != "" {
		m.Commit = c
		// Untracked files do not change what was built.
		if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil {
			m.Dirty = st != ""
		}
	}
	return m
}

func git(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return "", err
	}
	return strings.TrimSpace(out.String()), nil
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// cpuTimes is the aggregate "cpu" line of /proc/stat, in clock ticks.
type cpuTimes struct {
	Total, Idle, Steal uint64
}

// parseProcStat reads the aggregate cpu line of a /proc/stat text: user
// nice system idle iowait irq softirq steal (guest time is already part
// of user and nice). Idle counts idle and iowait.
func parseProcStat(text string) (cpuTimes, bool) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var v [8]uint64
		for i := 0; i < len(v) && i+1 < len(f); i++ {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return cpuTimes{}, false
			}
			v[i] = n
		}
		var t cpuTimes
		for _, n := range v {
			t.Total += n
		}
		t.Idle = v[3] + v[4]
		t.Steal = v[7]
		return t, true
	}
	return cpuTimes{}, false
}

func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	t, _ := parseProcStat(string(b))
	return t
}

// cpuShares returns the busy and stolen shares (0..1) of all CPUs between
// two readings; NaN when nothing elapsed.
func cpuShares(a, b cpuTimes) (busy, steal float64) {
	if b.Total <= a.Total {
		return nan(), nan()
	}
	d := float64(b.Total - a.Total)
	idle := float64(b.Idle-a.Idle) / d
	return 1 - idle, float64(b.Steal-a.Steal) / d
}
