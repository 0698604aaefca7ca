package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
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
		Command:         commandLine(),
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

// commitText is the commit, "-dirty" appended when the tree had changes.
func (m Machine) commitText() string {
	if m.Dirty {
		return m.Commit + "-dirty"
	}
	return m.Commit
}
