package bpfprof

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A perf that fails at once is seen to have stopped (the profile then ends
// with its message instead of sampling nothing for its whole duration),
// and stop reports that it wrote nothing.
func TestPerfRecordFailingAtOnce(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "perf")
	script := "#!/bin/sh\necho 'Error: perf_event_paranoid setting is 4' >&2\nexit 255\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := startPerfRecord(fake, filepath.Join(dir, "perf.data"), 99)
	if err != nil {
		t.Fatal(err)
	}
	// Waits for the exit, bounded so that a broken exited() fails the
	// test instead of hanging it.
	var gone bool
	var why string
	for deadline := time.Now().Add(20 * time.Second); !gone && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		gone, why = r.exited()
	}
	if !gone || !strings.Contains(why, "perf_event_paranoid") {
		t.Fatalf("exited() = %v, %q", gone, why)
	}
	if err := r.stop(); err == nil || !strings.Contains(err.Error(), "wrote no samples") {
		t.Errorf("stop: %v", err)
	}
}
