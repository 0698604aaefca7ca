// Package testutil holds what rttscope's tests and the benchmark rig
// (internal/bench) share: skipping unless root, building a command of this
// module into a directory of its own, and a log buffer several goroutines
// may write to.
//
// It does not import the testing package: the bench is part of the rttscope
// binary, which should not link it.
package testutil

import "os"

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
