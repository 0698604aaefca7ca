package monitor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/testutil"
)

// binPath is the rttscope binary built by TestMain (empty when not root:
// the tests that need it skip then).
var binPath string

// TestMain removes labs left behind by killed test binaries, builds the
// rttscope binary once for the subprocess tests, and tears down the shared
// lab at the end.
func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Geteuid() == 0 {
		if removed, err := lab.CleanupStale(); len(removed) > 0 || err != nil {
			fmt.Fprintf(os.Stderr, "removed stale lab namespaces %v (%v)\n", removed, err)
		}
		bin, cleanup, err := testutil.Build(testutil.RttscopeCmd)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		binPath = bin
	}
	code := m.Run()
	closeSharedLab()
	return code
}

// collector is a format.EventWriter that keeps every event.
type collector struct {
	mu    sync.Mutex
	rtts  []events.RTT
	flows []events.FlowEvent
	stats []events.Stats
	// closed counts Close calls; Run must not close its output.
	closed int
}

func (c *collector) WriteRTT(e *events.RTT) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rtts = append(c.rtts, *e)
	return nil
}

func (c *collector) WriteFlow(e *events.FlowEvent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flows = append(c.flows, *e)
	return nil
}

func (c *collector) WriteStats(s *events.Stats) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats = append(c.stats, *s)
	return nil
}

func (c *collector) Flush() error { return nil }

func (c *collector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed++
	return nil
}

// RTTs returns a copy of the samples so far that satisfy keep (nil: all).
func (c *collector) RTTs(keep func(*events.RTT) bool) []events.RTT {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []events.RTT
	for i := range c.rtts {
		if keep == nil || keep(&c.rtts[i]) {
			out = append(out, c.rtts[i])
		}
	}
	return out
}

func (c *collector) lastStats() (events.Stats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stats) == 0 {
		return events.Stats{}, false
	}
	return c.stats[len(c.stats)-1], true
}

// running is a monitor.Run in a goroutine.
type running struct {
	out    *collector
	log    *testutil.Buffer
	cancel context.CancelFunc
	done   chan error
	result error
	ended  bool
}

// startMonitor runs Run with opts (Output and Log are set here) and returns
// once every hook is in place. The run is stopped at the end of the test
// if the test did not stop it.
func startMonitor(t *testing.T, opts Options) *running {
	t.Helper()
	r := &running{out: &collector{}, log: &testutil.Buffer{}, done: make(chan error, 1)}
	opts.Output = r.out
	opts.Log = r.log
	if opts.CleanupInterval == 0 {
		opts.CleanupInterval = time.Second
	}
	attached := make(chan struct{})
	opts.OnAttached = func() { close(attached) }
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- Run(ctx, opts) }()
	t.Cleanup(func() { _ = r.stop(t) })
	select {
	case <-attached:
	case err := <-r.done:
		r.ended, r.result = true, err
		t.Fatalf("monitor ended before attaching: %v\nlog:\n%s", err, r.log)
	case <-time.After(20 * time.Second):
		t.Fatalf("monitor did not attach within 20s\nlog:\n%s", r.log)
	}
	return r
}

// stop cancels the run and returns its error (idempotent).
func (r *running) stop(t *testing.T) error {
	t.Helper()
	if r.ended {
		return r.result
	}
	r.cancel()
	select {
	case r.result = <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("monitor did not stop within 10s of cancel\nlog:\n%s", r.log)
	}
	r.ended = true
	return r.result
}

// wait waits for the run to end by itself.
func (r *running) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	if r.ended {
		return r.result
	}
	select {
	case r.result = <-r.done:
		r.ended = true
		return r.result
	case <-time.After(d):
		t.Fatalf("monitor still running after %v\nlog:\n%s", d, r.log)
		return nil
	}
}

// bpfFds counts this process's open BPF objects by kind ("bpf-link",
// "bpf-prog", "bpf-map"). Links live only as long as their fd (rttscope
// pins nothing), so zero links means nothing of ours is attached anymore.
func bpfFds(t *testing.T) map[string]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue
		}
		// The kernel names them "bpf-prog", "bpf-map" and "bpf_link".
		if kind, ok := strings.CutPrefix(target, "anon_inode:"); ok && strings.HasPrefix(kind, "bpf") {
			n[strings.ReplaceAll(kind, "_", "-")]++
		}
	}
	return n
}

// checkNoBPFFds fails unless the process holds no BPF link, program or map.
func checkNoBPFFds(t *testing.T) {
	t.Helper()
	if n := bpfFds(t); n["bpf-link"]+n["bpf-prog"]+n["bpf-map"] > 0 {
		t.Errorf("BPF objects still open after Run returned: %v", n)
	}
}
