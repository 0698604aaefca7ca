package bench

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseSchedstat(t *testing.T) {
	if ns, ok := parseSchedstat("861938 124923 3\n"); !ok || ns != 861938 {
		t.Errorf("parseSchedstat = %d, %v; want 861938, true", ns, ok)
	}
	for _, bad := range []string{"", "x 1 2"} {
		if _, ok := parseSchedstat(bad); ok {
			t.Errorf("parseSchedstat(%q) accepted", bad)
		}
	}
}

// The exact figure is used only when no thread of the first reading has
// gone; otherwise the ticks, which keep an exited thread's time.
func TestCPUSecondsBetween(t *testing.T) {
	a := procCPU{ns: 1_000_000_000, ticks: 100, tids: map[int]bool{1: true, 2: true}, exact: true}
	b := procCPU{ns: 1_012_345_678, ticks: 101, tids: map[int]bool{1: true, 2: true, 3: true}, exact: true}
	if s, exact := cpuSecondsBetween(a, b); !exact || s != 0.012345678 {
		t.Errorf("threads kept: %v s, exact %v; want 0.012345678 s, exact", s, exact)
	}
	gone := b
	gone.tids = map[int]bool{1: true, 3: true}
	if s, exact := cpuSecondsBetween(a, gone); exact || s != 0.01 {
		t.Errorf("a thread gone: %v s, exact %v; want 0.01 s from ticks", s, exact)
	}
	partial := b
	partial.exact = false
	if s, exact := cpuSecondsBetween(a, partial); exact || s != 0.01 {
		t.Errorf("unread schedstat: %v s, exact %v; want 0.01 s from ticks", s, exact)
	}
	if s, exact := cpuSecondsBetween(b, a); exact || s != 0 {
		t.Errorf("backwards: %v s, exact %v; want 0, not exact", s, exact)
	}
}

// This process's own threads: the thread of a busy loop is read, and its
// run time is in the sum. Checked against that thread's own schedstat, so
// that other threads of the test binary starting or exiting meanwhile
// cannot make it fail.
func TestReadProcCPUSelf(t *testing.T) {
	pid := os.Getpid()
	type result struct {
		tid             int
		before, after   uint64
		sum             procCPU
		okBefore, okAft bool
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r := result{tid: unix.Gettid()}
		path := fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, r.tid)
		read := func() (uint64, bool) {
			b, err := os.ReadFile(path)
			if err != nil {
				return 0, false
			}
			return parseSchedstat(string(b))
		}
		r.before, r.okBefore = read()
		x := 0
		for i := 0; i < 50_000_000; i++ {
			x += i
		}
		runtime.KeepAlive(x)
		r.after, r.okAft = read()
		r.sum = readProcCPU(pid)
		done <- r
	}()
	r := <-done
	if !r.okBefore || !r.okAft || r.after <= r.before {
		t.Fatalf("the busy thread's schedstat: %d -> %d (read %v, %v); want growth", r.before, r.after, r.okBefore, r.okAft)
	}
	if !r.sum.tids[r.tid] || !r.sum.tids[pid] {
		t.Errorf("readProcCPU(self) threads %v: want the main thread %d and the busy one %d", r.sum.tids, pid, r.tid)
	}
	if r.sum.ns < r.after {
		t.Errorf("readProcCPU(self) = %d ns; less than the busy thread's own %d", r.sum.ns, r.after)
	}
	if gone := readProcCPU(1 << 30); gone.ns != 0 || gone.ticks != 0 || len(gone.tids) != 0 {
		t.Errorf("a pid that does not exist read as %+v", gone)
	}
}
