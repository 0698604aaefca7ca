// Package testutil holds what rttscope's tests and the benchmark rig
// (internal/bench) share: skipping unless root, failing without the
// tools scripts/setup.sh installs, building a command of this
// module into a directory of its own, and a log buffer several goroutines
// may write to.
//
// It does not import the testing package: the bench is part of the rttscope
// binary, which should not link it.
package testutil

import (
	"os"
	"os/exec"
)

// TB is the part of testing.TB that RequireRoot uses.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
}

// RequireRoot skips the test, with the reason, unless it runs as root:
// loading BPF programs, BPF_PROG_TEST_RUN, network namespaces and raw
// sockets all need it. CI runs the tests as root, so there it never skips.
func RequireRoot(tb TB) {
	tb.Helper()
	if uid := os.Geteuid(); uid != 0 {
		tb.Skipf("skipping: needs root (BPF programs, network namespaces, raw sockets) and runs as uid %d; run the tests with sudo", uid)
	}
}

// FatalTB is the part of testing.TB that RequireTools uses.
type FatalTB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// RequireTools fails the test unless every tool is in $PATH. They are
// the programs scripts/setup.sh installs (tcpdump, tshark, dig, ...):
// a test that needs them must not pass silently where they are missing.
func RequireTools(tb FatalTB, tools ...string) {
	tb.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Fatalf("%s not installed (scripts/setup.sh installs it): %v", tool, err)
		}
	}
}
