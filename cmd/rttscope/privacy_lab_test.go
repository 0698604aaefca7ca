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
	var errBuf testutil.Buffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, cmd, &errBuf, "watching "+l.MiddleboxClientIf)
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

// pdmWithTraffic runs the rttscope binary as `pdm` on the lab's client
// and server (inserting) and on the middlebox (--passive) for 4 seconds,
// each with the arguments given for it; once all three are attached the
// client pings the server over IPv6 (10 pings in 1 s). It returns per node what was written to its -w
// file and to stderr, together.
func pdmWithTraffic(t *testing.T, l *lab.Lab, cliArgs, srvArgs, mbArgs []string) (outs [3]string) {
	t.Helper()
	for _, n := range []*lab.Node{l.Client, l.Servers[0]} {
		if err := n.SetSysctl("net.ipv6.max_dst_opts_number", "8"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	runs := []struct {
		node   *lab.Node
		ifname string
		args   []string
	}{{l.Client, lab.ClientIf, cliArgs}, {l.Servers[0], lab.ServerIf, srvArgs}, {l.Middlebox, l.MiddleboxClientIf, append([]string{"--passive"}, mbArgs...)}}
	cmds := make([]*exec.Cmd, len(runs))
	errBufs := make([]*testutil.Buffer, len(runs))
	for i, r := range runs {
		cmds[i] = exec.CommandContext(ctx, cliBin, append([]string{"pdm", "--netns", r.node.Name, "-i", r.ifname,
			"--duration", "4s", "-w", filepath.Join(dir, r.node.Name)}, r.args...)...)
		errBufs[i] = new(testutil.Buffer)
		cmds[i].Stderr = errBufs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	// Each says "rttscope pdm: IFNAME: [modes]" once it is attached.
	for i, r := range runs {
		for !strings.Contains(errBufs[i].String(), ": "+r.ifname+": ") {
			if ctx.Err() != nil {
				t.Fatalf("rttscope pdm on %s not attached: %s", r.node.Name, errBufs[i].String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := traffic.Ping(ctx, l.Client, l.ServerAddr6[0], 10, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("rttscope pdm %v: %v\n%s", runs[i].args, err, errBufs[i].String())
		}
		b, err := os.ReadFile(filepath.Join(dir, runs[i].node.Name))
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = string(b) + errBufs[i].String()
	}
	return outs
}

// TestPDMAnonymizedLab: live rttscope pdm on both ends and --passive on
// the middlebox, per option and per interval, shows no address of the
// lab in any notation, in the output files or on stderr, while a run
// without anonymization shows them.
func TestPDMAnonymizedLab(t *testing.T) {
	l := needCLILab(t)
	addrs := labAddrs(l)
	plain := pdmWithTraffic(t, l, []string{"-F", "jsonl"}, []string{"-F", "jsonl"}, []string{"-F", "jsonl"})
	for i, out := range plain {
		if len(testutil.Leaks(out, addrs...)) == 0 || !strings.Contains(out, `"dtlr"`) {
			t.Fatalf("the plain run (%d) shows no PDM record with a lab address, so the scan below would prove nothing:\n%s", i, out)
		}
	}
	k32, k16 := writeKey(t, 32), writeKey(t, 16)
	for _, c := range [][3][]string{
		{{"--anonymize", "pfx", "--anon-key-file", k32, "-F", "jsonl"},
			{"--anonymize", "det", "--anon-key-file", k16, "-F", "standard", "--anonymize-ports"},
			{"--anonymize", "cryptopan", "--anon-key-file", k32, "-F", "json", "--relative-time"}},
		{{"--anonymize", "drop", "-F", "jsonl", "--pdm-report", "interval", "--interval", "1s"},
			{"--anonymize", "trunc:8,32", "-F", "standard", "--pdm-report", "interval", "--interval", "1s"},
			{"--anonymize", "pfx", "--anon-key-file", k32, "-F", "jsonl", "--minimal", "--pdm-report", "interval", "--interval", "1s"}},
	} {
		outs := pdmWithTraffic(t, l, c[0], c[1], c[2])
		for i, out := range outs {
			if leaks := testutil.Leaks(out, addrs...); len(leaks) > 0 {
				t.Errorf("rttscope pdm %s: %v in\n%s", strings.Join(c[i], " "), leaks, out)
			}
			if !strings.Contains(out, "dtlr") {
				t.Errorf("rttscope pdm %s: no PDM record:\n%s", strings.Join(c[i], " "), out)
			}
		}
	}
}
