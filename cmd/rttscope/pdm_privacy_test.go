package main

// Tests of rttscope pdm's outputs and privacy options on a capture (pdm
// --read and replay --pdm, which share the path): every mode, every
// format, per-option and interval records; the output and stderr are
// scanned for the capture's addresses in every notation
// (internal/testutil.Leaks).

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rttscope/rttscope/internal/parquetout"
	"github.com/rttscope/rttscope/internal/pdm/pdmtest"
	"github.com/rttscope/rttscope/internal/testutil"
)

var pdmAddrs = []netip.Addr{pdmtest.HostA, pdmtest.HostB}

// runPDMOut runs the binary with args plus -w FILE in a fresh directory
// and returns what it wrote (Parquet rows as JSON) and its stderr.
func runPDMOut(t *testing.T, args ...string) (out, stderr string) {
	t.Helper()
	dir := t.TempDir()
	name := "out"
	parquetOut := false
	for i, a := range args {
		if a == "-F" && i+1 < len(args) && args[i+1] == "parquet" {
			name, parquetOut = "out.parquet", true
		}
	}
	r := cliRun(t, false, append(args, "-w", filepath.Join(dir, name))...)
	if r.code != 0 {
		t.Fatalf("rttscope %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if !parquetOut {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
			continue
		}
		rows, err := parquet.ReadFile[parquetout.Row](p)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		for _, row := range rows {
			j, _ := json.Marshal(row)
			b.Write(j)
			b.WriteByte('\n')
		}
	}
	return b.String(), r.stderr
}

// TestPDMReadAnonymized: with each mode and format, per option and per
// interval, through pdm --read and replay --pdm, no address of the
// capture appears in the output or on stderr; the plain runs show them
// (or the scan would prove nothing) and as many records.
func TestPDMReadAnonymized(t *testing.T) {
	testutil.RequireRoot(t)
	pcap := pdmtest.WritePcap(t, t.TempDir())
	k32, k16 := writeKey(t, 32), writeKey(t, 16)
	keys := map[string]string{"pfx": k32, "cryptopan": k32, "det": k16, "trunc:4,16": k16, "drop": k16}
	// Every format once; the other runs share their writers (the
	// interval records' standard lines are scanned by
	// TestPDMAnonymizedLab, and internal/privacy's TestPDMRecords renders
	// both record types in every format and mode).
	for _, tc := range []struct{ run, formats []string }{
		{[]string{"replay", "--pdm", pcap}, []string{"standard", "json", "jsonl", "parquet"}},
		{[]string{"replay", "--pdm", "--pdm-report", "interval", "--interval", "20ms", pcap}, []string{"jsonl"}},
		{[]string{"pdm", "--read", pcap}, []string{"jsonl"}},
	} {
		run := tc.run
		plain, _ := runPDMOut(t, append(append([]string{}, run...), "-F", "jsonl")...)
		if len(testutil.Leaks(plain, pdmAddrs...)) == 0 || !strings.Contains(plain, `"dtlr"`) {
			t.Fatalf("%v: the plain output shows no record with an address:\n%s", run, plain)
		}
		nPlain := strings.Count(plain, "\n")
		for mode, key := range keys {
			for _, f := range tc.formats {
				args := append(append([]string{}, run...), "-F", f, "--anonymize", mode, "--anonymize-ports", "--anon-key-file", key)
				out, stderr := runPDMOut(t, args...)
				if leaks := testutil.Leaks(out+stderr, pdmAddrs...); len(leaks) > 0 {
					t.Errorf("rttscope %s: %v in\n%s\n%s", strings.Join(args, " "), leaks, out, stderr)
				}
				if !strings.Contains(out, "dtlr") {
					t.Errorf("rttscope %s: no PDM record:\n%s", strings.Join(args, " "), out)
				}
				// jsonl: the records plus the anonymization key's.
				if n := strings.Count(out, "\n"); f == "jsonl" && n != nPlain+1 {
					t.Errorf("rttscope %s: %d records, want %d + the key record:\n%s", strings.Join(args, " "), n, nPlain, out)
				}
				if f == "jsonl" && strings.Contains(out, `"src_port":40000`) {
					t.Errorf("rttscope %s: --anonymize-ports kept port 40000:\n%s", strings.Join(args, " "), out)
				}
			}
		}
	}
}

// TestPDMReadRelativeMinimal: --relative-time counts from the first
// packet; --minimal leaves out the wire fields and ifindex and keeps the
// delays.
func TestPDMReadRelativeMinimal(t *testing.T) {
	testutil.RequireRoot(t)
	pcap := pdmtest.WritePcap(t, t.TempDir())
	out, _ := runPDMOut(t, "pdm", "--read", pcap, "-F", "jsonl", "--relative-time")
	var ts []int64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct{ Timestamp int64 }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, r.Timestamp)
	}
	// The conversation's PDM packets at 0, 10, 30 and 35 ms.
	if want := []int64{0, 10e6, 30e6, 35e6}; len(ts) != len(want) || ts[0] != 0 || ts[1] != want[1] || ts[2] != want[2] || ts[3] != want[3] {
		t.Errorf("relative times %v, want %v", ts, want)
	}
	out, _ = runPDMOut(t, "replay", "--pdm", pcap, "-F", "jsonl", "--minimal", "--anonymize", "drop")
	for _, word := range []string{"psn_this_pkt", "ifindex", "delta_last_recv", `"src_ip"`} {
		if strings.Contains(out, word) {
			t.Errorf("--minimal --anonymize drop output has %s:\n%s", word, out)
		}
	}
	if !strings.Contains(out, `"network_rtt":2377711`) || !strings.Contains(out, `"flow_id":1`) {
		t.Errorf("--minimal lost the delays or the flow number:\n%s", out)
	}
}

// TestPDMReadRotatedFiles: PDM records go to the monitor's rotating,
// compressing file destination: completed zstd files (the size is
// checked between writes, so 200 bytes do not make a file per record)
// that together hold the records the plain output has.
func TestPDMReadRotatedFiles(t *testing.T) {
	testutil.RequireRoot(t)
	pcap := pdmtest.WritePcap(t, t.TempDir())
	plain, _ := runPDMOut(t, "replay", "--pdm", pcap, "-F", "jsonl")
	dir := t.TempDir()
	args := []string{"pdm", "--read", pcap, "-F", "jsonl", "-w", filepath.Join(dir, "pdm.jsonl.zst"), "--rotate-size", "200"}
	if r := cliRun(t, false, args...); r.code != 0 {
		t.Fatalf("rttscope %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	files := completedFiles(t, dir)
	got := string(readAllFiles(t, files))
	for _, f := range files {
		if !strings.HasSuffix(f, ".jsonl.zst") {
			t.Errorf("file %s is not a completed zstd jsonl file", f)
		}
	}
	if got != plain || len(files) == 0 {
		t.Errorf("%d files holding\n%s\nwant\n%s", len(files), got, plain)
	}
}

// TestReplayPDMEqualsPDMRead: replay --pdm and pdm --read are one path:
// the same records, per option and per interval.
func TestReplayPDMEqualsPDMRead(t *testing.T) {
	testutil.RequireRoot(t)
	pcap := pdmtest.WritePcap(t, t.TempDir())
	for _, extra := range [][]string{{"-F", "jsonl"}, {"-F", "jsonl", "--pdm-report", "interval", "--interval", "20ms"}} {
		a, _ := runPDMOut(t, append([]string{"replay", "--pdm", pcap}, extra...)...)
		b, _ := runPDMOut(t, append([]string{"pdm", "--read", pcap}, extra...)...)
		if a != b || !strings.Contains(a, `"type":"pdm`) {
			t.Errorf("%v: replay --pdm gave\n%s\npdm --read gave\n%s", extra, a, b)
		}
	}
}
