package bench

import (
	"os"
	"runtime"
	"testing"
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

// This process's own threads: read exactly, and the time a busy loop on
// a locked thread spends shows up in the sum.
func TestReadProcCPUSelf(t *testing.T) {
	a := readProcCPU(os.Getpid())
	if !a.exact || !a.tids[os.Getpid()] {
		t.Fatalf("readProcCPU(self) = exact %v, tids %v; want exact with the main thread", a.exact, a.tids)
	}
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		x := 0
		for i := 0; i < 50_000_000; i++ {
			x += i
		}
		_ = x
		close(done)
	}()
	<-done
	b := readProcCPU(os.Getpid())
	s, exact := cpuSecondsBetween(a, b)
	if !exact || s <= 0 {
		t.Errorf("after a busy loop: %v s, exact %v; want more than 0, exact", s, exact)
	}
	if gone := readProcCPU(1 << 30); gone.ns != 0 || gone.ticks != 0 || len(gone.tids) != 0 {
		t.Errorf("a pid that does not exist read as %+v", gone)
	}
}
