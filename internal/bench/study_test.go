package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/telemetry"
	"github.com/rttscope/rttscope/internal/testutil"
)

// The fast versions of the three studies check the plumbing (every
// configuration runs in every round, warm-up rounds are discarded, files
// and report are written, refusals are rows with a reason, nothing is
// left behind), never the figures.

func fastMethod() Method {
	return Method{Reps: 3, WarmupRounds: 1, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond}
}

// checkStudy checks what every study result must hold.
func checkStudy(t *testing.T, res *Result, m Method) {
	t.Helper()
	st := res.Settings.Study
	if st == nil {
		t.Fatal("no study settings")
	}
	unavailable := map[string]bool{}
	for _, u := range res.Unavailable {
		unavailable[u.Config] = true
		if u.Reason == "" {
			t.Errorf("%s: unavailable without a reason", u.Config)
		}
	}
	for _, cas := range st.Cases {
		rounds := map[int]map[string]int{}
		for _, run := range res.Runs {
			if run.Case != cas {
				continue
			}
			if rounds[run.Round] == nil {
				rounds[run.Round] = map[string]int{}
			}
			rounds[run.Round][run.Config]++
			if run.Warmup != (run.Round <= 0) {
				t.Errorf("%s round %d %s: warm-up flag %v", cas, run.Round, run.Config, run.Warmup)
			}
			if run.Load1 <= 0 {
				t.Errorf("%s round %d %s: no load average recorded", cas, run.Round, run.Config)
			}
		}
		if len(rounds) != m.Reps+m.WarmupRounds {
			t.Errorf("%s: %d rounds, want %d", cas, len(rounds), m.Reps+m.WarmupRounds)
		}
		for r, cfgs := range rounds {
			for _, c := range st.Configs {
				if want := map[bool]int{true: 0, false: 1}[unavailable[c]]; cfgs[c] != want {
					t.Errorf("%s round %d: %s ran %d times, want %d", cas, r, c, cfgs[c], want)
				}
			}
		}
		// Warm-up rounds are not in the series; every available
		// configuration has Reps values of the first metric.
		for _, c := range st.Configs {
			s := res.Lookup(seriesID(res.Series[0].Group, cas, c, "", st.Metrics[0].Name))
			if unavailable[c] {
				if s != nil {
					t.Errorf("%s %s: unavailable but measured", cas, c)
				}
				continue
			}
			if s == nil || len(s.Values)+s.Missing != m.Reps || len(s.RepLoad1) != len(s.Values) {
				t.Errorf("%s %s: series %+v, want %d values with their load", cas, c, s, m.Reps)
				continue
			}
			// On a machine overloaded by other jobs a short window can
			// see no packet at all: a baseline whose median is 0 has
			// no ratio, which is right, not a plumbing fault.
			b := res.Lookup(s.Baseline)
			if c != st.Baseline && s.Compare == nil && (b == nil || b.Summary.Median != 0) {
				t.Errorf("%s %s: no comparison with the baseline: %+v", cas, c, s)
			}
		}
	}
	dir := t.TempDir()
	jsonPath, csvPath, err := WriteFiles(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	htmlPath, err := WriteReport(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if b, err := os.ReadFile(jsonPath); err != nil || json.Unmarshal(b, &back) != nil || len(back.Runs) != len(res.Runs) || back.Machine.Command == "" {
		t.Errorf("JSON does not read back with its runs and command line (err %v)", err)
	}
	b, _ := os.ReadFile(csvPath)
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(rows) < 2 || strings.Join(rows[0], ",") != strings.Join(CSVHeader, ",") {
		t.Errorf("CSV: %d rows, err %v", len(rows), err)
	}
	if h, _ := os.ReadFile(htmlPath); !bytes.Contains(h, []byte("<svg")) {
		t.Error("report without figures")
	}
}

// namespaces lists the named network namespaces with prefix.
func namespaces(prefix string) map[string]bool {
	out := map[string]bool{}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			out[e.Name()] = true
		}
	}
	return out
}

// noNewNamespaces fails for namespaces with prefix that were not there
// before (another bench may run beside the test).
func noNewNamespaces(t *testing.T, prefix string, before map[string]bool) {
	t.Helper()
	for n := range namespaces(prefix) {
		if !before[n] {
			t.Errorf("namespace %s left behind", n)
		}
	}
}

// directLab builds a lab with one direct path, its namespaces named
// prefix-*, and closes it when the test ends, failing the test if a
// namespace of that prefix is left behind.
func directLab(t *testing.T, prefix string) *lab.Lab {
	t.Helper()
	nsBefore := namespaces(prefix)
	l, err := lab.New(context.Background(), lab.Config{Prefix: prefix, Paths: []lab.PathSpec{{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		noNewNamespaces(t, prefix, nsBefore)
	})
	return l
}

func TestHooksStudyFast(t *testing.T) {
	testutil.RequireRoot(t)
	nsBefore := namespaces("rtthooks")
	var before unix.Statfs_t
	_ = unix.Statfs("/sys/kernel/tracing", &before)
	o := DefaultHooksOptions()
	o.Method, o.Types = fastMethod(), []string{"raw_tp", "kprobe", "fentry"}
	res, err := RunHooks(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkStudy(t, res, o.Method)
	cas := res.Settings.Study.Cases[0]
	if s := res.Lookup(seriesID(GroupHooks, cas, "raw_tp-count", "", MetricEventsPerPkt)); s == nil || s.Summary.N == 0 || !(s.Summary.Median > 0) {
		t.Errorf("raw_tp-count counted no event: %+v", s)
	}
	raw := res.Lookup(seriesID(GroupHooks, cas, "raw_tp-empty+stats", "", MetricBPFNsPerRun))
	if raw == nil || raw.Summary.N == 0 {
		t.Fatal("raw_tp-empty+stats: no bpf_stats figure")
	}
	// Net of the residual: below the reported figure in every window
	// (the residual is > 0 with the accounting on), never negative.
	if net := res.Lookup(seriesID(GroupHooks, cas, "raw_tp-empty+stats", "", MetricBPFNetNsPerRun)); net == nil || len(net.Values) != len(raw.Values) {
		t.Errorf("raw_tp-empty+stats: net figures %+v against %v", net, raw.Values)
	} else {
		for i, v := range net.Values {
			if !(v >= 0 && v < raw.Values[i]) {
				t.Errorf("raw_tp-empty+stats rep %d: net %v ns/run against reported %v", i, v, raw.Values[i])
			}
		}
	}
	if s := res.Lookup(seriesID(GroupHooks, cas, "raw_tp-empty", "", MetricBPFNsPerRun)); s != nil && s.Summary.N > 0 {
		t.Error("raw_tp-empty has a bpf_stats figure with stats off")
	}
	found := false
	for _, d := range res.Derived {
		found = found || (d.Config == "raw_tp-count" && d.Name == "cost_per_event" && d.Low <= d.High)
	}
	if s := res.Lookup(seriesID(GroupHooks, cas, "raw_tp-count", "", MetricCPUNsPerPkt)); !found && s != nil && s.Compare != nil && s.Compare.DeltaLow != nil {
		t.Errorf("no cost per event for raw_tp-count: %+v", res.Derived)
	}
	for _, u := range res.Unavailable {
		if !strings.Contains(u.Reason, "refused") {
			t.Errorf("%s: reason %q does not say what was refused", u.Config, u.Reason)
		}
	}
	var after unix.Statfs_t
	_ = unix.Statfs("/sys/kernel/tracing", &after)
	if before.Type != after.Type {
		t.Errorf("tracefs mount state changed: %#x -> %#x", before.Type, after.Type)
	}
	noNewNamespaces(t, "rtthooks", nsBefore)
}

func TestForwardingStudyFast(t *testing.T) {
	testutil.RequireRoot(t)
	nsBefore := namespaces("rttfwd")
	o := DefaultForwardingOptions()
	o.Method, o.SingleTCP, o.TCPFlows, o.RttscopeRTT = fastMethod(), false, 0, false
	o.PingInterval = 10 * time.Millisecond
	res, err := RunForwarding(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkStudy(t, res, o.Method)
	cas := res.Settings.Study.Cases[0]
	for _, mode := range []string{FwdKernel, FwdTC, FwdXDP} {
		s := res.Lookup(seriesID(GroupForwarding, cas, mode, "", MetricRouterPPS))
		if s == nil {
			t.Errorf("%s: not measured (unavailable: %+v)", mode, res.Unavailable)
			continue
		}
		for _, v := range s.Values {
			if !(v > 0) {
				t.Errorf("%s: a window forwarded nothing: %v", mode, s.Values)
			}
		}
		if p := res.Lookup(seriesID(GroupForwarding, cas, mode, "", MetricPingRTT)); p == nil || p.Summary.N != o.Method.Reps {
			t.Errorf("%s: ping got no reply in some window: %+v", mode, p)
		}
	}
	if res.Lookup(seriesID(GroupForwarding, cas, FwdFlowtable, "", MetricRouterPPS)) == nil && len(res.Unavailable) == 0 {
		t.Error("flowtable neither measured nor reported unavailable")
	}
	noNewNamespaces(t, "rttfwd", nsBefore)
}

func TestMonitorStudyFast(t *testing.T) {
	testutil.RequireRoot(t)
	nsBefore := namespaces("rttmon")
	capBefore, _ := filepath.Glob(filepath.Join(os.TempDir(), "rttscope-bench-capture-*"))
	bin, cleanup, err := testutil.Build("github.com/rttscope/rttscope/cmd/rttscope")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	o := DefaultMonitorOptions()
	o.Method, o.Flows, o.Modes, o.MonitorBinary = fastMethod(), nil, []string{ModeAggregated}, bin
	// The warm-up rounds are checked by the other studies; here every
	// window starts a monitor (seconds each on a busy machine).
	o.Method.Warmup, o.Method.WarmupRounds = 300*time.Millisecond, 0
	o.Externals = []External{{Name: "lines", Cmd: "while :; do echo {iface}; sleep 0.01; done"}, {Name: "broken", Cmd: "echo no such monitor >&2; exit 7"}}
	o.ExternalStart = 100 * time.Millisecond
	o.CompareBinary = bin // the same build as the "other" one: the plumbing only
	res, err := RunMonitor(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkStudy(t, res, o.Method)
	cas := res.Settings.Study.Cases[0]
	get := func(cfg, metric string) *Series { return res.Lookup(seriesID(GroupMonitor, cas, cfg, "", metric)) }
	for _, cfg := range []string{"rttscope-aggregated", prevConfig(ModeAggregated)} {
		if s := get(cfg, MetricBPFNsPerPkt); s == nil || !(s.Summary.Min > 0) {
			t.Errorf("%s: rttscope's programs were not found on the interface: %+v", cfg, s)
		}
	}
	vsPrev := 0
	for _, d := range res.Derived {
		if d.Config == "rttscope-aggregated" && strings.HasSuffix(d.Name, "_vs_prev") && d.Value > 0 {
			vsPrev++
		}
	}
	if vsPrev != len(againstPrevMetrics) {
		t.Errorf("%d figures against the other build, want %d: %+v", vsPrev, len(againstPrevMetrics), res.Derived)
	}
	// Net of bpf_stats' residual: smaller in every window, never
	// negative; the external without BPF programs loses nothing.
	for _, c := range []struct {
		cfg, raw, net string
	}{
		{"rttscope-aggregated", MetricBPFNsPerPkt, MetricBPFNetNsPerPkt},
		{"rttscope-aggregated", MetricToolCPUShare, MetricToolCPUShareNet},
		{ProgEmpty, MetricBPFNsPerPkt, MetricBPFNetNsPerPkt},
		{ProgEmpty, MetricToolCPUShare, MetricToolCPUShareNet},
		{"lines", MetricToolCPUShare, MetricToolCPUShareNet},
	} {
		raw, net := get(c.cfg, c.raw), get(c.cfg, c.net)
		if raw == nil || net == nil || len(raw.Values) != len(net.Values) || len(net.Values) == 0 {
			t.Fatalf("%s: %s %+v, %s %+v", c.cfg, c.raw, raw, c.net, net)
		}
		for i := range net.Values {
			bpf := c.cfg != "lines"
			if bpf && !(net.Values[i] >= 0 && net.Values[i] < raw.Values[i]) || !bpf && net.Values[i] != raw.Values[i] {
				t.Errorf("%s rep %d: %s %v against %s %v", c.cfg, i, c.net, net.Values[i], c.raw, raw.Values[i])
			}
		}
	}
	if len(res.Unavailable) != 1 || res.Unavailable[0].Config != "broken" || !strings.Contains(res.Unavailable[0].Reason, "no such monitor") {
		t.Errorf("an external that fails at start must be an unavailable row with its stderr: %+v", res.Unavailable)
	}
	vsEmpty := map[string]bool{}
	for _, d := range res.Derived {
		if strings.HasSuffix(d.Name, "_vs_empty") && d.Low <= d.High {
			vsEmpty[d.Config+" "+d.Name] = true
		}
	}
	// Packets/s for every monitor, BPF ns per packet at each hook for
	// those with programs; nothing for the two baselines.
	want := map[string]bool{"lines packets_per_s_vs_empty": true}
	if get(ToolTcpdump, MetricFwdPPS) != nil {
		want[ToolTcpdump+" packets_per_s_vs_empty"] = true
	}
	for _, cfg := range []string{"rttscope-aggregated", prevConfig(ModeAggregated)} {
		for _, n := range []string{"packets_per_s_vs_empty", MetricBPFNsPerPktEgress + "_vs_empty"} {
			want[cfg+" "+n] = true
		}
	}
	if !maps.Equal(vsEmpty, want) {
		t.Errorf("against the empty program: %v, want %v", vsEmpty, want)
	}
	// The case is one-way UDP: the interface sends every packet and
	// receives too few for an ingress figure.
	for _, cfg := range []string{"rttscope-aggregated", ProgEmpty} {
		if s := get(cfg, MetricBPFNsPerPktEgress); s == nil || !(s.Summary.Min > 0) {
			t.Errorf("%s: %s %+v, want > 0 in every window", cfg, MetricBPFNsPerPktEgress, s)
		}
		if s := get(cfg, MetricBPFNsPerPktIngress); s != nil && s.Summary.N > 0 {
			t.Errorf("%s: %s %v, but next to nothing was received", cfg, MetricBPFNsPerPktIngress, s.Values)
		}
	}
	if s := get(ProgEmpty, MetricMonitorCores); s != nil && s.Summary.N > 0 {
		t.Errorf("the empty program has no process, yet a monitor CPU figure: %+v", s)
	}
	if s := get("lines", MetricSamplesPerS); s == nil || !(s.Summary.Min > 0) {
		t.Errorf("the external command's output was not counted: %+v", s)
	}
	if s := get(ToolTcpdump, MetricOutputBPS); s == nil || !(s.Summary.Min > 0) {
		t.Errorf("tcpdump's capture did not grow: %+v", s)
	}
	for _, run := range res.Runs {
		var w MonitorWindow
		if run.Config == ProgNone || json.Unmarshal(run.Raw, &w) != nil {
			continue
		}
		if !(w.BPFResidualNs > 0) {
			t.Errorf("%s round %d: bpf_stats residual %v, want > 0 (the accounting is on)", run.Config, run.Round, w.BPFResidualNs)
		}
		if run.Config == ProgEmpty || strings.HasPrefix(run.Config, ProgRttscope) {
			// One program per hook, their run times adding up to
			// the interface's; only egress runs (one-way UDP).
			eg, in := w.BPFHooks[hookEgress], w.BPFHooks[hookIngress]
			if w.Programs != 2 || len(w.BPFHooks) != 2 || eg.Runs == 0 || eg.Ns+in.Ns != w.BPFNs || eg.Runs+in.Runs != w.BPFRuns || in.Runs > w.Load.FwdRxPackets {
				t.Errorf("%s round %d: %d programs, by hook %+v, in all %d runs %d ns, %d packets received; want one program per hook adding up, egress running", run.Config, run.Round, w.Programs, w.BPFHooks, w.BPFRuns, w.BPFNs, w.Load.FwdRxPackets)
			}
		} else if len(w.BPFHooks) != 0 {
			t.Errorf("%s round %d: BPF run time by hook %+v, but it attaches no program", run.Config, run.Round, w.BPFHooks)
		}
		if run.Config == ProgEmpty {
			continue
		}
		if !strings.HasPrefix(w.Stopped, "exited after SIG") || strings.Contains(w.Stopped, "left") {
			t.Errorf("%s round %d: stopped %q", run.Config, run.Round, w.Stopped)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(os.TempDir(), "rttscope-bench-capture-*")); len(m) > len(capBefore) {
		t.Errorf("capture directories left behind: %v (before: %v)", m, capBefore)
	}
	noNewNamespaces(t, "rttmon", nsBefore)
}

// Each mode's figures against the other build's: one ratio per mode and
// metric that both builds have, none for configurations without a pair.
func TestAddAgainstPrev(t *testing.T) {
	r := &Result{Checks: map[string]uint64{}}
	add := func(cfg, metric string, vals ...float64) {
		s := r.series(GroupMonitor, "tcp-1000-flows", cfg, "", metric, "", "")
		for _, v := range vals {
			s.Add(v)
		}
	}
	add(ProgNone, MetricFwdPPS, 110, 111, 109, 110, 110)
	add("rttscope-aggregated", MetricBPFNetNsPerPkt, 90, 91, 89, 90, 90)
	add(prevConfig(ModeAggregated), MetricBPFNetNsPerPkt, 100, 101, 99, 100, 100)
	add("rttscope-aggregated", MetricFwdPPS, 100, 100, 100, 100, 100)
	add(prevConfig(ModeAggregated), MetricFwdPPS, 100, 100, 100, 100, 100)
	add("rttscope-sampled", MetricBPFNetNsPerPkt, 80, 80, 80, 80, 80) // no pair
	r.Finalize()
	addAgainstPrev(r, []string{ModeAggregated, ModeSampled})
	got := map[string]Derived{}
	for _, d := range r.Derived {
		got[d.Config+" "+d.Name] = d
	}
	if len(got) != 2 {
		t.Fatalf("derived %+v, want the two metrics of the aggregated pair", r.Derived)
	}
	ns := got["rttscope-aggregated bpf_net_ns_per_packet_vs_prev"]
	if math.Abs(ns.Value-0.9) > 1e-9 || !(ns.Low <= ns.Value && ns.Value <= ns.High) || ns.High >= 1 {
		t.Errorf("ns ratio %+v, want 0.9 with an interval under 1", ns)
	}
	if pps := got["rttscope-aggregated "+MetricFwdPPS+"_vs_prev"]; math.Abs(pps.Value-1) > 1e-9 {
		t.Errorf("packets/s ratio %+v, want 1", pps)
	}
}

// A monitor's packets/s and BPF ns per packet at each hook against the
// empty program's: the ratio of means with a bootstrap interval, for every
// configuration but the two baselines, and per hook only for monitors
// with programs there.
func TestAddAgainstEmpty(t *testing.T) {
	r := &Result{Checks: map[string]uint64{}}
	add := func(cfg, metric string, vals ...float64) {
		s := r.series(GroupMonitor, "tcp-1000-flows", cfg, "", metric, "", "")
		for _, v := range vals {
			s.Add(v)
		}
	}
	add(ProgNone, MetricFwdPPS, 110, 111, 109, 110, 110)
	add(ProgEmpty, MetricFwdPPS, 100, 101, 99, 100, 100)
	add("rttscope-aggregated", MetricFwdPPS, 95, 96, 94, 95, 95)
	add(ProgEmpty, MetricBPFNsPerPktEgress, 30, 31, 29, 30, 30)
	add("rttscope-aggregated", MetricBPFNsPerPktEgress, 60, 62, 58, 60, 60)
	add(ProgEmpty, MetricBPFNsPerPktIngress, 40, 41, 39, 40, 40)
	add("rttscope-aggregated", MetricBPFNsPerPktIngress, 100, 103, 97, 100, 100)
	add(ToolTcpdump, MetricFwdPPS, 90, 91, 89, 90, 90)
	r.Finalize()
	addAgainstEmpty(r)
	want := map[string]float64{
		"rttscope-aggregated packets_per_s_vs_empty":                    0.95,
		"rttscope-aggregated " + MetricBPFNsPerPktEgress + "_vs_empty":  2,
		"rttscope-aggregated " + MetricBPFNsPerPktIngress + "_vs_empty": 2.5,
		ToolTcpdump + " packets_per_s_vs_empty":                         0.9,
	}
	if len(r.Derived) != len(want) {
		t.Fatalf("derived %+v, want %v (the monitors', not the baselines')", r.Derived, want)
	}
	for _, d := range r.Derived {
		v, ok := want[d.Config+" "+d.Name]
		if !ok || math.Abs(d.Value-v) > 1e-9 || !(d.Low <= d.Value && d.Value <= d.High) || (v < 1) != (d.High < 1) {
			t.Errorf("derived %+v, want %v with an interval around it, on the same side of 1", d, v)
		}
	}
}

// With --bpf-stats=false the programs run without the accounting: the
// study reports throughput and busy CPU per packet, no BPF figures, and
// refuses to run while something keeps the accounting on.
func TestMonitorStudyStatsOff(t *testing.T) {
	testutil.RequireRoot(t)
	accounting := func() bool {
		r, err := newStatsResidual()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Close() }() // a loaded program; nothing attached
		on, err := r.accounting()
		if err != nil {
			t.Fatal(err)
		}
		return on
	}
	if accounting() {
		t.Skip("the kernel accounts BPF run time already (kernel.bpf_stats_enabled=1 or another process holds BPF_ENABLE_STATS): a run without it cannot be made now")
	}
	nsBefore := namespaces("rttmon")
	bin, cleanup, err := testutil.Build("github.com/rttscope/rttscope/cmd/rttscope")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	o := DefaultMonitorOptions()
	o.Method, o.Flows, o.Modes, o.MonitorBinary, o.Tcpdump, o.BPFStats = fastMethod(), nil, []string{ModeAggregated}, bin, false, false
	o.Method.Warmup, o.Method.WarmupRounds, o.Method.Reps = 300*time.Millisecond, 0, 2
	res, err := RunMonitor(context.Background(), o)
	if err != nil && strings.Contains(err.Error(), "accounts BPF run time") {
		t.Skipf("another process turned the accounting on during the run: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkStudy(t, res, o.Method)
	cas := res.Settings.Study.Cases[0]
	for _, cfg := range []string{ProgNone, modeConfig(ModeAggregated), ProgEmpty} {
		if s := res.Lookup(seriesID(GroupMonitor, cas, cfg, "", MetricBusyNsPerPkt)); s == nil || !(s.Summary.Min > 0) {
			t.Errorf("%s: busy CPU per packet %+v, want > 0 in every window", cfg, s)
		}
		for _, m := range []string{MetricBPFNsPerPkt, MetricBPFNetNsPerPkt, MetricToolCPUShare, MetricToolCPUShareNet} {
			if s := res.Lookup(seriesID(GroupMonitor, cas, cfg, "", m)); s != nil && s.Summary.N > 0 {
				t.Errorf("%s: %s %v without the accounting", cfg, m, s.Values)
			}
		}
	}
	if !strings.HasPrefix(res.Settings.Study.Details["bpf_stats"], "off") {
		t.Errorf("the report does not say the accounting was off: %q", res.Settings.Study.Details["bpf_stats"])
	}
	noNewNamespaces(t, "rttmon", nsBefore)

	// A process holding BPF_ENABLE_STATS, which the sysctl does not show.
	stats, err := telemetry.EnableBPFStats()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stats.Close() }() // the accounting back off
	if _, err := RunMonitor(context.Background(), o); err == nil || !strings.Contains(err.Error(), "accounts BPF run time") {
		t.Errorf("a run with the accounting held on by a process: %v, want the refusal", err)
	}
	noNewNamespaces(t, "rttmon", nsBefore)
}
