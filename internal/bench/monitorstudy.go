package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/telemetry"
)

// `rttscope bench monitor` (seed 000 part 4): what watching a router's
// interface costs, for rttscope in each mode and for other monitors. The
// lab's middlebox forwards the traffic of each case (TCP with 1, 1,000,
// 10,000 flows; small UDP datagrams); every configuration runs one monitor
// on its server-facing interface: nothing (the baseline), rttscope
// per-sample, sampled, aggregated, flow summaries, tcpdump writing a
// capture, and the --external commands.

// GroupMonitor is the group of the monitor study's series.
const GroupMonitor = "monitor"

// Metrics of the monitor study (besides the load phase's).
const (
	MetricBPFNsPerPkt  = "bpf_ns_per_packet"  // bpf_stats run time of the interface's programs / packets through it
	MetricSamplesPerS  = "samples_per_s"      // what the monitor reported per second
	MetricLostPerS     = "lost_per_s"         // samples it lost (ring buffer/map full, kernel drops) per second
	MetricOutputBPS    = "output_bytes_per_s" // bytes the monitor wrote (capture file or stdout)
	MetricToolCPUShare = "monitor_cpu_share"  // (BPF run time + the monitor's processes) / busy CPU time
	MetricBusyNsPerPkt = "busy_ns_per_packet" // busy CPU time / packets through the interface: everything's cost per packet
	// The same two less bpf_stats' residual per run (statsresidual.go):
	// what the programs cost where the accounting is off.
	MetricBPFNetNsPerPkt  = "bpf_net_ns_per_packet"
	MetricToolCPUShareNet = "monitor_cpu_share_net"
	// bpf_ns_per_packet split by direction: the run time of the
	// programs at one hook / the packets the interface sent (egress) or
	// received (ingress). On the lab's router the egress carries the data
	// toward the server and the ingress its ACKs, so a monitor's figure
	// over the empty program's is issue 15's per-hook ratio on a busy
	// path (the steps lab's is on sparse traffic).
	MetricBPFNsPerPktEgress  = "bpf_ns_per_packet_egress"
	MetricBPFNsPerPktIngress = "bpf_ns_per_packet_ingress"
)

// minHookPackets is the fewest packets in one direction of a window for
// its per-hook figure.
const minHookPackets = 1000

func init() {
	registerDirections(LowerFaster, MetricBPFNsPerPkt, MetricBPFNetNsPerPkt, MetricBPFNsPerPktEgress, MetricBPFNsPerPktIngress)
}

// MonitorOptions configure `rttscope bench monitor`.
type MonitorOptions struct {
	Name   string
	Method Method
	Flows  []int // TCP cases
	UDP    bool
	// Modes are rttscope's modes (per-sample, sampled, aggregated,
	// flow-summary).
	Modes   []string
	Tcpdump bool
	// Empty adds an empty tc program on both hooks as a configuration
	// (monitorempty.go).
	Empty     bool
	Externals []External
	// ExternalStart is how long an external monitor gets to start (load
	// and attach its programs) before its window's warm-up.
	ExternalStart time.Duration
	// ExternalAttach, when > 0, then waits up to this long for BPF
	// programs to appear on the interface (monitors such as ePPing that
	// take seconds to load); none by then is a set-up error.
	ExternalAttach time.Duration
	WriteSize      int
	TCPRate        uint64 // aggregate bytes/s, 0 = as fast as TCP goes
	// ECN has the TCP endpoints negotiate ECN (net.ipv4.tcp_ecn=1 in the
	// client's and the servers' namespaces): the data segments carry
	// ECT(0), as from hosts with ECN on, and the ACKs Not-ECT.
	ECN        bool
	UDPPayload int
	UDPPPS     uint64
	UDPSenders int
	// UDPIPv6 sends the UDP flood over IPv6 (the router's IPv6 path).
	UDPIPv6 bool
	// BPFStats turns the kernel's BPF run-time accounting on for the run
	// (the BPF ns and CPU share figures need it). Off, every program runs
	// as in production, without the accounting's clock reads, and the
	// throughput and busy CPU per packet are what monitoring costs there;
	// the run then refuses to start while the accounting is on anyway
	// (kernel.bpf_stats_enabled, or a process holding BPF_ENABLE_STATS).
	BPFStats bool
	// MonitorBinary is the rttscope binary (default this executable).
	MonitorBinary string
	// CompareBinary, when set, is another rttscope build (an earlier
	// one): each mode also runs with it, as configuration MODE + "-prev",
	// and every monitor figure of the mode gets its ratio to that build's
	// (monitorcompare.go).
	CompareBinary string
	Progress      io.Writer
}

// modeConfig names the configuration of rttscope in mode.
func modeConfig(mode string) string { return ProgRttscope + "-" + mode }

// MonitorModes are rttscope's modes in the monitor study.
var MonitorModes = []string{ModePerSample, ModeSampled, ModeAggregated, ModeFlowSummary}

// DefaultMonitorOptions: 1, 1,000 and 10,000 flows and UDP; every mode,
// tcpdump.
func DefaultMonitorOptions() MonitorOptions {
	m := DefaultMethod()
	m.Duration = 2 * time.Second
	// No pinning: the monitors (and this process's sinks and counters)
	// starve on a CPU saturated by forwarding, which stretches every
	// window and delays attaching.
	return MonitorOptions{
		Name: "monitor", Method: m, Flows: []int{1, 1000, 10000}, UDP: true, Modes: MonitorModes, Tcpdump: true, Empty: true, BPFStats: true,
		WriteSize: 1448, UDPPayload: 64, UDPSenders: 1, ExternalStart: 3 * time.Second,
	}
}

// MonitorWindow is the raw record of one window.
type MonitorWindow struct {
	Load    LoadWindow `json:"counters"`
	BPFRuns uint64     `json:"bpf_run_cnt"`
	BPFNs   uint64     `json:"bpf_run_time_ns"`
	// BPFResidualNs is bpf_stats' residual per run: the least measured
	// before this window and any earlier one (statsresidual.go).
	BPFResidualNs float64 `json:"bpf_stats_residual_ns"`
	Programs      int     `json:"programs_attached"`
	ToolTicks     uint64  `json:"tool_cpu_ticks"`
	// ToolCPUSeconds is the tool's CPU time in the window: the threads'
	// exact run times when ToolCPUExact, else ToolTicks in seconds.
	ToolCPUSeconds float64 `json:"tool_cpu_s"`
	ToolCPUExact   bool    `json:"tool_cpu_exact"`
	Samples        uint64  `json:"samples_total"`
	Lost           uint64  `json:"lost_total"`
	OutBytes       uint64  `json:"output_bytes_total"`
	OutLines       uint64  `json:"output_lines_total"`
	Lifetime       float64 `json:"tool_lifetime_s"`
	Stopped        string  `json:"stopped,omitempty"`
	// StartSeconds is from starting the monitor to its programs being
	// attached (rttscope; externals with --external-attach), StopSeconds
	// from the stop signal to its exit.
	StartSeconds float64 `json:"start_s,omitempty"`
	StopSeconds  float64 `json:"stop_s,omitempty"`
	CPUPinned    cpuUse  `json:"cpu"`
	ToolStderr   string  `json:"stderr,omitempty"`
	// BPFHooks are the run counts and times by hook (egress, ingress).
	BPFHooks map[string]MonitorHookRun `json:"bpf_hooks,omitempty"`
}

// MonitorHookRun is bpf_stats' reading of one hook's programs in a
// window.
type MonitorHookRun struct {
	Runs uint64 `json:"run_cnt"`
	Ns   uint64 `json:"run_time_ns"`
}

// monState is the state of a monitor study run.
type monState struct {
	o        *MonitorOptions
	lb       *loadBench
	tool     monitorTool
	started  time.Time
	attached time.Time // when its programs were found (or started, without)
	progs    []hookProgram
	capDir   string
	residual *statsResidual
}

// RunMonitor runs the monitor study.
func RunMonitor(ctx context.Context, o MonitorOptions) (_ *Result, err error) {
	if err := checkRoot(o.Progress); err != nil {
		return nil, err
	}
	if err := o.Method.validate(); err != nil {
		return nil, err
	}
	if len(o.Flows) == 0 && !o.UDP {
		return nil, errors.New("monitor: no traffic case")
	}
	for _, n := range o.Flows {
		if n < 1 || n > 60000 {
			return nil, fmt.Errorf("monitor: flow counts must be between 1 and 60000, got %d", n)
		}
	}
	if o.MonitorBinary == "" {
		if o.MonitorBinary, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	lo := DefaultOptions()
	lo.LoadWriteSize, lo.LoadTCPRate, lo.UDPPayload, lo.UDPPPS, lo.UDPSenders = o.WriteSize, o.TCPRate, o.UDPPayload, o.UDPPPS, o.UDPSenders
	lo.UDPIPv6 = o.UDPIPv6
	lo.Progress = o.Progress
	if len(o.Flows) > 0 {
		bins, cleanup, err := buildLoadPrograms()
		if err != nil {
			return nil, err
		}
		defer cleanup()
		lo.loadBins = bins
	}
	statsNote, restore, err := monitorBPFStats(o.BPFStats)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := restore(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	l, err := lab.New(ctx, lab.Config{Prefix: "rttmon", Paths: []lab.PathSpec{{}}})
	if err != nil {
		return nil, err
	}
	defer closeLab(l, &err)
	if o.ECN {
		if err := enableECN(l); err != nil {
			return nil, err
		}
	}
	lb, err := newLoadBench(&lo, l, o.MonitorBinary)
	if err != nil {
		return nil, err
	}
	capDir, err := os.MkdirTemp("", "rttscope-bench-capture-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(capDir) }() // temporary captures; nothing to report
	residual, err := newStatsResidual()
	if err != nil {
		return nil, err
	}
	defer func() { _ = residual.Close() }() // a loaded program; nothing attached
	ms := &monState{o: &o, lb: lb, capDir: capDir, residual: residual}
	// A first reading before any traffic, on a quiet machine (or, with
	// the accounting off, the check that it is).
	if _, err := ms.statsBeforeWindow(); err != nil {
		return nil, err
	}

	st := &Study{
		Group:  GroupMonitor,
		Title:  "rttscope bench monitor: the cost of monitoring a router's interface (rttscope's modes, tcpdump, external monitors)",
		Method: o.Method,
		Metrics: []MetricSpec{
			{MetricFwdMbit, "Mbit/s", "bytes the router sent toward the server per second (its server-facing interface)", true},
			{MetricFwdPPS, "packets/s", "packets through the monitored interface per second, both ways", false},
			{MetricBusyCores, "CPUs", "busy CPU time per second of the measured CPUs", false},
			{MetricBusyNsPerPkt, "ns", "busy CPU time of the measured CPUs / packets through the monitored interface: the traffic's, the router's and the monitor's work per packet (with --bpf-stats=false the monitor's cost where the accounting is off)", true},
			{MetricSoftirqCores, "CPUs", "softirq CPU time per second of the measured CPUs", false},
			{MetricMonitorCores, "CPUs", "CPU time per second of the monitor's processes (their threads' run times from schedstat; utime+stime in clock ticks when a thread exited in the window)", true},
			{MetricToolCPUShare, "share", "(BPF run time on the interface + the monitor's processes) / busy CPU time of the measured CPUs", true},
			{MetricBPFNsPerPkt, "ns", "bpf_stats run time of every program on the interface / packets through it (0 for monitors without BPF)", true},
			{MetricToolCPUShareNet, "share", "monitor_cpu_share without bpf_stats' residual: (BPF run time - residual x runs + the monitor's processes) / (busy CPU time - residual x runs)", true},
			{MetricBPFNetNsPerPkt, "ns", "(bpf_stats run time - residual x runs) / packets; the residual is an empty program's reported run time per run under BPF_PROG_TEST_RUN, the least measured before the run and before every window so far", true},
			{MetricBPFNsPerPktEgress, "ns", "bpf_stats run time of the programs at TCX/tc egress / packets the interface sent (the data toward the server); none under 1,000 packets a window", false},
			{MetricBPFNsPerPktIngress, "ns", "bpf_stats run time of the programs at TCX/tc ingress and XDP / packets the interface received (the server's ACKs); none under 1,000 packets a window", false},
			{MetricSamplesPerS, "samples/s", "rttscope: RTT records (per-sample, sampled), aggregated samples (aggregated), flow records (flow-summary); others: output lines; over the monitor's life", true},
			{MetricLostPerS, "lost/s", "rttscope: ring buffer, timestamp/flow/prefix map full; tcpdump: packets dropped by kernel; over the monitor's life", false},
			{MetricOutputBPS, "bytes/s", "capture file (tcpdump) or stdout+stderr bytes (externals) over the monitor's life", false},
		},
		Details: map[string]string{
			"topology":  "lab with a direct path: client ─veth─ router (mb-cli | mb-srv0) ─veth─ server, kernel forwarding, every veth without GRO/TSO; the monitors watch mb-srv0",
			"rttscope":  "rttscope monitor --netns ROUTER -i mb-srv0 --tc-mode tcx -F jsonl --stats-interval 1s -w FILE, plus: per-sample --rate-limit 0; sampled: defaults; aggregated: --aggregate 1s; flow-summary: --flow-summary --flow-summary-interval 1s",
			"tcpdump":   "tcpdump -n -i mb-srv0 -w FILE (full packets), stopped with SIGINT",
			"bpf_stats": statsNote,
			"traffic": fmt.Sprintf("TCP flows %v (writes of %d B, rate %s, ECN %v), UDP %v (%d B payload, %d sender(s), %s)",
				o.Flows, o.WriteSize, rateText(o.TCPRate*8), o.ECN, o.UDP, o.UDPPayload, o.UDPSenders, udpFamily(o.UDPIPv6)),
		},
	}
	st.Configs = append(st.Configs, StudyConfig{Name: ProgNone})
	for _, m := range o.Modes {
		mode := m
		st.Configs = append(st.Configs, StudyConfig{Name: modeConfig(mode), Setup: func(ctx context.Context) (func() error, error) {
			return ms.setupRttscope(ctx, lb.bin, mode)
		}})
		if o.CompareBinary != "" {
			st.Configs = append(st.Configs, StudyConfig{Name: prevConfig(mode), Setup: func(ctx context.Context) (func() error, error) {
				return ms.setupRttscope(ctx, o.CompareBinary, mode)
			}})
		}
	}
	if o.CompareBinary != "" {
		st.Details["prev"] = "rttscope-MODE-prev: MODE run by " + o.CompareBinary + " with the same arguments; *_vs_prev: this build's figure over that one's"
	}
	if o.Empty {
		st.Configs = append(st.Configs, StudyConfig{Name: ProgEmpty, Setup: ms.setupEmpty})
		st.Details[ProgEmpty] = "an empty tc program (return TC_ACT_UNSPEC) attached by the bench to TCX egress and ingress of the watched interface, one instance per hook: what any tc-based monitor pays before doing anything (hook dispatch, program call, bpf_stats' accounting)"
	}
	if o.Tcpdump {
		cfg := StudyConfig{Name: ToolTcpdump}
		if _, err := exec.LookPath("tcpdump"); err != nil {
			cfg.Unavailable = "tcpdump is not installed"
		} else {
			cfg.Setup = func(ctx context.Context) (func() error, error) {
				capture := fmt.Sprintf("%s/capture-%d.pcap", ms.capDir, time.Now().UnixNano())
				return ms.setupProc("tcpdump -n -i "+lb.ifname+" -w "+capture, capture)
			}
		}
		st.Configs = append(st.Configs, cfg)
	}
	for _, e := range o.Externals {
		cmd := strings.ReplaceAll(e.Cmd, "{iface}", lb.ifname)
		st.Configs = append(st.Configs, StudyConfig{Name: e.Name, Setup: func(ctx context.Context) (func() error, error) {
			teardown, err := ms.setupProc(cmd, "")
			if err != nil {
				return nil, err
			}
			if err := ms.waitStarted(ctx, o.ExternalStart); err != nil {
				_ = teardown() // the start error is the one to report
				return nil, err
			}
			if o.ExternalAttach > 0 {
				if ms.progs, err = ms.waitPrograms(ctx, o.ExternalAttach); err != nil {
					_ = teardown() // the attach error is the one to report
					return nil, err
				}
				ms.attached = time.Now()
			}
			return teardown, nil
		}})
		st.Details["external "+e.Name] = cmd + fmt.Sprintf(" (run with sh -c in the router's namespace, its own process group, %v to start before the window's warm-up; stopped with SIGINT, then SIGTERM, then SIGKILL)", o.ExternalStart)
	}
	for _, n := range o.Flows {
		sc := loadScenario{tcpScenario(n), n}
		st.Cases = append(st.Cases, StudyCase{Name: sc.name, Start: ms.starter(sc)})
	}
	if o.UDP {
		st.Cases = append(st.Cases, StudyCase{Name: LoadScenarioUDP, Start: ms.starter(loadScenario{LoadScenarioUDP, 0})})
	}
	st.Window = func(ctx context.Context, _ StudyCase, _ StudyConfig) (map[string]float64, any, error) {
		return ms.window(ctx)
	}
	res, err := RunStudy(ctx, o.Name, st, o.Progress)
	if res != nil && o.Empty {
		addAgainstEmpty(res)
	}
	if res != nil && o.CompareBinary != "" {
		addAgainstPrev(res, o.Modes)
	}
	return res, err
}

func (ms *monState) starter(sc loadScenario) func(context.Context) (func() error, error) {
	return func(ctx context.Context) (func() error, error) {
		if err := ms.lb.startTraffic(ctx, sc); err != nil {
			_ = ms.lb.stopTraffic() // the start error is the one to report
			return nil, err
		}
		return ms.lb.stopTraffic, nil
	}
}

// teardown stops the current tool if the window did not.
func (ms *monState) teardown() error {
	for _, p := range ms.progs {
		p.prog.Close()
	}
	ms.progs = nil
	if ms.tool == nil {
		return nil
	}
	t := ms.tool
	ms.tool = nil
	_, err := t.stop()
	return err
}

// noteStale records the programs on the interface before a monitor
// starts: a stopped monitor's links go away asynchronously, and the new
// monitor's programs are the others.
func (ms *monState) noteStale() {
	ms.lb.stale = map[ebpf.ProgramID]bool{}
	progs, err := attachedPrograms(ms.lb.lab.Middlebox.Name, ms.lb.ifidx)
	if err != nil {
		return
	}
	for _, p := range progs {
		if id, ok := programID(p.prog); ok {
			ms.lb.stale[id] = true
		}
		_ = p.prog.Close() // only its ID was needed
	}
}

func programID(p *ebpf.Program) (ebpf.ProgramID, bool) {
	info, err := p.Info()
	if err != nil {
		return 0, false
	}
	return info.ID()
}

func (ms *monState) setupRttscope(ctx context.Context, bin, mode string) (func() error, error) {
	ms.noteStale()
	m, err := ms.lb.startMonitorBin(bin, mode)
	if err != nil {
		return nil, err
	}
	ms.tool, ms.started = &rttscopeTool{m: m, mode: mode}, time.Now()
	eg, in, err := ms.lb.waitAttached(ctx, m)
	if err != nil {
		_ = ms.teardown() // the attach error is the one to report
		return nil, err
	}
	ms.progs, ms.attached = []hookProgram{{hookEgress, eg}, {hookIngress, in}}, time.Now()
	return ms.teardown, nil
}

func (ms *monState) setupProc(command, capture string) (func() error, error) {
	ms.noteStale()
	t, err := startProcTool(ms.lb.lab.Middlebox.Name, command, capture)
	if err != nil {
		return nil, err
	}
	ms.tool, ms.started, ms.attached = t, time.Now(), time.Now()
	return ms.teardown, nil
}

// waitStarted gives an external monitor d to start; one that exits in
// that time failed.
func (ms *monState) waitStarted(ctx context.Context, d time.Duration) error {
	t, ok := ms.tool.(*procTool)
	if !ok {
		return nil
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if t.exited.Load() {
			return fmt.Errorf("exited at start (stderr: %s)", truncate(t.stderrText(), 500))
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// freshPrograms are the programs on the interface that were not there
// before the current monitor started.
func (ms *monState) freshPrograms() ([]hookProgram, error) {
	progs, err := attachedPrograms(ms.lb.lab.Middlebox.Name, ms.lb.ifidx)
	if err != nil {
		return nil, err
	}
	out := progs[:0]
	for _, p := range progs {
		if id, ok := programID(p.prog); ok && ms.lb.stale[id] {
			_ = p.prog.Close() // a stopped monitor's
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// waitPrograms waits up to d for BPF programs on the monitored interface.
func (ms *monState) waitPrograms(ctx context.Context, d time.Duration) ([]hookProgram, error) {
	deadline := time.Now().Add(d)
	for {
		progs, err := ms.freshPrograms()
		if err != nil || len(progs) > 0 {
			return progs, err
		}
		if t, ok := ms.tool.(*procTool); ok && t.exited.Load() {
			return nil, fmt.Errorf("exited before attaching (stderr: %s)", truncate(t.stderrText(), 500))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no BPF program on %s within %v", ms.lb.ifname, d)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// window measures; it stops the tool at its end, so that what the tool
// reports at exit (tcpdump's drops, rttscope's last records) counts.
func (ms *monState) window(ctx context.Context) (map[string]float64, any, error) {
	lb := ms.lb
	// Programs an external monitor attached (rttscope's were found when
	// it attached); they are looked up after the warm-up.
	if ms.tool != nil && ms.progs == nil {
		var err error
		if ms.progs, err = ms.freshPrograms(); err != nil {
			return nil, nil, err
		}
	}
	cpus := ms.o.Method.CPUs
	// The CPU, BPF and tool readings are taken together, apart from the
	// slower interface and sink counters (lb.snap): each set of rates
	// uses its own interval.
	type fast struct {
		t      time.Time
		cpu    cpuTimes
		bpf    bpfRun
		byHook map[string]bpfRun
		tool   procCPU
	}
	readFast := func() fast {
		f := fast{cpu: readCPUTimesOf(cpus)}
		f.bpf, f.byHook = bpfTotals(ms.progs)
		if ms.tool != nil {
			f.tool = ms.tool.cpu()
		}
		f.t = time.Now()
		return f
	}
	// Outside the window: its ~10 ms of test runs are not the monitor's.
	residual, err := ms.statsBeforeWindow()
	if err != nil {
		return nil, nil, err
	}
	f0 := readFast()
	s0, err := lb.snap(nil, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := sleepCtx(ctx, ms.o.Method.Duration); err != nil {
		return nil, nil, err
	}
	f1 := readFast()
	s1, err := lb.snap(nil, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	sec := s1.tIf.Sub(s0.tIf).Seconds()
	fsec := f1.t.Sub(f0.t).Seconds()
	bpf := f1.bpf.minus(f0.bpf)
	w := MonitorWindow{BPFRuns: bpf.runs, BPFNs: bpf.ns, BPFResidualNs: residual, Programs: len(ms.progs), ToolTicks: f1.tool.ticks - f0.tool.ticks, CPUPinned: cpuUseBetween(f0.cpu, f1.cpu, fsec)}
	w.Load = LoadWindow{Seconds: sec, FwdTxPackets: s1.srv.TxPackets - s0.srv.TxPackets, FwdTxBytes: s1.srv.TxBytes - s0.srv.TxBytes,
		FwdRxPackets: s1.srv.RxPackets - s0.srv.RxPackets, FwdRxBytes: s1.srv.RxBytes - s0.srv.RxBytes, SinkBytes: s1.sinkB - s0.sinkB}
	w.ToolCPUSeconds, w.ToolCPUExact = cpuSecondsBetween(f0.tool, f1.tool)
	for hook, r := range f1.byHook {
		if w.BPFHooks == nil {
			w.BPFHooks = map[string]MonitorHookRun{}
		}
		d := r.minus(f0.byHook[hook])
		w.BPFHooks[hook] = MonitorHookRun{Runs: d.runs, Ns: d.ns}
	}
	pkts := float64(w.Load.FwdTxPackets + w.Load.FwdRxPackets)
	v := map[string]float64{
		MetricFwdMbit:      float64(w.Load.FwdTxBytes) * 8 / sec / 1e6,
		MetricFwdPPS:       pkts / sec,
		MetricBusyCores:    w.CPUPinned.Busy,
		MetricSoftirqCores: w.CPUPinned.Softirq,
	}
	if pkts > 0 {
		v[MetricBusyNsPerPkt] = w.CPUPinned.Busy * 1e9 / (pkts / sec)
	}
	toolCores, monitored := 0.0, ms.tool != nil || len(ms.progs) > 0
	if ms.tool != nil {
		tool := ms.tool
		ms.tool = nil
		stopped := time.Now()
		how, err := tool.stop()
		if err != nil {
			return nil, nil, err
		}
		w.StopSeconds = time.Since(stopped).Seconds()
		w.StartSeconds = ms.attached.Sub(ms.started).Seconds()
		life := stopped.Sub(ms.started).Seconds()
		c := tool.counters()
		w.Samples, w.Lost, w.OutBytes, w.OutLines, w.Lifetime, w.Stopped = c.samples, c.lost, c.outBytes, c.outLines, life, how
		if pt, ok := tool.(*procTool); ok {
			w.ToolStderr = truncate(pt.stderrText(), 2000)
		}
		toolCores = w.ToolCPUSeconds / fsec
		v[MetricMonitorCores] = toolCores
		samples := c.samples
		if !c.haveSamples {
			samples = c.outLines
		}
		v[MetricSamplesPerS] = float64(samples) / life
		if c.haveLost {
			v[MetricLostPerS] = float64(c.lost) / life
		}
		v[MetricOutputBPS] = float64(c.outBytes) / life
	}
	// The cost metrics: of a monitor (its processes and whatever programs
	// it attached) or of programs alone (the empty configuration); the
	// BPF part only where the accounting is on.
	if monitored && ms.o.BPFStats {
		if w.CPUPinned.Busy > 0 {
			v[MetricToolCPUShare] = (float64(w.BPFNs)/1e9/fsec + toolCores) / w.CPUPinned.Busy
		}
		if share, ok := netCPUShare(w.BPFNs, w.BPFRuns, residual, fsec, toolCores, w.CPUPinned.Busy); ok {
			v[MetricToolCPUShareNet] = share
		}
		// BPF time per packet: both over their own intervals, scaled
		// to the same second.
		v[MetricBPFNsPerPkt], v[MetricBPFNetNsPerPkt] = 0, 0
		if pkts > 0 {
			v[MetricBPFNsPerPkt] = float64(w.BPFNs) / fsec / (pkts / sec)
			v[MetricBPFNetNsPerPkt] = netRunTimeNs(w.BPFNs, w.BPFRuns, residual) / fsec / (pkts / sec)
		}
		for _, h := range []struct {
			metric, hook string
			pkts         uint64
		}{{MetricBPFNsPerPktEgress, hookEgress, w.Load.FwdTxPackets}, {MetricBPFNsPerPktIngress, hookIngress, w.Load.FwdRxPackets}} {
			// A direction with a handful of packets (ARP, IPv6
			// router solicitations in a one-way UDP case) gives a
			// few cold runs, not a per-packet cost.
			if r, ok := w.BPFHooks[h.hook]; ok && h.pkts >= minHookPackets {
				v[h.metric] = float64(r.Ns) / fsec / (float64(h.pkts) / sec)
			}
		}
	}
	return v, w, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// monitorBPFStats sets up the BPF run-time accounting for a run: on (as
// every bench phase has it) or, with on false, left off, so that the
// programs run as in production (statsBeforeWindow checks that it stays
// off). note says which for the report; restore puts back what was
// changed.
func monitorBPFStats(on bool) (note string, restore func() error, err error) {
	if !on {
		return "off (--bpf-stats=false): the programs run without the accounting, as in production; no BPF ns or CPU share figures: busy_ns_per_packet and the throughput carry the monitors' cost", func() error { return nil }, nil
	}
	restore, method, err := telemetry.EnableBPFStatsOrSysctl()
	if err != nil {
		return "", nil, err
	}
	return "on for the whole run (via " + method + "); it adds its accounting to every program, alike in every configuration with BPF", restore, nil
}

// statsBeforeWindow is bpf_stats' residual per run before a window, or,
// with --bpf-stats=false, the check that the accounting is off.
func (ms *monState) statsBeforeWindow() (float64, error) {
	if ms.o.BPFStats {
		return ms.residual.measure()
	}
	on, err := ms.residual.accounting()
	if err != nil {
		return 0, err
	}
	if on {
		return 0, errors.New("--bpf-stats=false: the kernel accounts BPF run time (sysctl kernel.bpf_stats_enabled=1, or a process holding BPF_ENABLE_STATS such as `rttscope monitor --bpf-stats`); set the sysctl to 0 or stop that process, or drop --bpf-stats=false")
	}
	return 0, nil
}

// enableECN has the lab's TCP endpoints (the client and every server)
// negotiate ECN on the connections they open and accept.
func enableECN(l *lab.Lab) error {
	for _, n := range append([]*lab.Node{l.Client}, l.Servers...) {
		if err := n.SetSysctl("net.ipv4.tcp_ecn", "1"); err != nil {
			return fmt.Errorf("--ecn: net.ipv4.tcp_ecn=1 in namespace %s: %w", n.Name, err)
		}
	}
	return nil
}
