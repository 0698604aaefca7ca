// Package testutil holds what rttscope's tests (and the benchmark rig in
// internal/bench) share: skipping unless root, building a command of this
// module into a directory of its own, and a log buffer several goroutines
// may write to.
package testutil

import (
	"os"
	"testing"
)

// RequireRoot skips the test, with the reason, unless it runs as root:
// loading BPF programs, BPF_PROG_TEST_RUN, network namespaces and raw
// sockets all need it. CI runs the tests as root, so there it never skips.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if uid := os.Geteuid(); uid != 0 {
		tb.Skipf("skipping: needs root (BPF programs, network namespaces, raw sockets) and runs as uid %d; run the tests with sudo", uid)
	}
}
