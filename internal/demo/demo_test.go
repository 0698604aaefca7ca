package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/sampling"
	"github.com/rttscope/rttscope/internal/testutil"
)

func TestMain(m *testing.M) {
	if os.Geteuid() == 0 {
		if removed, err := lab.CleanupStale(); len(removed) > 0 || err != nil {
			fmt.Fprintf(os.Stderr, "removed stale lab namespaces %v (%v)\n", removed, err)
		}
	}
	os.Exit(m.Run())
}

func checkGone(t *testing.T, names []string) {
	t.Helper()
	if len(names) == 0 {
		t.Error("result lists no lab namespaces")
	}
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join("/run/netns", n)); err == nil {
			t.Errorf("namespace %s still exists after Run", n)
		}
	}
}

// TestDemoMatchesPaths runs the demo briefly on its default paths (10 ms
// and 40 ms round trip) and checks that the summary's medians match the
// configured RTTs: a correctness bound (±3 ms), not a performance one.
func TestDemoMatchesPaths(t *testing.T) {
	testutil.RequireRoot(t)
	var out, progress testutil.Buffer
	w, err := format.New("standard", &out, format.Options{StatsTo: &progress})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Config{Duration: 4 * time.Second, Prefix: "rtt-demot", Output: w, Progress: &progress})
	if cerr := w.Close(); cerr != nil {
		t.Errorf("close output: %v", cerr)
	}
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("demo took %v", time.Since(start).Round(time.Millisecond))
	checkGone(t, res.Namespaces)
	if res.Interrupted {
		t.Error("Interrupted set on a complete run")
	}
	var summary bytes.Buffer
	if err := res.WriteSummary(&summary); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", summary.String())

	if len(res.Paths) != 2 {
		t.Fatalf("%d paths, want the 2 defaults", len(res.Paths))
	}
	const tol = 3 * time.Millisecond
	for i, p := range res.Paths {
		want := DefaultPaths()[i].DelayToServer + DefaultPaths()[i].DelayToClient
		if p.Configured != want {
			t.Errorf("path %d: configured %v, want %v", i, p.Configured, want)
		}
		if p.PingSent == 0 || p.PingReplies < p.PingSent*8/10 {
			t.Errorf("path %d: %d of %d pings answered", i, p.PingReplies, p.PingSent)
		}
		if p.ICMPSamples < p.PingReplies*8/10 {
			t.Errorf("path %d: %d ICMP samples for %d ping replies", i, p.ICMPSamples, p.PingReplies)
		}
		if p.TCPSamples < 5 {
			t.Errorf("path %d: only %d TCP samples", i, p.TCPSamples)
		}
		if p.BulkBytes == 0 {
			t.Errorf("path %d: bulk transfer acknowledged nothing", i)
		}
		for _, m := range []struct {
			what string
			got  time.Duration
		}{{"ping", p.PingMedian}, {"ICMP", p.ICMPMedian}, {"TCP", p.TCPMedian}} {
			if d := m.got - want; d < -tol || d > tol {
				t.Errorf("path %d: %s median %v, want %v ± %v", i, m.what, m.got, want, tol)
			}
		}
		if p.ClientLegSamples > 0 && p.ClientLegMedian > 2*time.Millisecond {
			t.Errorf("path %d: client leg median %v, want well under the path delays", i, p.ClientLegMedian)
		}
	}

	// The live output carries the samples in the standard format, and the
	// summary names the paths' configured RTTs.
	live := out.String()
	for _, want := range []string{" ms ICMP 10.20.0.2:", " ms ICMPv6 fd00:20:1::2:", " ms TCP 10.20.1.2:5201+10.10.0.2:"} {
		if !strings.Contains(live, want) {
			t.Errorf("live output lacks %q", want)
		}
	}
	for _, want := range []string{"10.00 ms", "40.00 ms", "mb-srv0", "mb-srv1"} {
		if !strings.Contains(summary.String(), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	for _, want := range []string{"building lab", "pinging", "TCP bulk", "watching mb-srv0", "tearing the lab down"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
}

// TestDemoCancel: cancelling the context (Ctrl-C) in the middle of the
// traffic phase ends the demo promptly, with the figures so far and the lab
// torn down.
func TestDemoCancel(t *testing.T) {
	testutil.RequireRoot(t)
	var progress testutil.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(progress.String(), "pinging") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	res, err := Run(ctx, Config{Duration: 30 * time.Second, Prefix: "rtt-demot", Progress: &progress})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.Interrupted {
		t.Error("Interrupted not set")
	}
	if took > 10*time.Second {
		t.Errorf("Run took %v after cancel at ~1 s, want it to stop promptly", took)
	}
	checkGone(t, res.Namespaces)
	if res.Paths[0].ICMPSamples == 0 {
		t.Error("no ICMP samples before the cancel")
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}
	if err := c.fill(); err != nil {
		t.Fatal(err)
	}
	def := sampling.Default().BPF
	if len(c.Paths) != 2 || c.Duration != DefaultDuration || c.Sampling.BPF.RateLimit != def.RateLimit || c.BulkRate != DefaultBulkRate {
		t.Errorf("defaults: %+v", c)
	}
	if !c.Sampling.BPF.TrackTCP || !c.Sampling.BPF.TrackICMP {
		t.Errorf("the demo tracks %+v, want TCP and ICMP", c.Sampling.BPF)
	}
	// A rate limit of 0 means what it means everywhere: every identifier.
	c = Config{Sampling: sampling.Default()}
	c.Sampling.BPF.RateLimit = 0
	if err := c.fill(); err != nil {
		t.Fatal(err)
	}
	if c.Sampling.BPF.RateLimit != 0 {
		t.Errorf("rate limit 0 became %v", c.Sampling.BPF.RateLimit)
	}
	c = Config{Duration: time.Millisecond}
	if err := c.fill(); err == nil {
		t.Error("1 ms duration accepted")
	}
}
