package main

// Tests of the privacy options on `rttscope replay` of the replaytest
// scenario: every mode, every format, per-sample, aggregated and flow
// summary records; the output is scanned for every address of the
// scenario in every notation (internal/testutil.Leaks).

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/replay/replaytest"
	"github.com/rttscope/rttscope/internal/testutil"
)

// scenarioAddrs are the scenario's addresses and the network addresses of
// their aggregation prefixes (/24 and /48).
var scenarioAddrs = []netip.Addr{replaytest.Client4, replaytest.Server4, replaytest.Server4b, replaytest.Server4c,
	replaytest.Client6, replaytest.Server6,
	netip.MustParseAddr("10.0.0.0"), netip.MustParseAddr("192.0.2.0"),
	netip.MustParseAddr("2001:db8:1::"), netip.MustParseAddr("2001:db8:2::")}

// TestReplayAnonymized: with each mode, no address of the capture appears
// in any format, and the records are the same in number as without.
func TestReplayAnonymized(t *testing.T) {
	testutil.RequireRoot(t)
	v := replaytest.Variants()[0]
	path := replaytest.Write(t, t.TempDir(), v)
	base := append(append([]string{}, replaytest.Args[:len(replaytest.Args)-2]...), v.Args...)
	// What each kind of run gives without anonymization: the baseline
	// must show the addresses, or the scan proves nothing.
	runs := map[string][]string{
		"samples":   {"--stats"},
		"aggregate": {"--aggregate", "5s", "--aggregate-subnets-v4", "24", "--stats"},
		"summaries": {"--flow-summary", "--stats"},
	}
	// Fixed keys: a random Crypto-PAn key leaves 10.0.0.0/24 unchanged
	// about once in 1,300 keys (docs/privacy.md), which would make this
	// test fail at random. 32 bytes for pfx and cryptopan, 16 for det and
	// for the ports of trunc and drop.
	keys := map[string]string{}
	for _, mode := range []string{"pfx", "cryptopan", "det", "trunc:4,16", "drop"} {
		size := 16
		if mode == "pfx" || mode == "cryptopan" {
			size = 32
		}
		keys[mode] = writeKey(t, size)
	}
	for kind, extra := range runs {
		plain, err := runReplay(t, append(append(append([]string{}, base...), extra...), "-F", "jsonl", path)...)
		if err != nil {
			t.Fatal(err)
		}
		if len(testutil.Leaks(string(plain), scenarioAddrs...)) == 0 {
			t.Fatalf("%s: the plain output shows no address of the scenario:\n%s", kind, plain)
		}
		nPlain := strings.Count(string(plain), "\n")
		for _, mode := range []string{"pfx", "cryptopan", "det", "trunc:4,16", "drop"} {
			for _, f := range format.Names() {
				args := append(append(append([]string{}, base...), extra...), "-F", f, "--anonymize", mode, "--anonymize-ports",
					"--anon-key-file", keys[mode], path)
				out, err := runReplay(t, args...)
				if err != nil {
					t.Fatalf("%s %s %s: %v", kind, mode, f, err)
				}
				if leaks := testutil.Leaks(string(out), scenarioAddrs...); len(leaks) > 0 {
					t.Errorf("%s --anonymize %s -F %s: %v in\n%s", kind, mode, f, leaks, out)
				}
				if f == "jsonl" {
					// One more record: the anonymization key's (none for
					// trunc and drop without ports; here ports need one).
					if n := strings.Count(string(out), "\n"); n != nPlain+1 {
						t.Errorf("%s --anonymize %s: %d records, want %d + the key record:\n%s", kind, mode, n, nPlain, out)
					}
				}
			}
		}
	}
}

// writeKey writes a private key file of size bytes (a fixed pattern).
func writeKey(t *testing.T, size int) string {
	t.Helper()
	var b strings.Builder
	for i := range size {
		fmt.Fprintf(&b, "%02x", byte(i*37+11))
	}
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReplayRelativeTime: --relative-time counts from the first packet;
// --minimal has no counters and no flow events.
func TestReplayRelativeTime(t *testing.T) {
	testutil.RequireRoot(t)
	v := replaytest.Variants()[0]
	path := replaytest.Write(t, t.TempDir(), v)
	base := append(append([]string{}, replaytest.Args[:len(replaytest.Args)-2]...), v.Args...)
	out, err := runReplay(t, append(base, "-F", "jsonl", "--relative-time", path)...)
	if err != nil {
		t.Fatal(err)
	}
	first := replaytest.Steps()[0].At // the scenario's first packet, after T0
	want := replaytest.Expected()
	var got []int64
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct{ Timestamp int64 }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Timestamp)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	replaytest.Sort(want)
	for i, e := range want {
		if rel := e.Time - replaytest.T0 - first; got[i] != rel {
			t.Errorf("record %d at %d, want %d (capture time %d minus the first packet's)", i, got[i], rel, e.Time)
		}
	}

	out, err = runReplay(t, append(base, "-F", "jsonl", "--minimal", "--anonymize", "pfx", path)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, word := range []string{`"flow_event"`, "sent_packets", "rec_bytes"} {
		if strings.Contains(string(out), word) {
			t.Errorf("--minimal output has %s:\n%s", word, out)
		}
	}
	if !strings.Contains(string(out), `"rtt":20000000,`) {
		t.Errorf("--minimal output lost the RTTs:\n%s", out)
	}
}

// TestReplayKeyFile: a key file others can read is refused before any
// output is written, naming the chmod; a private one gives the same
// output twice.
func TestReplayKeyFile(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	v := replaytest.Variants()[0]
	path := replaytest.Write(t, dir, v)
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	out, err := runReplay(t, "--anonymize", "pfx", "--anon-key-file", key, path)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+key) || len(out) != 0 {
		t.Fatalf("group-readable key: err %v, %d bytes written", err, len(out))
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := runReplay(t, "-F", "jsonl", "--anonymize", "pfx", "--anon-key-file", key, path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := runReplay(t, "-F", "jsonl", "--anonymize", "pfx", "--anon-key-file", key, path)
	if err != nil || string(a) != string(b) || len(a) == 0 {
		t.Errorf("two replays with one key file differ (%v):\n%s\n%s", err, a, b)
	}
}
