package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad flags of the bench studies are one-line usage errors (exit 2),
// refused before anything is built.
func TestCLIBenchStudyUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"bench", "hooks", "--types", "uprobe"}, []string{"--types", "uprobe"}},
		{[]string{"bench", "hooks", "--reps", "0"}, []string{"--reps"}},
		{[]string{"bench", "hooks", "--cpus", "99"}, []string{"--cpus", "99"}},
		{[]string{"bench", "hooks", "--cpus", "1-0"}, []string{"--cpus"}},
		{[]string{"bench", "hooks", "extra"}, []string{"bench hooks takes no arguments"}},
		{[]string{"bench", "forwarding", "--modes", "dpdk"}, []string{"--modes", "dpdk"}},
		{[]string{"bench", "forwarding", "--tcp-single=false", "--tcp-flows", "0", "--udp=false"}, []string{"no traffic case"}},
		{[]string{"bench", "forwarding", "--duration", "10ms"}, []string{"--duration"}},
		{[]string{"bench", "monitor", "--external", "nocommand"}, []string{"--external", "NAME="}},
		{[]string{"bench", "monitor", "--external", "tcpdump=sleep 1"}, []string{"--external", "taken"}},
		{[]string{"bench", "monitor", "--external", "empty=sleep 1"}, []string{"--external", "taken"}},
		{[]string{"bench", "monitor", "--external", "rttscope-aggregated-prev=sleep 1"}, []string{"--external", "taken"}},
		{[]string{"bench", "monitor", "--external", "a=x", "--external", "a=y"}, []string{"--external", "taken"}},
		{[]string{"bench", "monitor", "--modes", "fast"}, []string{"--modes", "fast"}},
		{[]string{"bench", "monitor", "--flows", "0"}, []string{"--flows"}},
		{[]string{"bench", "monitor", "--tcp=false", "--udp=false"}, []string{"no traffic case"}},
		{[]string{"bench", "monitor", "--tcp-rate", "lots"}, []string{"--tcp-rate", "lots"}},
		{[]string{"bench", "monitor", "--udp-payload", "1472", "--udp-ipv6"}, []string{"--udp-payload 1-1452"}},
		{[]string{"bench", "monitor", "--warmup-rounds", "-1"}, []string{"--warmup-rounds"}},
		{[]string{"bench", "monitor", "--compare-bin", "/nonexistent/rttscope"}, []string{"--compare-bin", "/nonexistent/rttscope", "not an executable"}},
		{[]string{"bench", "monitor", "--compare-bin", "/bin/true", "--modes", ""}, []string{"--compare-bin", "--modes"}},
		{[]string{"bench", "report"}, []string{"RESULT.json"}},
		{[]string{"bench", "profile", "--duration", "1ms"}, []string{"--duration"}},
		{[]string{"bench", "profile", "--freq", "0"}, []string{"--freq"}},
		{[]string{"bench", "profile", "--perf", "/nonexistent/perf"}, []string{"--perf", "/nonexistent/perf", "not an executable"}},
		{[]string{"bench", "profile", "extra"}, []string{"bench profile takes no arguments"}},
	} {
		r := cliRun(t, false, tc.args...)
		r.wantOneLine(t, tc.args, 2, tc.want...)
	}
}

func TestCLIBenchStudyHelp(t *testing.T) {
	for _, sub := range []string{"hooks", "forwarding", "monitor"} {
		r := cliRun(t, false, "bench", sub, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "--reps") || !strings.Contains(r.stdout, "--cpus") {
			t.Errorf("bench %s --help: code %d, stdout %q", sub, r.code, r.stdout)
		}
	}
	if r := cliRun(t, false, "bench", "--help"); !strings.Contains(r.stdout, "forwarding") || !strings.Contains(r.stdout, "hooks") {
		t.Errorf("bench --help does not list the studies: %q", r.stdout)
	}
}

// bench report writes the report of a committed result again and refuses to overwrite it unless --replace.
func TestCLIBenchReport(t *testing.T) {
	dir := t.TempDir()
	src, err := filepath.Abs("../../bench/results/rttscope-20261122T134205Z.json")
	if err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, false, "bench", "report", "-o", dir, src)
	want := filepath.Join(dir, "rttscope-20261122T134205Z.html")
	if r.code != 0 || strings.TrimSpace(r.stdout) != want {
		t.Fatalf("bench report: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(want); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("report %s: %v", want, err)
	}
	if r := cliRun(t, false, "bench", "report", "-o", dir, src); r.code == 0 {
		t.Error("a second report overwrote the first without --replace")
	}
	if r := cliRun(t, false, "bench", "report", "--replace", "-o", dir, src); r.code != 0 {
		t.Errorf("--replace: code %d, stderr %q", r.code, r.stderr)
	}
}
