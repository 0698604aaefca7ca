package main

import (
	"strings"
	"testing"
)

// TestPDMUsageErrors: bad flags exit 2 with one line naming the flag.
func TestPDMUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"pdm"}, []string{"-i IFNAME"}},
		{[]string{"pdm", "-i", "lo", "--format", "xml"}, []string{"--format", "xml", "jsonl"}},
		{[]string{"pdm", "-i", "lo", "--pdm-map-size", "0"}, []string{"--pdm-map-size", "0"}},
		{[]string{"pdm", "-i", "lo", "--pdm-lifetime", "0s"}, []string{"--pdm-lifetime", "0s"}},
		{[]string{"pdm", "-i", "lo", "--tc-mode", "new"}, []string{"--tc-mode", "new"}},
		{[]string{"pdm", "-i", "lo", "--pdm-report", "flow"}, []string{"--pdm-report", "flow", "interval"}},
		{[]string{"pdm", "-i", "lo", "--pdm-report", "interval", "--interval", "0s"}, []string{"--interval", "0s"}},
		{[]string{"pdm", "--read", "x.pcap", "--pdm-report", "interval", "--interval", "-1s"}, []string{"--interval", "-1s"}},
		{[]string{"pdm", "-i", "lo", "-F", "ppviz"}, []string{"ppviz", "PDM"}},
		{[]string{"pdm", "-i", "lo", "--anonymize", "rot13"}, []string{"rot13"}},
		{[]string{"pdm", "-i", "lo", "--rotate-size", "1M"}, []string{"--rotate-size", "--write"}},
		{[]string{"pdm", "-i", "lo", "-F", "parquet"}, []string{"parquet", "--write"}},
		{[]string{"replay", "--pdm", "--workers", "2", "x.pcap"}, []string{"--workers", "--pdm"}},
		{[]string{"replay", "--pdm-report", "interval", "x.pcap"}, []string{"--pdm-report", "only with --pdm"}},
		{[]string{"replay", "--pdm", "--interval", "1s", "x.pcap"}, []string{"--interval needs --pdm-report interval"}},
		{[]string{"pdm", "-i", "lo", "--interval", "5s"}, []string{"--interval needs --pdm-report interval"}},
		{[]string{"pdm", "bench", "--rounds", "0"}, []string{"--rounds"}},
		{[]string{"pdm", "--read", "x.pcap", "-i", "lo"}, []string{"--read", "-i"}},
		{[]string{"pdm", "--read", "x.pcap", "--duration", "1s"}, []string{"--read", "--duration"}},
		{[]string{"pdm", "--read", "x.pcap", "--pdm-map-size", "0"}, []string{"--pdm-map-size", "0"}},
		{[]string{"pdm", "-i", "lo", "--local-net", "::/0"}, []string{"--local-net", "--read"}},
		{[]string{"pdm", "--read", "x.pcap", "--local-net", "::/129"}, []string{`invalid --local-net "::/129"`}},
	} {
		cliRun(t, true, tc.args...).wantOneLine(t, tc.args, 2, tc.want...)
	}
}

// TestPDMAttachAndUndo: a run hooks the interface and leaves nothing
// behind; an unknown second interface fails in one line and undoes the
// first.
func TestPDMAttachAndUndo(t *testing.T) {
	l := needCLILab(t)
	mb, ifname := l.Middlebox.Name, l.MiddleboxClientIf
	args := []string{"pdm", "--netns", mb, "-i", ifname, "-i", "nosuch0"}
	cliRun(t, false, args...).wantOneLine(t, args, 1, "nosuch0")
	if got := attachedTo(t, l.Middlebox, ifname); len(got) > 0 {
		t.Errorf("rttscope %s left %v on %s", strings.Join(args, " "), got, ifname)
	}
	args = []string{"pdm", "--netns", mb, "-i", ifname, "--duration", "500ms"}
	r := cliRun(t, false, args...)
	if r.code != 0 || !strings.Contains(r.stderr, "counters") || !strings.Contains(r.stderr, ifname) {
		t.Errorf("rttscope %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	if got := attachedTo(t, l.Middlebox, ifname); len(got) > 0 {
		t.Errorf("rttscope %s left %v on %s", strings.Join(args, " "), got, ifname)
	}
}
