package bench

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelConfig reads /proc/config.gz (CONFIG_X -> "y", "m", a value, or
// "n" for "is not set"); nil when the kernel does not expose it.
func kernelConfig() map[string]string {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return nil
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil
	}
	cfg := map[string]string{}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		line := sc.Text()
		if k, ok := strings.CutPrefix(line, "# "); ok {
			if name, isNot := strings.CutSuffix(k, " is not set"); isNot {
				cfg[name] = "n"
			}
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			cfg[k] = v
		}
	}
	return cfg
}

// lockdownMode is the active kernel lockdown mode ("none", "integrity",
// "confidentiality"), or "" when unknown.
func lockdownMode(cfg map[string]string) string {
	if b, err := os.ReadFile("/sys/kernel/security/lockdown"); err == nil {
		// e.g. "none [integrity] confidentiality"
		s := string(b)
		if i := strings.IndexByte(s, '['); i >= 0 {
			if j := strings.IndexByte(s[i:], ']'); j > 0 {
				return s[i+1 : i+j]
			}
		}
	}
	switch {
	case cfg["CONFIG_LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY"] == "y":
		return "confidentiality"
	case cfg["CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY"] == "y":
		return "integrity"
	}
	return ""
}

const tracefsMagic = 0x74726163

// ensureTracefs mounts tracefs on /sys/kernel/tracing when nothing is
// mounted there (perf-event tracepoints and kprobes find their event IDs
// in it); the returned function unmounts what it mounted, nothing else.
func ensureTracefs() (unmount func() error, err error) {
	const dir = "/sys/kernel/tracing"
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil && st.Type == tracefsMagic {
		return func() error { return nil }, nil
	}
	if err := unix.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
		return nil, fmt.Errorf("mount tracefs on %s: %w", dir, err)
	}
	return func() error { return unix.Unmount(dir, 0) }, nil
}
