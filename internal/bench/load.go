package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/nsrun"
	"github.com/rttscope/rttscope/internal/telemetry"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// The load phase: traffic through the lab's middlebox
// with many concurrent TCP flows, and a small-datagram UDP flood, each
// measured with no monitor and with `rttscope monitor` running as a
// separate process in three modes (per-sample, sampled, aggregated),
// interleaved and repeated.

// Monitor modes of the load phase. ProgNone (no monitor) is the baseline.
const (
	ModePerSample  = "per-sample" // --rate-limit 0: a timestamp per new TSval
	ModeSampled    = "sampled"    // the default 100 ms rate limit
	ModeAggregated = "aggregated" // --aggregate: histograms in the kernel
)

// LoadModes are the configurations of every load scenario, in the order
// of the first repetition.
var LoadModes = []string{ProgNone, ModePerSample, ModeSampled, ModeAggregated}

// Metrics of the load phase.
const (
	MetricFwdMbit       = "fwd_mbit_per_s"     // middlebox → server bytes (interface tx)
	MetricFwdPPS        = "fwd_packets_per_s"  // packets through the monitored interface, both ways
	MetricGoodput       = "goodput_mbit_per_s" // bytes received by the sink
	MetricSoftirqCores  = "softirq_cores"      // softirq CPU time per second, all CPUs
	MetricBusyCores     = "busy_cores"         // busy CPU time per second, all CPUs
	MetricMonitorCores  = "monitor_cpu_cores"  // rttscope process CPU time per second
	MetricRTTEventsPerS = "rtt_events_per_s"   // RTT records the monitor wrote
	// MetricCPUShare is rttscope's share of the machine's busy CPU time:
	// (BPF run time of both hooks + the monitor process) / busy time. In
	// a CPU-bound forwarder it estimates the throughput rttscope costs,
	// with much less noise than the throughput ratio itself.
	MetricCPUShare = "rttscope_cpu_share"
)

// LoadScenarioUDP is the case name of the UDP flood.
const LoadScenarioUDP = "udp-small"

// loadScenario is one traffic pattern of the load phase.
type loadScenario struct {
	name  string
	flows int // TCP flows; 0 for the UDP flood
}

func tcpScenario(flows int) string { return fmt.Sprintf("tcp-%d-flows", flows) }

// LoadWindow is the raw record of one load measurement window.
type LoadWindow struct {
	Scenario string  `json:"scenario"`
	Flows    int     `json:"flows,omitempty"`
	Mode     string  `json:"mode"`
	Rep      int     `json:"rep"`
	Seq      int     `json:"seq"`
	Seconds  float64 `json:"seconds"`
	// BPF run time of the monitor's programs (bpf_stats).
	Egress  *HookCounters `json:"egress,omitempty"`
	Ingress *HookCounters `json:"ingress,omitempty"`
	// Counters of the middlebox's server-facing interface (the monitored
	// one): tx = forwarded toward the server, rx = from the server.
	FwdTxPackets uint64 `json:"if_tx_packets"`
	FwdTxBytes   uint64 `json:"if_tx_bytes"`
	FwdRxPackets uint64 `json:"if_rx_packets"`
	FwdRxBytes   uint64 `json:"if_rx_bytes"`
	// IfDrops sums the drop counters of both middlebox interfaces.
	IfDrops uint64 `json:"if_drops"`
	// DelayDrops are the lab delay line's drops (both directions).
	DelayDrops uint64 `json:"delay_line_drops"`
	// What the server received.
	SinkBytes   uint64 `json:"sink_bytes"`
	SinkPackets uint64 `json:"sink_packets,omitempty"`
	// TCP retransmissions of all flows during the window.
	Retransmits uint64 `json:"retransmits,omitempty"`
	// CPU time per second of wall time (1.0 = one CPU fully busy), from
	// /proc/stat (whole machine) and /proc/PID/stat (processes).
	SoftirqCores float64 `json:"softirq_cores"`
	BusyCores    float64 `json:"busy_cores"`
	StealShare   float64 `json:"steal_share"`
	MonitorCores float64 `json:"monitor_cpu_cores,omitempty"`
	// BenchCores is this process: UDP traffic and sink and the lab's
	// user-space delay line (the TCP flows and sink are processes of
	// their own).
	BenchCores float64 `json:"bench_cpu_cores"`
	// Monitor output during the window, and its final kernel counters.
	RTTRecords       uint64        `json:"rtt_records,omitempty"`
	FlowRecords      uint64        `json:"flow_records,omitempty"`
	AggregateRecords uint64        `json:"aggregate_records,omitempty"`
	MonitorStats     *MonitorStats `json:"monitor_stats,omitempty"`
	MonitorRSSKiB    uint64        `json:"monitor_rss_kib,omitempty"`
}

// MonitorStats are the counters of the monitor's last stats record (over
// its whole run, which spans more than the window).
type MonitorStats struct {
	Packets           uint64 `json:"packets"`
	RTTEvents         uint64 `json:"rtt_events"`
	FlowEvents        uint64 `json:"flow_events"`
	RingbufFull       uint64 `json:"ringbuf_full"`
	FlowMapFull       uint64 `json:"flow_map_full"`
	TimestampMapFull  uint64 `json:"timestamp_map_full"`
	Flows             uint64 `json:"flows"`
	AggregatedSamples uint64 `json:"aggregated_samples"`
	PrefixMapFull     uint64 `json:"prefix_map_full"`
}

// LoadSettings are the parameters of the load phase.
type LoadSettings struct {
	Reps           int    `json:"reps"`
	Warmup         string `json:"warmup"`
	Settle         string `json:"settle"`
	Duration       string `json:"duration"`
	Flows          []int  `json:"tcp_flows"`
	UDP            bool   `json:"udp"`
	WriteSize      int    `json:"tcp_write_size"`
	TCPRate        string `json:"tcp_rate"`
	UDPPayload     int    `json:"udp_payload"`
	UDPPPS         uint64 `json:"udp_pps"`
	UDPSenders     int    `json:"udp_senders"`
	UDPIPv6        bool   `json:"udp_ipv6,omitempty"`
	Path           string `json:"path"`
	DelayMethod    string `json:"delay_method"`
	Interface      string `json:"interface"`
	MonitorCommand string `json:"monitor_command"`
	Modes          string `json:"modes"`
	Order          string `json:"order"`
	Bound          string `json:"throughput_bound"`
}

// monitorArgs are the command-line flags of each mode (after
// `monitor --netns NS -i IF`).
func monitorArgs(mode string) []string {
	common := []string{"--tc-mode", "tcx", "-F", "jsonl", "--stats-interval", "1s"}
	switch mode {
	case ModePerSample:
		return append(common, "--rate-limit", "0")
	case ModeSampled:
		return common
	case ModeAggregated:
		return append(common, "--aggregate", "1s")
	case ModeFlowSummary:
		return append(common, "--flow-summary", "--flow-summary-interval", "1s")
	}
	return nil
}

type loadBench struct {
	o        *Options
	lab      *lab.Lab
	ifname   string
	ifidx    int
	cliIfidx int
	bin      string
	seq      int
	// stale are programs still on the interface when a monitor starts (a
	// stopped monitor's links go away asynchronously): waitAttached
	// waits for programs not among them.
	stale map[ebpf.ProgramID]bool
	// current traffic
	sink    *sinkProc  // TCP sink in a child process
	flows   *flowsProc // TCP flows in a child process
	udpSink *traffic.UDPSink
	udp     *traffic.UDPFlood
}

// newLoadBench is a load bench on l's middlebox, the monitor on its
// server-facing interface, run from bin.
func newLoadBench(o *Options, l *lab.Lab, bin string) (*loadBench, error) {
	lb := &loadBench{o: o, lab: l, ifname: l.MiddleboxServerIf[0], bin: bin}
	if err := l.Middlebox.Do(func() (err error) {
		if lb.ifidx, err = ifindex(lb.ifname); err != nil {
			return err
		}
		lb.cliIfidx, err = ifindex(l.MiddleboxClientIf)
		return err
	}); err != nil {
		return nil, fmt.Errorf("find the middlebox interfaces: %w", err)
	}
	return lb, nil
}

// loadSnap is one reading of every counter of a window.
type loadSnap struct {
	t        time.Time
	tIf      time.Time // when the interface counters were read
	eg, in   ebpf.ProgramStats
	srv, cli netlink.LinkStatistics
	dlDrops  uint64
	cpu      cpuTimes
	mon      procCPU
	self     uint64
	sinkB    uint64
	sinkP    uint64
	retrans  uint64
	rtt      uint64
	flow     uint64
	agg      uint64
}

func runLoad(ctx context.Context, o *Options, res *Result) (err error) {
	bin := o.MonitorBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("find the rttscope binary: %w", err)
		}
	}
	o.progress("load: building the lab (path %s)", o.LoadPath)
	l, err := lab.New(ctx, lab.Config{Prefix: labPrefix, Paths: []lab.PathSpec{o.LoadPath}})
	if err != nil {
		return err
	}
	defer closeLab(l, &err)
	lb, err := newLoadBench(o, l, bin)
	if err != nil {
		return err
	}
	bound := "the lab's user-space delay line (AF_PACKET bridge between middlebox and server, in this process) forwards every packet toward the server, also with zero delay; " +
		"it, the generator, the sinks, the kernel's forwarding and the monitor share this machine's CPUs, so throughput is CPU-bound and the monitor's cost shows as lost throughput and CPU"
	switch {
	case o.LoadPath.Direct():
		bound = "a direct path (no delay, no rate limit: the middlebox forwards straight to the server, no user-space delay line); " +
			"the generator, the sinks, the kernel's forwarding and the monitor share this machine's CPUs"
	case l.DelayMethod == lab.DelayNetem:
		bound = "netem delays the path (no user-space delay line); the generator, the sinks, the kernel's forwarding and the monitor share this machine's CPUs"
	}
	cmdline := bin + " monitor --netns " + l.Middlebox.Name + " -i " + lb.ifname + " " + strings.Join(monitorArgs(ModeSampled), " ")
	res.Settings.Load = &LoadSettings{
		Reps: o.LoadReps, Warmup: o.LoadWarmup.String(), Settle: o.LoadSettle.String(), Duration: o.LoadDuration.String(),
		Flows: o.LoadFlows, UDP: o.LoadUDP, WriteSize: o.LoadWriteSize, TCPRate: rateText(o.LoadTCPRate * 8),
		UDPPayload: o.UDPPayload, UDPPPS: o.UDPPPS, UDPSenders: o.UDPSenders, UDPIPv6: o.UDPIPv6,
		Path: o.LoadPath.String(), DelayMethod: l.DelayMethod, Interface: l.Middlebox.Name + "/" + lb.ifname,
		MonitorCommand: cmdline,
		Modes: "none: nothing attached; per-sample: --rate-limit 0; sampled: defaults (--rate-limit 100ms); aggregated: --aggregate 1s " +
			"(each with --tc-mode tcx -F jsonl --stats-interval 1s, output written to a temporary file (-w) that the bench follows and counts)",
		Order: "per scenario (flow count) the traffic runs throughout, settling before the first window; per rep the modes in rotated order (none, per-sample, sampled, aggregated; then per-sample, sampled, aggregated, none; ...)",
		Bound: bound,
	}

	restore, method, err := telemetry.EnableBPFStatsOrSysctl()
	if err != nil {
		return err
	}
	defer func() {
		if rerr := restore(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	if res.Settings.StatsMethod == "" {
		res.Settings.StatsMethod = method
	}

	var scenarios []loadScenario
	for _, n := range o.LoadFlows {
		scenarios = append(scenarios, loadScenario{tcpScenario(n), n})
	}
	if o.LoadUDP {
		scenarios = append(scenarios, loadScenario{LoadScenarioUDP, 0})
	}
	for _, sc := range scenarios {
		if err := lb.scenario(ctx, res, sc); err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
	}
	return nil
}

// MaxUDPPayload is the largest UDP payload of one 1500-byte packet.
func MaxUDPPayload(ipv6 bool) int {
	if ipv6 {
		return 1500 - 40 - 8
	}
	return 1500 - 20 - 8
}

// udpServerAddr is the first server's address the UDP flood goes to.
func udpServerAddr(l *lab.Lab, ipv6 bool) netip.Addr {
	if ipv6 {
		return l.ServerAddr6[0]
	}
	return l.ServerAddr4[0]
}

// udpFamily names the UDP flood's address family in reports.
func udpFamily(ipv6 bool) string {
	if ipv6 {
		return "IPv6"
	}
	return "IPv4"
}

func rateText(bitsPerSec uint64) string {
	if bitsPerSec == 0 {
		return "unlimited"
	}
	return lab.FormatRate(bitsPerSec)
}

// startTraffic starts the scenario's traffic and waits until it flows.
func (lb *loadBench) startTraffic(ctx context.Context, sc loadScenario) error {
	l := lb.lab
	if sc.flows == 0 {
		dst := udpServerAddr(l, lb.o.UDPIPv6)
		s, err := traffic.NewUDPSink(l.Servers[0], dst, 0)
		if err != nil {
			return err
		}
		lb.udpSink = s
		lb.udp, err = traffic.StartUDPFlood(l.Client, netip.AddrPortFrom(dst, s.Addr().Port()),
			traffic.UDPFloodOptions{PayloadSize: lb.o.UDPPayload, PPS: lb.o.UDPPPS, Senders: lb.o.UDPSenders})
		return err
	}
	s, err := startSinkProc(lb.o.loadBins.sink, l.Servers[0].Name, l.ServerAddr4[0])
	if err != nil {
		return err
	}
	lb.sink = s
	start := time.Now()
	if err := traffic.EnsurePortRange(l.Client, sc.flows+100); err != nil {
		return err
	}
	lb.flows, err = startFlowsProc(lb.o.loadBins.flows, l.Client.Name, netip.AddrPortFrom(l.ServerAddr4[0], s.port),
		traffic.ManyFlowsOptions{Flows: sc.flows, WriteSize: lb.o.LoadWriteSize, RateBytesPerSec: lb.o.LoadTCPRate})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Accepted() < int64(sc.flows) {
		if time.Now().After(deadline) {
			return fmt.Errorf("sink accepted only %d of %d connections", s.Accepted(), sc.flows)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	lb.o.progress("load: %s: %d connections open in %v", tcpScenario(sc.flows), sc.flows, time.Since(start).Round(time.Millisecond))
	return nil
}

func (lb *loadBench) stopTraffic() error {
	var errs []error
	if lb.flows != nil {
		errs = append(errs, lb.flows.stop())
		lb.flows = nil
	}
	if lb.udp != nil {
		errs = append(errs, lb.udp.Stop())
		lb.udp = nil
	}
	if lb.sink != nil {
		errs = append(errs, lb.sink.close())
		lb.sink = nil
	}
	if lb.udpSink != nil {
		errs = append(errs, lb.udpSink.Close())
		lb.udpSink = nil
	}
	return errors.Join(errs...)
}

func (lb *loadBench) scenario(ctx context.Context, res *Result, sc loadScenario) (err error) {
	if err := lb.startTraffic(ctx, sc); err != nil {
		_ = lb.stopTraffic() // the start error is the one to report
		return err
	}
	defer func() { err = errors.Join(err, lb.stopTraffic()) }()
	if err := sleepCtx(ctx, lb.o.LoadSettle); err != nil {
		return err
	}
	for rep := 0; rep < lb.o.LoadReps; rep++ {
		for _, mode := range rotate(LoadModes, rep) {
			if err := ctx.Err(); err != nil {
				return err
			}
			w, err := lb.window(ctx, sc, rep+1, mode)
			if err != nil {
				return fmt.Errorf("rep %d, %s window: %w", rep+1, mode, err)
			}
			res.LoadWindows = append(res.LoadWindows, w)
			lb.record(res, w)
			lb.o.progress("load: %-16s rep %d/%d %-10s %s", sc.name, rep+1, lb.o.LoadReps, mode, w.brief())
		}
	}
	return nil
}

func (w *LoadWindow) brief() string {
	var b strings.Builder
	if w.Egress != nil {
		fmt.Fprintf(&b, "BPF %s/%s ns/pkt (eg/in), ", nsText(w.Egress), nsText(w.Ingress))
	}
	fmt.Fprintf(&b, "fwd %.0f Mbit/s %.0f pkt/s, softirq %.2f, busy %.2f CPUs", float64(w.FwdTxBytes)*8/w.Seconds/1e6,
		float64(w.FwdTxPackets+w.FwdRxPackets)/w.Seconds, w.SoftirqCores, w.BusyCores)
	if w.Mode != ProgNone {
		fmt.Fprintf(&b, ", rttscope %.2f CPU", w.MonitorCores)
		if w.RTTRecords > 0 {
			fmt.Fprintf(&b, ", %.0f RTT/s", float64(w.RTTRecords)/w.Seconds)
		}
		if w.AggregateRecords > 0 {
			fmt.Fprintf(&b, ", %d aggregate records", w.AggregateRecords)
		}
		if st := w.MonitorStats; st != nil && st.RingbufFull > 0 {
			fmt.Fprintf(&b, ", ringbuf_full %d", st.RingbufFull)
		}
	}
	return b.String()
}

func (lb *loadBench) record(res *Result, w LoadWindow) {
	mode := fmt.Sprintf("%v after %v warm-up", lb.o.LoadDuration, lb.o.LoadWarmup)
	base := func(metric string) string { return seriesID(GroupLoad, w.Scenario, ProgNone, "", metric) }
	add := func(hook, metric, unit, how string, v float64, withBase bool) {
		s := res.series(GroupLoad, w.Scenario, w.Mode, hook, metric, unit, how+", "+mode)
		if withBase && w.Mode != ProgNone {
			s.Baseline = base(metric)
		}
		s.Add(v)
	}
	if w.Mode != ProgNone {
		for _, h := range []struct {
			hook string
			c    *HookCounters
		}{{"egress", w.Egress}, {"ingress", w.Ingress}} {
			add(h.hook, MetricNsPerPacket, "ns", "bpf_stats", h.c.nsPerPacket(), false)
		}
	}
	add("", MetricFwdMbit, "Mbit/s", "middlebox server-side interface tx bytes", float64(w.FwdTxBytes)*8/w.Seconds/1e6, true)
	add("", MetricFwdPPS, "packets/s", "middlebox server-side interface tx+rx packets", float64(w.FwdTxPackets+w.FwdRxPackets)/w.Seconds, true)
	add("", MetricGoodput, "Mbit/s", "bytes received by the sink", float64(w.SinkBytes)*8/w.Seconds/1e6, true)
	add("", MetricSoftirqCores, "CPUs", "/proc/stat softirq, whole machine", w.SoftirqCores, true)
	add("", MetricBusyCores, "CPUs", "/proc/stat busy, whole machine", w.BusyCores, true)
	if w.Mode != ProgNone {
		add("", MetricMonitorCores, "CPUs", "CPU time of rttscope monitor's threads (schedstat; utime+stime when a thread exited)", w.MonitorCores, false)
		bpfSec := 0.0
		for _, h := range []*HookCounters{w.Egress, w.Ingress} {
			if h != nil {
				bpfSec += float64(h.RunTimeNs) / 1e9
			}
		}
		share := nan()
		if w.BusyCores > 0 {
			share = (bpfSec/w.Seconds + w.MonitorCores) / w.BusyCores
		}
		add("", MetricCPUShare, "share", "(bpf_stats run time of both hooks + monitor utime+stime) / machine busy time", share, false)
		if w.Mode != ModeAggregated {
			add("", MetricRTTEventsPerS, "events/s", "RTT records written by the monitor", float64(w.RTTRecords)/w.Seconds, false)
		}
	}
}

// monitorProc is a running `rttscope monitor` subprocess.
type monitorProc struct {
	cmd    *exec.Cmd
	path   string        // the monitor's output file
	exited chan struct{} // closed when the process has exited
	done   chan error
	stderr *testutil.Buffer
	rtt    atomic.Uint64
	flow   atomic.Uint64
	agg    atomic.Uint64
	mu     sync.Mutex
	stats  *MonitorStats
	readWG sync.WaitGroup
	// keepRTT: keep the RTT samples (rtts, under mu)
	keepRTT bool
	rtts    []rttSample
}

func (lb *loadBench) startMonitor(mode string) (*monitorProc, error) {
	return lb.startMonitorBin(lb.bin, mode)
}

// startMonitorBin is startMonitor with another rttscope binary.
func (lb *loadBench) startMonitorBin(bin, mode string) (*monitorProc, error) {
	return startMonitorProc(bin, lb.lab.Middlebox.Name, lb.ifname, monitorArgs(mode), false, false)
}

// startMonitorProc runs `BIN monitor --netns NETNS -i IFNAME ARGS...`
// writing to a temporary file (-w), or with toPipe to its stdout; with
// keepRTT it keeps every RTT sample with the time it was read
// (rttsBetween).
//
// The file is what a router would do, and this process, starved of CPU by
// the traffic it generates, cannot throttle the monitor (or hold up its
// exit) through a pipe's back-pressure; but the monitor writes a file out
// only when its buffer fills and at exit. Windows that need the samples
// as they come (RTT under load) use the pipe.
func startMonitorProc(bin, netns, ifname string, args []string, keepRTT, toPipe bool) (*monitorProc, error) {
	var f *os.File
	var path string
	var pw *os.File
	var err error
	if toPipe {
		if f, pw, err = os.Pipe(); err != nil {
			return nil, err
		}
		args = append([]string{"monitor", "--netns", netns, "-i", ifname}, args...)
	} else {
		if f, err = os.CreateTemp("", "rttscope-bench-monitor-*.jsonl"); err != nil {
			return nil, err
		}
		path = f.Name()
		args = append([]string{"monitor", "--netns", netns, "-i", ifname, "-w", path}, args...)
	}
	m := &monitorProc{done: make(chan error, 1), exited: make(chan struct{}), stderr: &testutil.Buffer{}, path: path, keepRTT: keepRTT}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Stderr = m.stderr
	if pw != nil {
		m.cmd.Stdout = pw
	}
	err = startChild(m.cmd, func(werr error) {
		close(m.exited)
		m.readWG.Wait()
		m.done <- werr
	})
	if pw != nil {
		pw.Close() // the child holds its copy; EOF comes when it exits
	}
	if err != nil {
		f.Close()
		if path != "" {
			_ = os.Remove(path)
		}
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	m.readWG.Add(1)
	go m.read(f)
	return m, nil
}

// rttSample is one RTT record of the monitor and when it was read.
type rttSample struct {
	at time.Time
	ns int64
}

// rttsBetween returns the RTTs (ns) read between a and b.
func (m *monitorProc) rttsBetween(a, b time.Time) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []float64
	for _, s := range m.rtts {
		if !s.at.Before(a) && s.at.Before(b) {
			out = append(out, float64(s.ns))
		}
	}
	return out
}

// parseRTTField reads the integer after "rtt": in a jsonl record.
func parseRTTField(line []byte) (int64, bool) {
	i := bytes.Index(line, []byte(`"rtt":`))
	if i < 0 {
		return 0, false
	}
	var n int64
	j := i + len(`"rtt":`)
	start := j
	for ; j < len(line) && line[j] >= '0' && line[j] <= '9'; j++ {
		n = n*10 + int64(line[j]-'0')
	}
	return n, j > start
}

// read follows the monitor's output file as it grows, counting records
// and keeping the last stats record, until the monitor has exited and the
// file is read to its end.
func (m *monitorProc) read(f *os.File) {
	defer m.readWG.Done()
	if m.path != "" {
		defer func() { _ = os.Remove(m.path) }() // a temporary file
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	statsTag := []byte(`"type":"stats"`)
	var partial []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) || (errors.Is(err, io.EOF) && len(chunk) > 0) {
			partial = append(partial, chunk...) // a line still being written
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
		}
		if err == nil {
			line := chunk
			if len(partial) > 0 {
				line = append(partial, chunk...)
				partial = partial[:0]
			}
			m.count(line, statsTag)
			continue
		}
		if !errors.Is(err, io.EOF) {
			return
		}
		select {
		case <-m.exited:
			// Exited: whatever the file holds now is all there is.
			if _, err := br.Peek(1); errors.Is(err, io.EOF) {
				return
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (m *monitorProc) count(line, statsTag []byte) {
	switch {
	case bytes.Contains(line, []byte(`"rtt":`)):
		m.rtt.Add(1)
		if m.keepRTT {
			if ns, ok := parseRTTField(line); ok {
				m.mu.Lock()
				m.rtts = append(m.rtts, rttSample{time.Now(), ns})
				m.mu.Unlock()
			}
		}
	case bytes.Contains(line, []byte(`"flow_event":`)):
		m.flow.Add(1)
	case bytes.Contains(line, []byte(`"type":"aggregate"`)):
		m.agg.Add(1)
	case bytes.Contains(line, statsTag):
		var st MonitorStats
		if json.Unmarshal(line, &st) == nil {
			m.mu.Lock()
			m.stats = &st
			m.mu.Unlock()
		}
	}
}

func (m *monitorProc) lastStats() *MonitorStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// stop ends the monitor (SIGTERM, then SIGKILL after monitorStopTimeout)
// and returns its exit error.
func (m *monitorProc) stop() error {
	if m.cmd.Process == nil {
		return nil
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.done:
		if err != nil {
			return fmt.Errorf("rttscope monitor: %w (stderr: %s)", err, strings.TrimSpace(m.stderr.String()))
		}
		return nil
	case <-time.After(monitorStopTimeout):
		// SIGQUIT makes a Go monitor print its goroutines: where it hung.
		_ = m.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case werr := <-m.done:
			_ = werr // exited on SIGQUIT: the timeout is the error to report
		case <-time.After(2 * time.Second):
			_ = m.cmd.Process.Kill()
			_ = <-m.done // killed: the timeout is the error to report
		}
		return fmt.Errorf("rttscope monitor did not stop within %v (stderr: %s)", monitorStopTimeout, lastLines(m.stderr.String(), 60))
	}
}

// attachTimeout bounds the wait for a monitor's programs (loading them
// took over 30 s with 10,000 flows on an overloaded machine).
const attachTimeout = 2 * time.Minute

// waitAttached waits until the monitor's programs sit on the interface.
func (lb *loadBench) waitAttached(ctx context.Context, m *monitorProc) (eg, in *ebpf.Program, err error) {
	deadline := time.Now().Add(attachTimeout)
	for {
		err = nsrun.Named(lb.lab.Middlebox.Name, func() error {
			var err error
			if eg, err = findProgram(lb.ifidx, ebpf.AttachTCXEgress, lb.stale); err != nil {
				return err
			}
			if in, err = findProgram(lb.ifidx, ebpf.AttachTCXIngress, lb.stale); err != nil {
				eg.Close()
				eg = nil
			}
			return err
		})
		if err == nil {
			return eg, in, nil
		}
		select {
		case werr := <-m.done:
			m.done <- werr
			return nil, nil, fmt.Errorf("rttscope monitor exited before attaching: %w (stderr: %s)", werr, strings.TrimSpace(m.stderr.String()))
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("rttscope monitor not attached after %v: %w", attachTimeout, err)
		}
	}
}

func (lb *loadBench) snap(eg, in *ebpf.Program, m *monitorProc) (loadSnap, error) {
	var s loadSnap
	if eg != nil {
		var err error
		if s.eg, err = telemetry.ReadProgram(eg); err != nil {
			return s, err
		}
		if s.in, err = telemetry.ReadProgram(in); err != nil {
			return s, err
		}
	}
	if err := nsrun.Named(lb.lab.Middlebox.Name, func() error {
		for _, x := range []struct {
			idx int
			st  *netlink.LinkStatistics
		}{{lb.ifidx, &s.srv}, {lb.cliIfidx, &s.cli}} {
			lk, err := netlink.LinkByIndex(x.idx)
			if err != nil {
				return err
			}
			if st := lk.Attrs().Statistics; st != nil {
				*x.st = *st
			}
		}
		// The interface counters' own time, taken at once: on a
		// starved machine the rest of the snapshot can take seconds.
		s.tIf = time.Now()
		return nil
	}); err != nil {
		return s, fmt.Errorf("interface counters: %w", err)
	}
	for _, ps := range lb.lab.DelayStats() {
		s.dlDrops += ps.ToServer.Dropped() + ps.ToClient.Dropped()
	}
	s.cpu = readCPUTimes()
	s.self, _ = procTicks(os.Getpid())
	if m != nil {
		s.mon = readProcCPU(m.cmd.Process.Pid)
		s.rtt, s.flow, s.agg = m.rtt.Load(), m.flow.Load(), m.agg.Load()
	}
	if lb.sink != nil {
		s.sinkB = lb.sink.Bytes()
	}
	if lb.udpSink != nil {
		s.sinkB, s.sinkP = lb.udpSink.Bytes(), lb.udpSink.Packets()
	}
	if lb.flows != nil {
		// The client's namespace holds only the flows: its counter is
		// theirs (one file read, not a TCP_INFO per flow).
		if err := lb.lab.Client.Do(func() (err error) {
			s.retrans, err = tcpRetransSegs()
			return err
		}); err != nil {
			return s, fmt.Errorf("TCP retransmissions: %w", err)
		}
	}
	s.t = time.Now()
	return s, nil
}

func (lb *loadBench) window(ctx context.Context, sc loadScenario, rep int, mode string) (w LoadWindow, err error) {
	lb.seq++
	w = LoadWindow{Scenario: sc.name, Flows: sc.flows, Mode: mode, Rep: rep, Seq: lb.seq}
	var m *monitorProc
	var eg, in *ebpf.Program
	if mode != ProgNone {
		if m, err = lb.startMonitor(mode); err != nil {
			return w, err
		}
		defer func() {
			if m != nil {
				err = errors.Join(err, m.stop())
			}
		}()
		if eg, in, err = lb.waitAttached(ctx, m); err != nil {
			return w, err
		}
		defer eg.Close()
		defer in.Close()
	}
	if err := sleepCtx(ctx, lb.o.LoadWarmup); err != nil {
		return w, err
	}
	s0, err := lb.snap(eg, in, m)
	if err != nil {
		return w, err
	}
	if err := sleepCtx(ctx, lb.o.LoadDuration); err != nil {
		return w, err
	}
	s1, err := lb.snap(eg, in, m)
	if err != nil {
		return w, err
	}
	var rss uint64
	if m != nil {
		rss = procRSSKiB(m.cmd.Process.Pid)
		mm := m
		m = nil
		if err := mm.stop(); err != nil {
			return w, err
		}
		w.MonitorStats = mm.lastStats()
		w.MonitorRSSKiB = rss
	}
	sec := s1.t.Sub(s0.t).Seconds()
	w.Seconds = sec
	if eg != nil {
		w.Egress = hookDelta(s0.eg, s1.eg)
		w.Ingress = hookDelta(s0.in, s1.in)
	}
	w.FwdTxPackets = s1.srv.TxPackets - s0.srv.TxPackets
	w.FwdTxBytes = s1.srv.TxBytes - s0.srv.TxBytes
	w.FwdRxPackets = s1.srv.RxPackets - s0.srv.RxPackets
	w.FwdRxBytes = s1.srv.RxBytes - s0.srv.RxBytes
	drops := func(st netlink.LinkStatistics) uint64 { return st.TxDropped + st.RxDropped }
	w.IfDrops = drops(s1.srv) + drops(s1.cli) - drops(s0.srv) - drops(s0.cli)
	w.DelayDrops = s1.dlDrops - s0.dlDrops
	w.SinkBytes = s1.sinkB - s0.sinkB
	w.SinkPackets = s1.sinkP - s0.sinkP
	w.Retransmits = s1.retrans - s0.retrans
	u := cpuUseBetween(s0.cpu, s1.cpu, sec)
	w.SoftirqCores, w.BusyCores, w.StealShare = u.Softirq, u.Busy, u.StealShare
	w.BenchCores = float64(s1.self-s0.self) / clockTicks / sec
	if mode != ProgNone {
		cpuSec, _ := cpuSecondsBetween(s0.mon, s1.mon)
		w.MonitorCores = cpuSec / sec
		w.RTTRecords = s1.rtt - s0.rtt
		w.FlowRecords = s1.flow - s0.flow
		w.AggregateRecords = s1.agg - s0.agg
	}
	return w, nil
}

func nsText(h *HookCounters) string {
	if h == nil || h.RunCnt == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", h.NsPerRun)
}

// lastLines is the end of s, at most n lines, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
