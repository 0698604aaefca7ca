package replay_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/replay"
	"github.com/rttscope/rttscope/internal/replay/replaytest"
	"github.com/rttscope/rttscope/internal/testutil"
)

// TestFallbacksSameOutput: the shared replay scenario gives the same
// events, exact to the ns and byte for byte, whichever variant of cleanup
// and packet runner the kernel allows or RTTSCOPE_DISABLE forces, with one
// worker and with several; and those events are the scenario's expected
// ones. The stats record names the variant in use.
func TestFallbacksSameOutput(t *testing.T) {
	testutil.RequireRoot(t)
	path := writeScenario(t, capture.LinkTypeEthernet, true)
	cases := []struct {
		disable string
		variant []string // must appear in the stats record's variant
	}{
		{"", nil},
		{"map_elem_iter", []string{"cleanup=prog-run"}},
		{"xdp_test_run_meta", []string{"replay=tc"}},
		{"map_elem_iter,xdp_test_run_meta", []string{"cleanup=prog-run", "replay=tc"}},
	}
	want := replaytest.Expected()
	replaytest.Sort(want)
	var ref string
	for _, c := range cases {
		for _, workers := range []int{1, 2} {
			t.Setenv(kernel.DisableEnv, c.disable)
			out, _, err := replayFile(t, path, "jsonl", replay.Options{BPF: runConfig(), Workers: workers, Stats: true})
			if err != nil {
				t.Fatalf("disable=%q workers=%d: %v", c.disable, workers, err)
			}
			evs, stats := splitStats(t, out)
			variant := stats[strings.Index(stats, `"variant":`):]
			for _, v := range c.variant {
				if !strings.Contains(variant, v) {
					t.Errorf("disable=%q: stats record %s lacks %s", c.disable, stats, v)
				}
			}
			got, _, err := replaytest.ParseJSONL(evs)
			if err != nil {
				t.Fatal(err)
			}
			replaytest.Sort(got)
			if d := replaytest.Diff(got, want); d != "" {
				t.Errorf("disable=%q workers=%d (%s): %s", c.disable, workers, variant, d)
			}
			// Every field of every record, not only those Diff reads; the
			// order of records with the same time may differ (map walks).
			lines := sortedLines(evs)
			if ref == "" {
				ref = lines
			} else if lines != ref {
				t.Errorf("disable=%q workers=%d (%s): records differ from the preferred variant's:\n%s\nwant\n%s",
					c.disable, workers, variant, lines, ref)
			}
		}
	}
}

// splitStats separates the event lines of jsonl output from its one stats
// record.
func splitStats(t *testing.T, out []byte) (evs []byte, stats string) {
	t.Helper()
	for _, line := range bytes.SplitAfter(out, []byte("\n")) {
		if bytes.Contains(line, []byte(`"type":"stats"`)) {
			stats = string(line)
			continue
		}
		evs = append(evs, line...)
	}
	if !strings.Contains(stats, `"variant":`) {
		t.Fatalf("no stats record with a variant in:\n%s", out)
	}
	return evs, stats
}

func sortedLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
