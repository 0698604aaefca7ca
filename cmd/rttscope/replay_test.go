package main

// Tests of `rttscope replay`: the command is run in-process (the same
// cobra command main builds) on captures generated with exact timestamps,
// and its json output is parsed back and compared with hand-computed
// events to the nanosecond. TestReplayBinary builds the binary once to
// check exit codes and messages as a user sees them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/replay/replaytest"
	"github.com/rttscope/rttscope/internal/testutil"
)

// runReplay runs `rttscope replay ARGS` in-process, as main does, writing
// the output to a file; it returns the output and the command's error.
func runReplay(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	b, _, err := runReplayStderr(t, args...)
	return b, err
}

// runReplayStderr is runReplay that also returns what the command wrote
// to stderr.
func runReplayStderr(t *testing.T, args ...string) ([]byte, string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	root := &cobra.Command{Use: "rttscope", SilenceUsage: true, SilenceErrors: true}
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newReplayCmd())
	root.SetArgs(append([]string{"replay", "-w", out}, args...))
	var stderr bytes.Buffer
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&stderr)
	err := root.ExecuteContext(context.Background())
	b, rerr := os.ReadFile(out)
	if rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		t.Fatal(rerr)
	}
	return b, stderr.String(), err
}

// TestReplayScenario replays the scenario of package replaytest stored in
// every container, link type and direction source, and checks every event
// (RTTs to the nanosecond, flow openings and closings, timeouts by capture
// time, match_on_egress).
func TestReplayScenario(t *testing.T) {
	testutil.RequireRoot(t)
	want := replaytest.Expected()
	replaytest.Sort(want)
	dir := t.TempDir()
	for i, v := range replaytest.Variants() {
		// Sequential and parallel replays must agree: alternate.
		workers := []string{"1", "2", "3"}[i%3]
		t.Run(v.Name+"/workers="+workers, func(t *testing.T) {
			path := replaytest.Write(t, dir, v)
			args := append(append([]string{"--workers", workers}, replaytest.Args...), v.Args...)
			out, err := runReplay(t, append(args, path)...)
			if err != nil {
				t.Fatalf("replay %s: %v", v.File, err)
			}
			got, others, err := replaytest.ParseJSON(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if others != 0 {
				t.Errorf("%d non-event records without --stats", others)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Time < got[i-1].Time {
					t.Errorf("event %d (%v) is earlier than the one before (%v): output not in capture order", i, got[i], got[i-1])
				}
			}
			replaytest.Sort(got)
			if d := replaytest.Diff(got, want); d != "" {
				t.Errorf("events differ:\n%s", d)
			}
		})
	}
}

// TestReplayFormats: every output format of the monitor works; jsonl holds
// the same events as json; standard and ppviz have one line per event of
// their kind; --stats adds a final record timed at the last packet.
func TestReplayFormats(t *testing.T) {
	testutil.RequireRoot(t)
	v := replaytest.Variants()[0]
	path := replaytest.Write(t, t.TempDir(), v)
	base := append(append([]string{}, replaytest.Args[:len(replaytest.Args)-2]...), v.Args...)
	want := replaytest.Expected()
	replaytest.Sort(want)
	var nRTT int
	for _, e := range want {
		if e.FlowEvent == "" {
			nRTT++
		}
	}

	out, err := runReplay(t, append(base, "-F", "jsonl", "--stats", path)...)
	if err != nil {
		t.Fatal(err)
	}
	got, others, err := replaytest.ParseJSONL(out)
	if err != nil {
		t.Fatal(err)
	}
	replaytest.Sort(got)
	if d := replaytest.Diff(got, want); d != "" {
		t.Errorf("jsonl events differ:\n%s", d)
	}
	if others != 1 || !bytes.Contains(out, fmt.Appendf(nil, `{"timestamp":%d,"type":"stats","packets":%d,`, replaytest.T0+45012300000, len(replaytest.Steps()))) {
		t.Errorf("want one stats record at the last packet's time with every packet counted, got:\n%s", out)
	}

	out, err = runReplay(t, append(base, "-F", "ppviz", path)...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != nRTT {
		t.Errorf("ppviz: %d lines, want %d (one per RTT):\n%s", len(lines), nRTT, out)
	}
	// First RTT: 20 ms at T0 + 20 ms, flow 192.0.2.10:443+10.0.0.1:40000.
	if want := "1700000000.143456000 0.020000000 0.020000000 192.0.2.10:443+10.0.0.1:40000"; lines[0] != want {
		t.Errorf("ppviz first line %q, want %q", lines[0], want)
	}

	out, err = runReplay(t, append(base, "-F", "standard", path)...)
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(want) {
		t.Errorf("standard: %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	re := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{9} 20 ms 20 ms TCP 192\.0\.2\.10:443\+10\.0\.0\.1:40000$`)
	if len(lines) < 2 || !re.MatchString(lines[1]) {
		t.Errorf("standard: second line %q does not match %v", lines[1], re)
	}
}

// TestReplayDirectionOverride: without the capture's direction, the rule
// that decides changes match_on_egress only, never the RTTs: declaring the
// servers' side local flips every sample.
func TestReplayDirectionOverride(t *testing.T) {
	testutil.RequireRoot(t)
	v := replaytest.Variants()[0]
	path := replaytest.Write(t, t.TempDir(), v)
	out, err := runReplay(t, append(append([]string{}, replaytest.Args...), "--local-net", "192.0.2.0/24", "--local-net", "2001:db8:2::10", path)...)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := replaytest.ParseJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	want := replaytest.Expected()
	for i := range want {
		if want[i].FlowEvent == "" {
			want[i].Egress = !want[i].Egress
		}
	}
	replaytest.Sort(got)
	replaytest.Sort(want)
	if d := replaytest.Diff(got, want); d != "" {
		t.Errorf("events differ:\n%s", d)
	}
}

// TestReplayInterfaceFilter: --interface-id keeps one interface of a
// two-interface pcapng (here the second holds a copy of every packet, as a
// capture on "any" of a router would).
func TestReplayInterfaceFilter(t *testing.T) {
	testutil.RequireRoot(t)
	steps := replaytest.Steps()
	fr, err := replaytest.Frames(steps, capture.LinkTypeEthernet, true)
	if err != nil {
		t.Fatal(err)
	}
	var both []capture.TimedFrame
	for _, f := range fr {
		both = append(both, f)
		f.Interface = 1
		f.Timestamp += 1000 // the copy on the other interface, 1 µs later
		both = append(both, f)
	}
	path := filepath.Join(t.TempDir(), "two.pcapng")
	if err := capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet, capture.LinkTypeEthernet}, both); err != nil {
		t.Fatal(err)
	}
	want := replaytest.Expected()
	replaytest.Sort(want)
	out, err := runReplay(t, append(append([]string{}, replaytest.Args...), "--interface-id", "0", path)...)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := replaytest.ParseJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	replaytest.Sort(got)
	if d := replaytest.Diff(got, want); d != "" {
		t.Errorf("--interface-id 0: events differ:\n%s", d)
	}

	// An interface the file does not have: no events, and a warning
	// that says why.
	out, stderr, err := runReplayStderr(t, append(append([]string{}, replaytest.Args...), "--interface-id", "2,5", path)...)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err = replaytest.ParseJSON(out); err != nil || len(got) != 0 {
		t.Errorf("--interface-id 2,5: %d events (%v), want none", len(got), err)
	}
	if want := "no packet of --interface-id 2,5 among its"; !strings.Contains(stderr, want) {
		t.Errorf("--interface-id 2,5: stderr %q, want %q", stderr, want)
	}
}

// TestReplayWarnsWithoutExpiry: a kernel that leaves replay without timed
// expiry (forced here with RTTSCOPE_DISABLE) is named on stderr, since the
// samples can then differ from a live run's; with expiry, no warning.
func TestReplayWarnsWithoutExpiry(t *testing.T) {
	testutil.RequireRoot(t)
	fr, err := replaytest.Frames(replaytest.Steps(), capture.LinkTypeEthernet, true)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "steps.pcapng")
	if err := capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet}, fr); err != nil {
		t.Fatal(err)
	}
	const warning = "no timed expiry on this kernel"
	if kernel.Check(kernel.MapElemIter).OK() || kernel.Check(kernel.ForEachMapElem).OK() {
		_, stderr, err := runReplayStderr(t, append(append([]string{}, replaytest.Args...), path)...)
		if err != nil || strings.Contains(stderr, warning) {
			t.Errorf("with expiry: err %v, stderr %q", err, stderr)
		}
	}
	t.Setenv(kernel.DisableEnv, "map_elem_iter,for_each_map_elem")
	_, stderr, err := runReplayStderr(t, append(append([]string{}, replaytest.Args...), path)...)
	if err != nil || !strings.Contains(stderr, warning) {
		t.Errorf("without expiry: err %v, stderr %q, want %q", err, stderr, warning)
	}
}

// TestReplayEmpty: a capture without packets gives an empty, valid
// document in every format.
func TestReplayEmpty(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	for _, f := range []struct{ name, format, want string }{
		{"e.pcap", "json", "[\n]\n"},
		{"e.pcapng.gz", "json", "[\n]\n"},
		{"e.pcap", "jsonl", ""},
		{"e.pcap", "standard", ""},
		{"e.pcap", "ppviz", ""},
	} {
		path := filepath.Join(dir, f.name)
		var err error
		if strings.Contains(f.name, "pcapng") {
			err = capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet}, nil)
		} else {
			err = capture.WritePcap(path, capture.LinkTypeEthernet, true, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := runReplay(t, "-F", f.format, path)
		if err != nil {
			t.Errorf("%s -F %s: %v", f.name, f.format, err)
			continue
		}
		if f.format == "json" {
			if got, _, err := replaytest.ParseJSON(out); err != nil || len(got) != 0 {
				t.Errorf("%s -F json: %q is not an empty array (%v)", f.name, out, err)
			}
		} else if string(out) != f.want {
			t.Errorf("%s -F %s: output %q, want %q", f.name, f.format, out, f.want)
		}
	}
}

// TestReplayUsageErrors: bad flags are usage errors (exit code 2) and are
// reported before anything is read or loaded.
func TestReplayUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"a.pcap", "b.pcap"},
		{"--local-net", "10.0.0.0/33", "x.pcap"},
		{"--local-net", "nonsense", "x.pcap"},
		{"--local-mac", "02:00:00:00:00", "x.pcap"},
		{"--interface-id", "-1", "x.pcap"},
		{"--cleanup-interval", "0", "x.pcap"},
		{"-F", "xml", "x.pcap"},
		{"-r", "soon", "x.pcap"},
		{"--include-local", "x.pcap"},
	} {
		_, err := runReplay(t, args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("replay %q: error %v (exit code %d), want a usage error (exit code 2)", args, err, exitCode(err))
		}
	}
}

// TestReplayBinary builds rttscope and checks what a user sees for bad
// input: one line naming the file (and packet), after the output of the
// packets before it, exit code 1.
func TestReplayBinary(t *testing.T) {
	testutil.RequireRoot(t)
	bin := cliBin // built by TestMain, runnable as nobody
	// A directory others can read: the last check runs the binary as nobody.
	dir, err := os.MkdirTemp("", "rttscope-replay-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}

	// A good file: exit 0, nothing on stderr (not a terminal: no progress).
	good := replaytest.Write(t, dir, replaytest.Variants()[0])
	stdout, stderr, code := run(append(append(append([]string{"replay"}, replaytest.Args...), replaytest.Variants()[0].Args...), good)...)
	if code != 0 || stderr != "" {
		t.Errorf("good file: exit code %d, stderr %q", code, stderr)
	}
	if got, _, err := replaytest.ParseJSON([]byte(stdout)); err != nil || len(got) != len(replaytest.Expected()) {
		t.Errorf("good file: %d events (%v), want %d", len(got), err, len(replaytest.Expected()))
	}

	// Truncated in the middle of packet 7's record: the events of packets
	// 0-6 are written, the json array is closed, then the error.
	fr, err := replaytest.Frames(replaytest.Steps(), capture.LinkTypeEthernet, false)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := capture.EncodePcap(&buf, capture.PcapOptions{LinkType: capture.LinkTypeEthernet, Nanosecond: true}, fr); err != nil {
		t.Fatal(err)
	}
	off := 24
	for i := range 7 {
		off += 16 + len(fr[i].Data)
	}
	trunc := filepath.Join(dir, "trunc.pcap")
	if err := os.WriteFile(trunc, buf.Bytes()[:off+20], 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = run(append(append([]string{"replay"}, replaytest.Args...), trunc)...)
	got, _, err := replaytest.ParseJSON([]byte(stdout))
	if err != nil {
		t.Errorf("truncated file: output is not a closed json array: %v\n%s", err, stdout)
	}
	var wantN int
	for _, e := range replaytest.Expected() {
		if e.Time < replaytest.T0+60_000_000 { // packet 7 is at 60 ms
			wantN++
		}
	}
	if len(got) != wantN {
		t.Errorf("truncated file: %d events, want the %d of packets 0-6", len(got), wantN)
	}
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, trunc+": packet 7: truncated record") {
		t.Errorf("truncated file: exit code %d, stderr %q; want 1 and one line naming %s and packet 7", code, stderr, trunc)
	}

	// Corrupt: a record length beyond any snap length.
	corrupt := filepath.Join(dir, "corrupt.pcap")
	b := bytes.Clone(buf.Bytes())
	rec3 := 24
	for i := range 3 {
		rec3 += 16 + len(fr[i].Data)
	}
	copy(b[rec3+8:], []byte{0xff, 0xff, 0xff, 0x7f})
	if err := os.WriteFile(corrupt, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = run("replay", "-F", "json", corrupt)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, corrupt+": packet 3: corrupt record") {
		t.Errorf("corrupt file: exit code %d, stderr %q; want 1 and one line naming %s and packet 3", code, stderr, corrupt)
	}

	// Unsupported link type (LINKTYPE_IEEE802_11 = 105), not a capture,
	// missing file: one line, exit code 1, nothing on stdout.
	wifi := filepath.Join(dir, "wifi.pcap")
	if err := capture.WritePcap(wifi, 105, true, []capture.TimedFrame{{Timestamp: replaytest.T0, Data: make([]byte, 40)}}); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "text.pcap")
	if err := os.WriteFile(text, []byte("this is not a capture file at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, msg string }{
		{wifi, "unsupported link type"},
		{text, "not a pcap or pcapng file"},
		{filepath.Join(dir, "missing.pcap"), "no such file or directory"},
	} {
		stdout, stderr, code = run("replay", "-F", "json", c.path)
		if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.path) || !strings.Contains(stderr, c.msg) {
			t.Errorf("%s: exit code %d, stderr %q; want 1 and one line naming the file and %q", filepath.Base(c.path), code, stderr, c.msg)
		}
		if filepath.Base(c.path) != "wifi.pcap" && stdout != "" {
			t.Errorf("%s: stdout %q, want nothing", filepath.Base(c.path), stdout)
		}
	}

	// Usage errors exit with 2.
	if _, _, code = run("replay"); code != 2 {
		t.Errorf("no file: exit code %d, want 2", code)
	}

	// Not root: a clear message, exit 1 (run as nobody when possible).
	if _, err := exec.LookPath("setpriv"); err == nil {
		if err := os.Chmod(good, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "replay", good)
		var e bytes.Buffer
		cmd.Stderr = &e
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(e.String(), "needs root") {
			t.Errorf("as nobody: %v, stderr %q; want exit code 1 and a message that root is needed", err, e.String())
		}
	} else {
		t.Log("setpriv not found: not-root message not checked")
	}
}

// TestReplayShortFrames: records too short for a link-layer header are
// skipped, not fed (BPF_PROG_TEST_RUN refuses them).
func TestReplayShortFrames(t *testing.T) {
	testutil.RequireRoot(t)
	// A raw-IP file with an empty record and a 1-byte record between
	// two echo packets: both are skipped, the sample survives.
	req := pktcraft.Packet{NoEthernet: true, Src: replaytest.Client4, Dst: replaytest.Server4b, ICMPEcho: &pktcraft.ICMPEcho{ID: 9, Seq: 1}}.MustBytes()
	rep := pktcraft.Packet{NoEthernet: true, Src: replaytest.Server4b, Dst: replaytest.Client4, ICMPEcho: &pktcraft.ICMPEcho{Reply: true, ID: 9, Seq: 1}}.MustBytes()
	path := filepath.Join(t.TempDir(), "short.pcap")
	err := capture.WritePcap(path, capture.LinkTypeRaw, true, []capture.TimedFrame{
		{Timestamp: replaytest.T0, Data: req},
		{Timestamp: replaytest.T0 + 1, Data: []byte{}},
		{Timestamp: replaytest.T0 + 2, Data: []byte{0x45}},
		{Timestamp: replaytest.T0 + 7_654_321, Data: rep},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := runReplay(t, "-C", "-F", "json", path)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := replaytest.ParseJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].RTT != 7_654_321 {
		t.Errorf("got %v, want an opening and one 7.654321 ms sample", got)
	}
}
