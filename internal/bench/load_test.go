package bench

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMonitorArgs(t *testing.T) {
	for mode, want := range map[string]string{
		ModePerSample:   "--rate-limit 0",
		ModeAggregated:  "--aggregate 1s",
		ModeFlowSummary: "--flow-summary --flow-summary-interval 1s",
	} {
		if got := strings.Join(monitorArgs(mode), " "); !strings.Contains(got, want) {
			t.Errorf("monitorArgs(%s) = %q, want it to contain %q", mode, got, want)
		}
	}
	if got := strings.Join(monitorArgs(ModeSampled), " "); strings.Contains(got, "rate-limit") || strings.Contains(got, "aggregate") {
		t.Errorf("sampled mode must use the defaults, got %q", got)
	}
	if monitorArgs(ProgNone) != nil {
		t.Error("no monitor must have no arguments")
	}
}

// The reader follows the monitor's output file while it is written,
// including a record cut in two by the writer, until the monitor exits.
func TestMonitorOutputCounting(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "mon-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(f.Name(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	m := &monitorProc{path: f.Name(), exited: make(chan struct{})}
	in := strings.Join([]string{
		`{"timestamp":1,"src_ip":"10.0.0.1","rtt":1000,"min_rtt":900}`,
		`{"timestamp":2,"src_ip":"10.0.0.1","rtt":1100,"min_rtt":900}`,
		`{"timestamp":3,"flow_event":"opening","reason":"first_observation"}`,
		`{"timestamp":4,"type":"aggregate","ip_prefix":"10.0.0.0/24"}`,
		`{"timestamp":5,"type":"stats","packets":10,"rtt_events":2,"ringbuf_full":3}`,
	}, "\n") + "\n"
	cut := len(in) / 3
	if _, err := w.WriteString(in[:cut]); err != nil {
		t.Fatal(err)
	}
	m.readWG.Add(1)
	go m.read(f)
	time.Sleep(120 * time.Millisecond) // the reader meets the cut line
	if _, err := w.WriteString(in[cut:]); err != nil {
		t.Fatal(err)
	}
	close(m.exited)
	m.readWG.Wait()
	if m.rtt.Load() != 2 || m.flow.Load() != 1 || m.agg.Load() != 1 {
		t.Errorf("counted rtt %d, flow %d, aggregate %d; want 2, 1, 1", m.rtt.Load(), m.flow.Load(), m.agg.Load())
	}
	st := m.lastStats()
	if st == nil || st.Packets != 10 || st.RingbufFull != 3 || st.RTTEvents != 2 {
		t.Errorf("last stats = %+v", st)
	}
}

// synthLoad builds a finalized result with load and events series.
func synthLoad(none, agg []float64, drain float64) *Result {
	r := &Result{Checks: map[string]uint64{}, Settings: Settings{Load: &LoadSettings{}, Events: &EventsSettings{}}}
	sc := tcpScenario(targetAggFlows)
	for i := range none {
		for _, w := range []LoadWindow{
			{Scenario: sc, Flows: 1000, Mode: ProgNone, Seconds: 1, FwdTxBytes: uint64(none[i] * 1e6 / 8), BusyCores: 2},
			{Scenario: sc, Flows: 1000, Mode: ModeAggregated, Seconds: 1, FwdTxBytes: uint64(agg[i] * 1e6 / 8), BusyCores: 2, MonitorCores: 0.02,
				Egress: &HookCounters{RunCnt: 10, RunTimeNs: 10_000_000, NsPerRun: 1e6}, Ingress: &HookCounters{RunCnt: 10, RunTimeNs: 10_000_000, NsPerRun: 1e6}},
		} {
			r.LoadWindows = append(r.LoadWindows, w)
			(&loadBench{o: &Options{}}).record(r, w)
		}
	}
	r.EventsRuns = append(r.EventsRuns, EventsRun{Case: CaseEvDrainJSONL, Events: uint64(drain), Seconds: 1})
	r.series(GroupEvents, CaseEvDrainJSONL, ProgRttscope, "", MetricEventsPerS, "events/s", "").Add(drain)
	r.Finalize()
	r.Targets = evaluateTargets(r)
	return r
}

func TestTargets(t *testing.T) {
	r := synthLoad([]float64{1000, 1000, 1000}, []float64{980, 990, 985}, 2e6)
	if len(r.Targets) != 5 {
		t.Fatalf("%d targets, want 5", len(r.Targets))
	}
	agg, ev := r.Targets[0], r.Targets[1]
	if agg.Met == nil || !*agg.Met || math.Abs(agg.Value-1.5) > 1e-6 {
		t.Errorf("aggregated target: met %v, value %v; want met, 1.5%%", agg.Met, agg.Value)
	}
	// (10 ms + 10 ms of BPF + 20 ms of monitor) per s over 2 busy CPUs.
	if s := r.Lookup(seriesID(GroupLoad, tcpScenario(1000), ModeAggregated, "", MetricCPUShare)); s == nil || math.Abs(s.Summary.Median-0.02) > 1e-9 {
		t.Errorf("cpu share series = %+v, want median 0.02", s)
	}
	if strings.Contains(agg.Measured, "residual") {
		t.Errorf("without a test_run residual there is no net share: %s", agg.Measured)
	}
	// With bpf_stats' residual (500 us per run here, 10 runs per hook):
	// 10 of the 20 ms of BPF time are the residual, which also comes off
	// the busy time: (10 ms + 20 ms) / (2 s - 10 ms) = 1.5075 %.
	r.series(GroupTestRun, CaseStatsOn, ProgEmpty, "", MetricBPFNsPerRun, "ns", "").Add(500_000)
	r.Finalize()
	if m := evaluateTargets(r)[0].Measured; !strings.Contains(m, "(1.5% without bpf_stats' residual of 500000 ns per run") {
		t.Errorf("net share missing or wrong: %s", m)
	}
	if ev.Met == nil || !*ev.Met || ev.Value != 2e6 {
		t.Errorf("events target: met %v, value %v", ev.Met, ev.Value)
	}
	r = synthLoad([]float64{1000, 1000, 1000}, []float64{900, 950, 960}, 5e5)
	if m := r.Targets[0].Met; m == nil || *m {
		t.Errorf("a 5%% throughput cost must not meet the target")
	}
	if m := r.Targets[1].Met; m == nil || *m {
		t.Errorf("0.5M events/s must not meet the target")
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&buf, r); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	r.Machine.Date = "x"
	if err := PrintSummary(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NOT MET", "tcp-1000-flows", "aggregated"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, buf.String())
		}
	}
	if r := (&Result{}); len(evaluateTargets(r)) != 5 || evaluateTargets(r)[0].Met != nil || evaluateTargets(r)[4].Met != nil {
		t.Error("targets of an empty result must be 'not measured'")
	}
}

func TestCostTargets(t *testing.T) {
	r := &Result{Checks: map[string]uint64{}}
	add := func(group, cas, prog, hook string, base string, vals ...float64) {
		s := r.series(group, cas, prog, hook, MetricNsPerPacket, "ns", "")
		if base != "" {
			s.Baseline = seriesID(group, cas, base, hook, MetricNsPerPacket)
		}
		for _, v := range vals {
			s.Add(v)
		}
	}
	add(GroupLive, CaseTCPBulk, ProgEmpty, "egress", "", 100, 100, 100)
	add(GroupLive, CaseTCPBulk, ProgEmpty, "ingress", "", 100, 100, 100)
	add(GroupLive, CaseTCPBulk, ProgRttscope, "egress", ProgEmpty, 190, 200, 210)
	add(GroupLive, CaseTCPBulk, ProgRttscope, "ingress", ProgEmpty, 300, 300, 300)
	sc := tcpScenario(1)
	add(GroupLoad, sc, ModePerSample, "egress", "", 200, 200, 200)
	add(GroupLoad, sc, ModeAggregated, "egress", "", 210, 210, 210)
	add(GroupLoad, sc, ModePerSample, "ingress", "", 200, 200, 200)
	add(GroupLoad, sc, ModeAggregated, "ingress", "", 240, 240, 240)
	r.Finalize()
	ts := costTargets(r)
	if len(ts) != 3 {
		t.Fatalf("%d cost targets, want 3", len(ts))
	}
	for i, want := range []bool{true, false, false} {
		if ts[i].Met == nil || *ts[i].Met != want {
			t.Errorf("%s: met %v, want %v (%s)", ts[i].Name, ts[i].Met, want, ts[i].Measured)
		}
	}
	if math.Abs(ts[2].Value-1.2) > 1e-9 {
		t.Errorf("aggregated vs per-sample = %v, want the worse hook's 1.2", ts[2].Value)
	}
}

func TestNetRunTimeNs(t *testing.T) {
	for _, c := range []struct {
		ns, runs uint64
		residual float64
		want     float64
	}{
		{1000, 10, 36.5, 635},
		{1000, 10, 0, 1000},
		{1000, 0, 36.5, 1000},
		{300, 10, 36.5, 0}, // a residual above the reported time: never negative
	} {
		if got := netRunTimeNs(c.ns, c.runs, c.residual); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("netRunTimeNs(%d, %d, %v) = %v, want %v", c.ns, c.runs, c.residual, got, c.want)
		}
	}
}

func TestTargetsPaced(t *testing.T) {
	r := synthLoad([]float64{400, 400, 400}, []float64{400, 400, 400}, 2e6)
	r.Settings.Load.TCPRate = "400mbit"
	r.Targets = evaluateTargets(r)
	if r.Targets[0].Met != nil {
		t.Errorf("a paced run must give no throughput verdict, got met=%v", *r.Targets[0].Met)
	}
	if !strings.Contains(r.Targets[0].Caveat, "paced") {
		t.Errorf("caveat %q does not explain the pacing", r.Targets[0].Caveat)
	}
}
