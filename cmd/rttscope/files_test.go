package main

// Tests of the file destination of --write (docs/files.md): rotation,
// compression and Parquet end to end through `rttscope replay`, Parquet
// read back by pyarrow, and a kill -9 of a run writing Parquet.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/parquetout"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/replay/replaytest"
	"github.com/rttscope/rttscope/internal/testutil"
)

// runReplayArgs runs `rttscope replay ARGS` in-process, as main does.
func runReplayArgs(t *testing.T, args ...string) error {
	t.Helper()
	root := &cobra.Command{Use: "rttscope", SilenceUsage: true, SilenceErrors: true}
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newReplayCmd())
	root.SetArgs(append([]string{"replay"}, args...))
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	return root.ExecuteContext(context.Background())
}

// completedFiles lists the files of dir with final names, in name order,
// and fails on temporary files left behind.
func completedFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".partial") {
			t.Errorf("temporary file %s left after the run", e.Name())
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	slices.Sort(out)
	return out
}

// readAllFiles concatenates the decompressed contents of files.
func readAllFiles(t *testing.T, files []string) []byte {
	t.Helper()
	var all []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader
		switch {
		case strings.HasSuffix(p, ".zst"):
			d, err := zstd.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			r = d
			defer d.Close()
		case strings.HasSuffix(p, ".gz"):
			if r, err = gzip.NewReader(bytes.NewReader(b)); err != nil {
				t.Fatal(err)
			}
		default:
			all = append(all, b...)
			continue
		}
		b, err = io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		all = append(all, b...)
	}
	return all
}

// TestFilesUsageErrors checks the refusals of bad file-flag combinations.
func TestFilesUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-F", "parquet", "x.pcap"}, "-F parquet writes files only: add --write FILE"},
		{[]string{"--rotate-size", "1M", "x.pcap"}, "need --write FILE"},
		{[]string{"-F", "parquet", "-w", filepath.Join(dir, "a.parquet.zst"), "x.pcap"}, "drop --compress and the .zst/.gz suffix"},
		{[]string{"-F", "parquet", "--compress", "gzip", "-w", filepath.Join(dir, "a.parquet"), "x.pcap"}, "drop --compress"},
		{[]string{"--compress", "lz4", "-w", filepath.Join(dir, "a"), "x.pcap"}, `invalid --compress "lz4"`},
		{[]string{"--rotate-size", "1X", "-w", filepath.Join(dir, "a"), "x.pcap"}, `invalid --rotate-size "1X": want a size in bytes`},
		{[]string{"--keep", "-1", "-w", filepath.Join(dir, "a"), "x.pcap"}, "must not be negative"},
	} {
		err := runReplayArgs(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 2 {
			t.Errorf("replay %v: %v (exit %d), want a usage error with %q", tc.args, err, exitCode(err), tc.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused runs created files: %v", ents)
	}
}

// labFlows writes a capture of n TCP flows between distinct clients
// (10.1.0.0/16, the inside) and eight servers, each with a handshake,
// rounds of one data segment and its ACK, and a FIN each way; every
// flow has its own RTT (5 to 54 ms). It returns the path.
func labFlows(t testing.TB, dir string, n, rounds int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("lab-%dflows.pcap", n))
	if err := capture.WritePcap(path, capture.LinkTypeEthernet, true, labFrames(0, n, rounds)); err != nil {
		t.Fatal(err)
	}
	return path
}

// labFrames returns the frames of flows first..first+n-1 of labFlows,
// sorted by time.
func labFrames(first, n, rounds int) []capture.TimedFrame {
	const t0 = int64(1_700_000_000_000_000_000)
	const ms = int64(1_000_000)
	var frames []capture.TimedFrame
	add := func(at int64, p pktcraft.Packet) {
		frames = append(frames, capture.TimedFrame{Timestamp: at, Data: p.MustBytes()})
	}
	payload := make([]byte, 100)
	for i := first; i < first+n; i++ {
		cli := netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)})
		srv := netip.AddrFrom4([4]byte{192, 0, 2, byte(i%8 + 1)})
		sp, dp := uint16(30000+i), uint16(443)
		rtt := int64(5+i%50)*ms + int64(i%7)*1000
		start := t0 + int64(i)*ms
		c := func(at int64, tc pktcraft.TCP) {
			tc.SrcPort, tc.DstPort, tc.Window = sp, dp, 65000
			tc.TSval = uint32((at - t0) / ms)
			add(at, pktcraft.Packet{Src: cli, Dst: srv, TCP: &tc})
		}
		s := func(at int64, tc pktcraft.TCP) {
			tc.SrcPort, tc.DstPort, tc.Window = dp, sp, 65000
			tc.TSval = uint32((at-t0)/ms) + 7777
			add(at, pktcraft.Packet{Src: srv, Dst: cli, TCP: &tc})
		}
		at := start
		c(at, pktcraft.TCP{SYN: true, Seq: 0})
		s(at+rtt, pktcraft.TCP{SYN: true, ACK: true, Seq: 0, Ack: 1, TSecr: uint32((at - t0) / ms)})
		seq := uint32(1)
		for k := range rounds {
			at = start + rtt + 2*ms + int64(k)*20*ms
			c(at, pktcraft.TCP{ACK: true, Seq: seq, Ack: 1, TSecr: uint32((at-rtt-t0)/ms) + 7777, Payload: payload})
			seq += uint32(len(payload))
			s(at+rtt, pktcraft.TCP{ACK: true, Seq: 1, Ack: seq, TSecr: uint32((at - t0) / ms)})
		}
		at += rtt + 2*ms
		c(at, pktcraft.TCP{FIN: true, ACK: true, Seq: seq, Ack: 1})
		s(at+rtt, pktcraft.TCP{FIN: true, ACK: true, Seq: 1, Ack: seq + 1, TSecr: uint32((at - t0) / ms)})
	}
	slices.SortStableFunc(frames, func(a, b capture.TimedFrame) int { return int(a.Timestamp - b.Timestamp) })
	return frames
}

// labArgs are the replay flags for labFlows captures.
var labArgs = []string{"-r", "0", "--local-net", "10.1.0.0/16", "--stats"}

// statsEvents returns the rtt_events + flow_events of the last stats
// record in jsonl output, and the number of other records.
func statsEvents(t *testing.T, jsonl []byte) (events uint64, records int) {
	t.Helper()
	var found bool
	for _, line := range bytes.Split(bytes.TrimRight(jsonl, "\n"), []byte("\n")) {
		var rec struct {
			Type       string `json:"type"`
			RTTEvents  uint64 `json:"rtt_events"`
			FlowEvents uint64 `json:"flow_events"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("not a json line: %q: %v", line, err)
		}
		if rec.Type == "stats" {
			events, found = rec.RTTEvents+rec.FlowEvents, true
			continue
		}
		records++
	}
	if !found {
		t.Fatal("no stats record in the output")
	}
	return events, records
}

// TestReplayRotationLosesNothing replays a lab capture of 1,000 flows
// into jsonl files rotated every 64 KiB, with each compression: the
// records across all files equal the events the stats record counts.
func TestReplayRotationLosesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	pcap := labFlows(t, t.TempDir(), 1000, 20)
	for _, name := range []string{"rtt.jsonl", "rtt.jsonl.zst", "rtt.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"-F", "jsonl", "-w", filepath.Join(dir, name), "--rotate-size", "64K", "--keep", "0"}, labArgs...)
			if err := runReplayArgs(t, append(args, pcap)...); err != nil {
				t.Fatal(err)
			}
			files := completedFiles(t, dir)
			out := readAllFiles(t, files)
			n, recs := statsEvents(t, out)
			if n == 0 || uint64(recs) != n {
				t.Fatalf("%d records in %d files, the stats record counts %d events", recs, len(files), n)
			}
			if len(files) < 2 {
				t.Fatalf("%d bytes of output stayed in one file: no rotation at 64 KiB", len(out))
			}
			t.Logf("%d events in %d files", n, len(files))
		})
	}
}

// ensurePyarrow makes pyarrow importable, installing it from PyPI with pip
// if needed; it skips the test, with the reason, only when that fails.
func ensurePyarrow(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: install python3 (scripts/setup.sh does) to read Parquet back with pyarrow")
	}
	if exec.Command(py, "-c", "import pyarrow").Run() == nil {
		return py
	}
	out, err := exec.Command(py, "-m", "pip", "install", "-q", "pyarrow").CombinedOutput()
	if err != nil {
		out2, err2 := exec.Command(py, "-m", "pip", "install", "-q", "--break-system-packages", "pyarrow").CombinedOutput()
		if err2 != nil {
			t.Skipf("pip cannot install pyarrow (PyPI unreachable?): %v\n%s\n%s", err2, out, out2)
		}
	}
	return py
}

// pyRows prints the rows of the Parquet files given as arguments as one
// JSON object per line, as jsonl output has them: nulls left out, the
// timestamp as an integer of nanoseconds, a record column replaced by its
// JSON object.
const pyRows = `
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
for path in sys.argv[1:]:
    t = pq.read_table(path)
    t = t.set_column(t.schema.get_field_index("timestamp"), "timestamp", t.column("timestamp").cast(pa.int64()))
    for row in t.to_pylist():
        rec = row.pop("record")
        row.pop("record_type")
        if rec is not None:
            row = json.loads(rec)
        print(json.dumps({k: v for k, v in row.items() if v is not None}, sort_keys=True))
`

// normalizeJSONL re-encodes each line with sorted keys, without the
// process counters of stats records (CPU time and RSS differ between two
// runs).
func normalizeJSONL(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for _, line := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if m["type"] == "stats" {
			delete(m, "process")
		}
		e, _ := json.Marshal(m) // maps marshal with sorted keys
		out = append(out, string(e))
	}
	return out
}

// TestReplayParquetSameRowsAsJSONL replays the scenario of package
// replaytest (and a lab capture) to jsonl and to Parquet, reads the Parquet
// files back with pyarrow, and compares every row with the jsonl line.
func TestReplayParquetSameRowsAsJSONL(t *testing.T) {
	testutil.RequireRoot(t)
	py := ensurePyarrow(t)
	dir := t.TempDir()
	scenario := replaytest.Write(t, dir, replaytest.Variants()[0])
	lab := labFlows(t, dir, 200, 10)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"scenario", append(append(slices.Clone(replaytest.Args), replaytest.Variants()[0].Args...), "--stats", "--flow-summary", scenario)},
		{"scenario-anonymized", append(append(slices.Clone(replaytest.Args), replaytest.Variants()[0].Args...), "--anonymize", "drop", "--minimal", "--stats", scenario)},
		{"lab-200-flows-rotated", append(slices.Clone(labArgs), "--rotate-size", "32K", lab)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			jdir := filepath.Join(out, "jsonl")
			if err := os.Mkdir(jdir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := runReplayArgs(t, append(append([]string{}, tc.args...), "-F", "jsonl", "-w", filepath.Join(jdir, "rtt.jsonl"))...); err != nil {
				t.Fatal(err)
			}
			jb := readAllFiles(t, completedFiles(t, jdir))
			pdir := filepath.Join(out, "pq")
			if err := os.Mkdir(pdir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := runReplayArgs(t, append(append([]string{}, tc.args...), "-F", "parquet", "-w", filepath.Join(pdir, "rtt.parquet"))...); err != nil {
				t.Fatal(err)
			}
			files := completedFiles(t, pdir)
			cmd := exec.Command(py, append([]string{"-c", pyRows}, files...)...)
			cmd.Stderr = os.Stderr
			pb, err := cmd.Output()
			if err != nil {
				t.Fatalf("pyarrow could not read %v: %v", files, err)
			}
			want, got := normalizeJSONL(t, jb), normalizeJSONL(t, pb)
			if len(want) < 10 {
				t.Fatalf("only %d jsonl records", len(want))
			}
			// Replay with several workers may order records of one
			// capture time differently between runs: compare as sets of
			// lines with their multiplicity.
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				for i := 0; i < len(want) || i < len(got); i++ {
					var g, w string
					if i < len(got) {
						g = got[i]
					}
					if i < len(want) {
						w = want[i]
					}
					if g != w {
						t.Fatalf("%d rows from %d Parquet files, %d jsonl lines; first difference:\nparquet %s\njsonl   %s", len(got), len(files), len(want), g, w)
					}
				}
			}
			t.Logf("%d rows in %d Parquet files equal the jsonl output", len(got), len(files))
		})
	}
}

// TestKill9Parquet runs the rttscope binary writing Parquet with
// --flush-interval on a capture fed through a pipe, kills it with SIGKILL,
// and checks what a crash leaves: every file with a final name reads back
// whole, and together they hold every record of the packets fed before the
// last flush; only the records after it (in the temporary file) are lost.
func TestKill9Parquet(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	// Part A: flows 0-99, all closed by FIN; part B: flows 1000-1099, later.
	bufA, bufAB := twoPartCapture(t, 100)
	// What part A gives, replayed alone to jsonl.
	pa := filepath.Join(dir, "a.pcap")
	if err := os.WriteFile(pa, bufA.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	jdir := filepath.Join(dir, "jsonl")
	if err := os.Mkdir(jdir, 0o755); err != nil {
		t.Fatal(err)
	}
	// One worker: parallel replay holds packets back until it has enough.
	args := []string{"-r", "0", "--local-net", "10.1.0.0/16", "--workers", "1"}
	if err := runReplayArgs(t, append(slices.Clone(args), "-F", "jsonl", "-w", filepath.Join(jdir, "a.jsonl"), "--compress", "none", pa)...); err != nil {
		t.Fatal(err)
	}
	wantA := normalizeJSONL(t, readAllFiles(t, completedFiles(t, jdir)))

	pdir := filepath.Join(dir, "pq")
	if err := os.Mkdir(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd, stdin, stderr := startReplayPipe(t, append([]string{"-F", "parquet", "-w", filepath.Join(pdir, "rtt.parquet"), "--flush-interval", "100ms"}, args...)...)
	if _, err := stdin.Write(bufA.Bytes()); err != nil {
		t.Fatal(err)
	}
	// Wait (no time limit but the test's) until the completed files hold
	// every record of part A: a flush happened after A was processed.
	// The limit only turns a hang into a failure.
	for deadline := time.Now().Add(time.Minute); len(parquetRows(t, pdir)) < len(wantA); sleepBriefly() {
		if time.Now().After(deadline) {
			t.Fatalf("part A's %d records never reached a completed file (%d did); stderr: %s", len(wantA), len(parquetRows(t, pdir)), stderr.String())
		}
	}
	// Part B goes in, then SIGKILL before the next flush can be relied on.
	if _, err := stdin.Write(bufAB.Bytes()[bufA.Len():]); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	final := parquetRows(t, pdir)
	// Everything of A survives; of B, whatever was flushed before the kill
	// (possibly nothing), never a broken file.
	if len(final) < len(wantA) {
		t.Fatalf("%d rows survive the kill, part A alone has %d", len(final), len(wantA))
	}
	slices.Sort(wantA)
	firstA := final[:len(wantA)]
	slices.Sort(firstA)
	if !slices.Equal(firstA, wantA) {
		t.Fatalf("the completed files do not hold part A's records first")
	}
	ents, _ := os.ReadDir(pdir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	t.Logf("after kill -9: %d rows of part A and %d of part B in complete files; directory %v", len(wantA), len(final)-len(wantA), names)
}

// startReplayPipe starts the rttscope binary as `replay ARGS -`, reading
// the capture from the returned pipe; its stderr goes to the buffer. The
// process is killed at the end of the test if it still runs.
func startReplayPipe(t *testing.T, args ...string) (*exec.Cmd, io.WriteCloser, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(cliBin, append(append([]string{"replay"}, args...), "-")...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // fails harmlessly once it has exited
		_ = cmd.Wait()
	})
	return cmd, stdin, &stderr
}

// twoPartCapture encodes a pcap of lab flows 0..n-1 (part A) and one of
// A followed by flows 1000..1000+n-1 (part B, later), for a capture fed
// through a pipe in two steps: bufAB starts with bufA.
func twoPartCapture(t *testing.T, n int) (bufA, bufAB *bytes.Buffer) {
	t.Helper()
	a := labFrames(0, n, 5)
	b := labFrames(1000, n, 5)
	opts := capture.PcapOptions{LinkType: capture.LinkTypeEthernet, Nanosecond: true}
	bufA, bufAB = &bytes.Buffer{}, &bytes.Buffer{}
	if err := capture.EncodePcap(bufA, opts, a); err != nil {
		t.Fatal(err)
	}
	if err := capture.EncodePcap(bufAB, opts, append(slices.Clone(a), b...)); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bufAB.Bytes(), bufA.Bytes()) {
		t.Fatal("the capture of A and B does not start with the capture of A")
	}
	return bufA, bufAB
}

// parquetRows reads the completed Parquet files of dir in name order (the
// order they were written) and returns their rows normalized as jsonl
// lines (normalizeJSONL). Temporary files are skipped: after a kill -9 the
// last one has no footer.
func parquetRows(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []byte
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".partial") {
			continue
		}
		rows, err := parquet.ReadFile[parquetout.Row](filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("%s has its final name but does not read back: %v", e.Name(), err)
		}
		for _, r := range rows {
			lines = append(lines, rowJSON(&r)...)
			lines = append(lines, '\n')
		}
	}
	return normalizeJSONL(t, lines)
}

// rowJSON renders an RTT or flow event row as its jsonl object.
func rowJSON(r *parquetout.Row) []byte {
	if r.Record != nil {
		return []byte(*r.Record)
	}
	m := map[string]any{"timestamp": r.Timestamp}
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	set("flow_id", deref(r.FlowID), r.FlowID != nil)
	set("src_ip", deref(r.SrcIP), r.SrcIP != nil)
	set("src_port", deref(r.SrcPort), r.SrcPort != nil)
	set("dest_ip", deref(r.DestIP), r.DestIP != nil)
	set("dest_port", deref(r.DestPort), r.DestPort != nil)
	set("protocol", deref(r.Protocol), r.Protocol != nil)
	set("rtt", deref(r.RTT), r.RTT != nil)
	set("min_rtt", deref(r.MinRTT), r.MinRTT != nil)
	set("sent_packets", deref(r.SentPackets), r.SentPackets != nil)
	set("sent_bytes", deref(r.SentBytes), r.SentBytes != nil)
	set("rec_packets", deref(r.RecPackets), r.RecPackets != nil)
	set("rec_bytes", deref(r.RecBytes), r.RecBytes != nil)
	set("match_on_egress", deref(r.MatchOnEgress), r.MatchOnEgress != nil)
	set("smoothed_rtt", deref(r.SmoothedRTT), r.SmoothedRTT != nil)
	set("source", deref(r.Source), r.Source != nil)
	set("dns_qtype", deref(r.DNSQType), r.DNSQType != nil)
	set("dns_rcode", deref(r.DNSRCode), r.DNSRCode != nil)
	set("dns_truncated", deref(r.DNSTruncated), r.DNSTruncated != nil)
	set("dns_name", deref(r.DNSName), r.DNSName != nil)
	set("flow_event", deref(r.FlowEvent), r.FlowEvent != nil)
	set("reason", deref(r.Reason), r.Reason != nil)
	set("triggered_by", deref(r.TriggeredBy), r.TriggeredBy != nil)
	b, _ := json.Marshal(m)
	return b
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// sleepBriefly waits a little between two looks at a directory.
func sleepBriefly() { time.Sleep(20 * time.Millisecond) }

// TestFilesBytesPerSample replays a lab capture of 1,000 TCP flows into
// each file sink and prints the bytes on disk per RTT sample (docs/files.md
// records the figures). It checks the Parquet target of issue #11: at most
// 20 bytes per sample.
func TestFilesBytesPerSample(t *testing.T) {
	testutil.RequireRoot(t)
	pcap := labFlows(t, t.TempDir(), 1000, 50)
	var samples int
	for _, sink := range []struct{ name, file, format string }{
		{"jsonl", "rtt.jsonl", "jsonl"},
		{"jsonl+gzip", "rtt.jsonl.gz", "jsonl"},
		{"jsonl+zstd", "rtt.jsonl.zst", "jsonl"},
		{"parquet", "rtt.parquet", "parquet"},
	} {
		dir := t.TempDir()
		args := []string{"-r", "0", "--local-net", "10.1.0.0/16", "-F", sink.format, "-w", filepath.Join(dir, sink.file)}
		if err := runReplayArgs(t, append(args, pcap)...); err != nil {
			t.Fatal(err)
		}
		files := completedFiles(t, dir)
		var size int64
		for _, f := range files {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			size += st.Size()
		}
		if sink.name == "jsonl" {
			samples = bytes.Count(readAllFiles(t, files), []byte(`"rtt":`))
		}
		per := float64(size) / float64(samples)
		t.Logf("%-11s %9d bytes, %d RTT samples: %6.1f bytes/sample", sink.name, size, samples, per)
		if sink.format == "parquet" && per > 20 {
			t.Errorf("Parquet takes %.1f bytes per sample, the target is at most 20", per)
		}
	}
}
