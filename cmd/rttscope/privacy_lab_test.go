package main

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// labAddrs are every address of the lab's nodes.
func labAddrs(l *lab.Lab) []netip.Addr {
	a := []netip.Addr{l.ClientAddr4, l.ClientAddr6, l.MiddleboxAddr4, l.MiddleboxAddr6}
	a = append(a, l.ServerAddr4...)
	a = append(a, l.ServerAddr6...)
	a = append(a, l.MiddleboxServerAddr4...)
	return append(a, l.MiddleboxServerAddr6...)
}

// monitorWithTraffic runs the rttscope binary as `monitor` on the lab's
// middlebox for a few seconds with args, while the client pings the
// server over IPv4 and IPv6 and opens TCP connections to it. It returns
// what was written to the -w file and to stderr.
func monitorWithTraffic(t *testing.T, l *lab.Lab, args ...string) (file, stderr string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, append([]string{"monitor", "--netns", l.Middlebox.Name, "-i", l.MiddleboxClientIf,
		"-T", "-C", "-r", "0", "--duration", "3s", "--stats-interval", "1s", "-w", out}, args...)...)
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // attach
	labTraffic(ctx, t, l)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("rttscope monitor %v: %v\n%s", args, err, errBuf.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), errBuf.String()
}

// labTraffic runs, through the lab's middlebox, three TCP flows from the
// client to the first server while the client pings it five times over
// IPv4 and five over IPv6, and returns when all is done.
func labTraffic(ctx context.Context, t *testing.T, l *lab.Lab) {
	t.Helper()
	sink, err := traffic.NewManySink(l.Servers[0], l.ServerAddr4[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	flows, err := traffic.StartManyFlows(ctx, l.Client, sink.Addr(), traffic.ManyFlowsOptions{Flows: 3, WriteSize: 100, RateBytesPerSec: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, dst := range []netip.Addr{l.ServerAddr4[0], l.ServerAddr6[0]} {
		if _, err := traffic.Ping(ctx, l.Client, dst, 5, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := flows.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMonitorAnonymizedLab: a live run with each mode, in each format and
// in aggregated mode, shows no address of the lab in any notation, in the
// output file or on stderr, while a run without anonymization shows them.
func TestMonitorAnonymizedLab(t *testing.T) {
	l := needCLILab(t)
	addrs := labAddrs(l)
	plain, _ := monitorWithTraffic(t, l, "-F", "jsonl")
	if len(testutil.Leaks(plain, addrs...)) == 0 || !strings.Contains(plain, `"rtt":`) {
		t.Fatalf("the plain run shows no sample with a lab address, so the scan below would prove nothing:\n%s", plain)
	}
	// Fixed keys, as in TestReplayAnonymized.
	k32, k16 := writeKey(t, 32), writeKey(t, 16)
	for _, c := range [][]string{
		{"--anonymize", "pfx", "--anon-key-file", k32, "-F", "json", "--flow-summary"},
		{"--anonymize", "cryptopan", "--anon-key-file", k32, "-F", "jsonl", "--anonymize-ports", "--relative-time"},
		{"--anonymize", "det", "--anon-key-file", k16, "-F", "standard", "--flow-summary"},
		{"--anonymize", "trunc:8,32", "-F", "ppviz"},
		{"--anonymize", "drop", "-F", "jsonl", "--flow-summary"},
		{"--anonymize", "pfx", "--anon-key-file", k32, "-F", "jsonl", "--aggregate", "1s", "--aggregate-subnets-v4", "24", "--aggregate-subnets-v6", "64"},
		{"--anonymize", "drop", "-F", "standard", "--aggregate", "1s", "--minimal"},
	} {
		file, stderr := monitorWithTraffic(t, l, c...)
		if leaks := testutil.Leaks(file+stderr, addrs...); len(leaks) > 0 {
			t.Errorf("rttscope monitor %s: %v in\n%s\n%s", strings.Join(c, " "), leaks, file, stderr)
		}
		if !strings.Contains(file, "ms") && !strings.Contains(file, `"rtt`) && !strings.Contains(file, " 0.0") {
			t.Errorf("rttscope monitor %s: no sample in the output:\n%s", strings.Join(c, " "), file)
		}
	}
}
