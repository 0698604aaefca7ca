package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/testutil"
)

// cliBin is the rttscope binary TestMain builds for the command-line tests.
var cliBin string

func TestMain(m *testing.M) {
	os.Exit(cliTestMain(m))
}

func cliTestMain(m *testing.M) int {
	if os.Geteuid() == 0 {
		if removed, err := lab.CleanupStale(); len(removed) > 0 || err != nil {
			fmt.Fprintf(os.Stderr, "removed stale lab namespaces %v (%v)\n", removed, err)
		}
	}
	bin, cleanup, err := testutil.Build(testutil.RttscopeCmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	cliBin = bin
	code := m.Run()
	if cliLab != nil {
		if err := cliLab.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "close lab: %v\n", err)
			code = 1
		}
	}
	return code
}

// cliResult is how a run of the binary ended.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cliRun runs the binary; with asNobody it runs as uid/gid 65534.
func cliRun(t *testing.T, asNobody bool, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, args...)
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if asNobody && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("rttscope %v did not finish within 30s; stderr:\n%s", args, stderr.String())
	}
	return cliResult{stdout.String(), stderr.String(), code}
}

// wantOneLine checks that the run failed with code and exactly one line on
// stderr, "rttscope: ...", that contains every word of want.
func (r cliResult) wantOneLine(t *testing.T, args []string, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("rttscope %s: exit code %d, want %d (stderr %q)", strings.Join(args, " "), r.code, code, r.stderr)
	}
	msg := strings.TrimSuffix(r.stderr, "\n")
	if msg == "" || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "rttscope: ") {
		t.Errorf("rttscope %s: stderr is not one \"rttscope: ...\" line:\n%s", strings.Join(args, " "), r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("rttscope %s: message %q does not mention %q", strings.Join(args, " "), msg, w)
		}
	}
}

// TestCLIHelp: --help of the root and every subcommand exits 0 and prints
// the usage on stdout.
func TestCLIHelp(t *testing.T) {
	runs := [][]string{{"--help"}}
	for _, add := range subcommands {
		runs = append(runs, []string{add().Name(), "--help"})
	}
	for _, args := range runs {
		r := cliRun(t, false, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || r.stderr != "" {
			t.Errorf("rttscope %s: exit %d, stdout %d bytes, stderr %q", strings.Join(args, " "), r.code, len(r.stdout), r.stderr)
		}
	}
}

// TestCLIUsageErrors: bad flags and arguments exit 2 with one line that
// says what is wrong. None of these needs privileges or touches anything.
func TestCLIUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"monitor", "-i", "lo", "--format", "xml"}, []string{"--format", "xml", "standard"}},
		{[]string{"monitor", "-i", "lo", "--rate-limit", "abc"}, []string{"--rate-limit", "abc"}},
		{[]string{"monitor", "-i", "lo", "--rtt-type", "foo"}, []string{"--rtt-type", "foo", "min"}},
		{[]string{"monitor", "-i", "lo", "--ingress-hook", "bar"}, []string{"--ingress-hook", "bar", "tc or xdp"}},
		{[]string{"monitor", "-i", "lo", "--xdp-mode", "turbo"}, []string{"--xdp-mode", "turbo"}},
		{[]string{"monitor", "-i", "lo", "--tc-mode", "new"}, []string{"--tc-mode", "new"}},
		{[]string{"monitor", "-i", "lo", "--bogus"}, []string{"unknown flag", "--bogus"}},
		{[]string{"monitor", "-i", "lo", "-r"}, []string{"needs an argument", "'r'"}},
		{[]string{"monitor"}, []string{"-i IFNAME"}},
		{[]string{"monitor", "-i", "lo", "extra"}, []string{"extra"}},
		{[]string{"nosuchcommand"}, []string{"nosuchcommand"}},
		{[]string{"lab", "--path", "fast"}, []string{"--path", "fast"}},
		{[]string{"demo", "--path", "20ms@"}, []string{"--path", "20ms@"}},
		{[]string{"demo", "--format", "xml"}, []string{"--format", "xml"}},
		{[]string{"demo", "--rate-limit", "abc"}, []string{"--rate-limit", "abc"}},
		{[]string{"demo", "--duration", "10ms"}, []string{"--duration"}},
		{[]string{"demo", "--duration", "ten"}, []string{"duration", "ten"}},
		{[]string{"demo", "now"}, []string{"now"}},
		// Typed values (internal/flagval), refused as they are parsed.
		{[]string{"monitor", "-i", "lo", "-r", "NaN"}, []string{`invalid --rate-limit "NaN": want milliseconds`}},
		{[]string{"monitor", "-i", "lo", "-t", "max"}, []string{`invalid --rtt-type "max": want min or smoothed`}},
		{[]string{"monitor", "-i", "lo", "-I", "xdp", "-x", "turbo"}, []string{`invalid --xdp-mode "turbo": want auto, native or generic`}},
		{[]string{"monitor", "-i", "lo", "--tc-mode", "tc"}, []string{`invalid --tc-mode "tc": want auto, tcx or clsact`}},
		{[]string{"monitor", "-i", "lo", "-F", "csv"}, []string{`invalid --format "csv": want one of standard, ppviz, json, jsonl`}},
		{[]string{"monitor", "-i", "lo", "--tcp=maybe"}, []string{"--tcp", "maybe"}},
		{[]string{"monitor", "-i", "lo", "--aggregate", "soon"}, []string{"--aggregate", "soon"}},
		{[]string{"replay", "--local-net", "10.0.0.0/33", "x.pcap"}, []string{`invalid --local-net "10.0.0.0/33": want a CIDR prefix`}},
		{[]string{"replay", "--local-mac", "02:00", "x.pcap"}, []string{`invalid --local-mac "02:00": want a 6-byte MAC address`}},
		{[]string{"replay", "-F", "xml", "x.pcap"}, []string{`invalid --format "xml"`}},
		{[]string{"demo", "-r", "-1"}, []string{`invalid --rate-limit "-1"`}},
		{[]string{"demo", "-C"}, []string{"unknown shorthand flag", "'C'"}},
		// What depends on several flags, refused once parsing is done.
		{[]string{"monitor", "-i", "lo", "--aggregate", "-1s"}, []string{`invalid --aggregate "-1s": want seconds`}},
		{[]string{"monitor", "-i", "lo", "--flow-summary-interval", "1s"}, []string{"--flow-summary-interval needs --flow-summary"}},
		{[]string{"monitor", "-i", "lo", "--ringbuf-size", "5000"}, []string{"ring buffer", "power of two", "5000"}},
		{[]string{"monitor", "-i", "lo", "-c", "-1"}, []string{`invalid --cleanup-interval "-1": want seconds`}},
		{[]string{"monitor", "-i", "lo", "--aggregate-timeout", "x"}, []string{`invalid --aggregate-timeout "x": want seconds`}},
		{[]string{"replay", "--flow-summary-interval", "1s", "x.pcap"}, []string{"--flow-summary-interval needs --flow-summary"}},
		// Privacy flags (docs/privacy.md).
		{[]string{"replay", "--anonymize", "rot13", "x.pcap"}, []string{`--anonymize: unknown mode "rot13"`, "pfx", "cryptopan"}},
		{[]string{"monitor", "-i", "lo", "--anonymize", "trunc:33,64"}, []string{"--anonymize", "33"}},
		{[]string{"replay", "--anonymize", "drop", "--anon-key-rotate", "1h", "x.pcap"}, []string{"--anon-key-rotate", "no key to rotate"}},
		{[]string{"replay", "--anonymize", "trunc:24,48", "--anon-key-file", "/k", "x.pcap"}, []string{"--anon-key-file", "takes no key"}},
		{[]string{"monitor", "-i", "lo", "--time-resolution", "-1s"}, []string{"--time-resolution must be >= 0"}},
	} {
		r := cliRun(t, false, tc.args...)
		r.wantOneLine(t, tc.args, 2, tc.want...)
	}
}

// TestCLINotRoot: without privileges every command that needs them says so
// in one line and exits 1.
func TestCLINotRoot(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"monitor", "-i", "lo"}, []string{"root", "CAP_BPF"}},
		{[]string{"monitor", "-i", "lo", "-C", "-I", "xdp"}, []string{"root", "CAP_BPF"}},
		{[]string{"lab"}, []string{"root"}},
		{[]string{"demo"}, []string{"root", "sudo"}},
		{[]string{"bench"}, []string{"root", "sudo"}},
	} {
		r := cliRun(t, true, tc.args...)
		r.wantOneLine(t, tc.args, 1, tc.want...)
	}
}

// TestCLINoBenchSink: the load benchmark's TCP sink is a program of its
// own (internal/cmd/bench-sink), not a command of the binary users
// install.
func TestCLINoBenchSink(t *testing.T) {
	args := []string{"bench-sink", "--listen", "127.0.0.1:0"}
	r := cliRun(t, false, args...)
	r.wantOneLine(t, args, 2, "unknown command", "bench-sink")
}

// TestBinaryLinksNoTestCode: neither the testing package nor a helper
// program's package is part of the binary users install.
func TestBinaryLinksNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", testutil.RttscopeCmd).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.Contains(pkg, "/internal/cmd/") {
			t.Errorf("rttscope links %s", pkg)
		}
	}
}

// The lab the privileged command-line tests run in (one path, no delay).
var (
	cliLabOnce sync.Once
	cliLab     *lab.Lab
	cliLabErr  error
)

func needCLILab(t *testing.T) *lab.Lab {
	t.Helper()
	testutil.RequireRoot(t)
	cliLabOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cliLab, cliLabErr = lab.New(ctx, lab.Config{Prefix: "rtt-cli", Paths: []lab.PathSpec{{}}})
	})
	if cliLabErr != nil {
		t.Fatal(cliLabErr)
	}
	return cliLab
}

// attachedTo lists the BPF programs on ifname in node's namespace (TCX
// ingress/egress, XDP) and the filters on its clsact ingress/egress (what
// the legacy attach leaves if the monitor dies without detaching).
func attachedTo(t *testing.T, node *lab.Node, ifname string) []string {
	t.Helper()
	var got []string
	err := node.Do(func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
			if err != nil && !kernel.Has(kernel.TCX) {
				continue // before 6.6 the query answers EINVAL: nothing attached that way
			}
			if err != nil {
				return err
			}
			for _, p := range res.Programs {
				got = append(got, fmt.Sprintf("%v prog %d", at, p.ID))
			}
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			got = append(got, fmt.Sprintf("xdp prog %d", x.ProgId))
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, err := netlink.FilterList(l, parent)
			if err != nil {
				return err
			}
			for _, f := range fs {
				got = append(got, fmt.Sprintf("clsact %x %s filter prio %d", parent, f.Type(), f.Attrs().Priority))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inspect %s in %s: %v", ifname, node.Name, err)
	}
	return got
}

// TestCLIUnknownInterface: an interface that does not exist fails before
// anything is attached, in one line naming it.
func TestCLIUnknownInterface(t *testing.T) {
	l := needCLILab(t)
	mb := l.Middlebox.Name
	for _, args := range [][]string{
		{"monitor", "--netns", mb, "-i", "nosuch0"},
		{"monitor", "--netns", mb, "-i", l.MiddleboxClientIf, "-i", "nosuch0"},
		{"monitor", "--netns", mb, "-i", l.MiddleboxClientIf, "-i", "nosuch0", "-I", "xdp", "--tc-mode", "clsact"},
	} {
		r := cliRun(t, false, args...)
		r.wantOneLine(t, args, 1, "nosuch0")
		if got := attachedTo(t, l.Middlebox, l.MiddleboxClientIf); len(got) > 0 {
			t.Errorf("rttscope %s left %v on %s", strings.Join(args, " "), got, l.MiddleboxClientIf)
		}
	}
	args := []string{"monitor", "--netns", "rtt-cli-no-such-ns", "-i", "eth0"}
	cliRun(t, false, args...).wantOneLine(t, args, 1, "rtt-cli-no-such-ns")
}

// TestCLINativeXDPUnsupported: native XDP on an interface whose driver lacks
// it (lo) fails in one line that says what to use instead, and leaves
// nothing attached (the TCX egress hook attached first is undone).
func TestCLINativeXDPUnsupported(t *testing.T) {
	l := needCLILab(t)
	args := []string{"monitor", "--netns", l.Client.Name, "-i", "lo", "-I", "xdp", "-x", "native"}
	r := cliRun(t, false, args...)
	r.wantOneLine(t, args, 1, "lo", "native XDP", "--xdp-mode generic", "--ingress-hook tc")
	if got := attachedTo(t, l.Client, "lo"); len(got) > 0 {
		t.Errorf("left %v on lo", got)
	}
}
