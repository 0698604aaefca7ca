package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/monitor"
	"github.com/rttscope/rttscope/internal/nsrun"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/telemetry"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// The traffic of the live and steps phases: the TCP bulk transfer, or
// with Options.LiveUDP the load phase's small-datagram UDP flood.
const (
	CaseTCPBulk  = "tcp-bulk"
	CaseUDPFlood = "udp-flood"
)

// liveCase is the traffic of the live and steps windows.
func (o *Options) liveCase() string {
	if o.LiveUDP {
		return CaseUDPFlood
	}
	return CaseTCPBulk
}

// labPrefix names the bench's lab namespaces (rttbench-XXXXXX-ROLE).
const labPrefix = "rttbench"

// HookCounters are the deltas of one program's bpf_stats over a window.
type HookCounters struct {
	RunCnt    uint64  `json:"run_cnt"`
	RunTimeNs uint64  `json:"run_time_ns"`
	Misses    uint64  `json:"recursion_misses"`
	NsPerRun  float64 `json:"ns_per_run,omitempty"`
}

// LiveWindow is the raw record of one measurement window.
type LiveWindow struct {
	Rep     int    `json:"rep"` // 1-based
	Seq     int    `json:"seq"` // position in the whole run, 1-based
	Program string `json:"program"`
	// Seconds is the measured span (after the warm-up).
	Seconds float64       `json:"seconds"`
	Egress  *HookCounters `json:"egress,omitempty"`
	Ingress *HookCounters `json:"ingress,omitempty"`
	// Interface counters of the middlebox's server-facing interface.
	IfTxPackets uint64 `json:"if_tx_packets"`
	IfRxPackets uint64 `json:"if_rx_packets"`
	IfTxBytes   uint64 `json:"if_tx_bytes"`
	IfRxBytes   uint64 `json:"if_rx_bytes"`
	IfDrops     uint64 `json:"if_drops"`
	// SinkBytes is what the server received during the window.
	SinkBytes uint64 `json:"sink_bytes"`
	// The transfer as a whole (warm-up included).
	BulkBytesAcked  uint64  `json:"bulk_bytes_acked"`
	BulkRetransmits uint32  `json:"bulk_retransmits"`
	BulkSRTTus      float64 `json:"bulk_srtt_us"`
	BulkTimestamps  bool    `json:"bulk_tcp_timestamps"`
	// Delay line drops during the window (both directions).
	DelayDrops uint64 `json:"delay_line_drops"`
	// CPUBusy and CPUSteal are the shares (0..1) of all CPUs' time that
	// was busy, and stolen by the hypervisor, during the window
	// (/proc/stat): stolen time inside a program run inflates run_time_ns.
	CPUBusy  float64 `json:"cpu_busy"`
	CPUSteal float64 `json:"cpu_steal"`
	// What the monitor reported (rttscope windows only).
	RTTEvents    uint64 `json:"rtt_events,omitempty"`
	FlowEvents   uint64 `json:"flow_events,omitempty"`
	KernelPkts   uint64 `json:"monitor_packets,omitempty"`
	RingbufFull  uint64 `json:"ringbuf_full,omitempty"`
	MonitorStats bool   `json:"monitor_stats_seen,omitempty"`
}

type liveBench struct {
	o      *Options
	group  string // GroupLive or GroupSteps
	none   bool   // windows without a program are part of the run
	lab    *lab.Lab
	ifname string
	ifidx  int
	sink   *traffic.Sink
	udp    *traffic.UDPSink      // with Options.LiveUDP
	empty  [2]probe.EmptyObjects // egress, ingress: one instance per hook for separate stats
	seq    int
}

// snapshot is one reading of every counter of a window.
type snapshot struct {
	t       time.Time
	eg, in  ebpf.ProgramStats
	ifs     netlink.LinkStatistics
	sink    uint64
	dlDrops uint64
	cpu     cpuTimes
}

// runLive is the live phase: a lab with one path, a TCP bulk transfer
// from the client to the server through the middlebox, and the programs
// of each configuration attached in turn to the middlebox's
// server-facing interface.
func runLive(ctx context.Context, o *Options, res *Result) (err error) {
	progs := []string{ProgNone, ProgEmpty, ProgRttscope}
	if o.NoLiveBaseline {
		progs = progs[1:]
	}
	return runLiveWindows(ctx, o, res, GroupLive, progs)
}

// runLiveWindows builds the lab and measures each configuration of progs
// once per rep, in rotated order, recording the series under group.
func runLiveWindows(ctx context.Context, o *Options, res *Result, group string, progs []string) (err error) {
	o.progress("%s: building the lab (path %s)", group, o.Path)
	l, err := lab.New(ctx, lab.Config{Prefix: labPrefix, Paths: []lab.PathSpec{o.Path}})
	if err != nil {
		return err
	}
	defer closeLab(l, &err)
	lb := &liveBench{o: o, group: group, lab: l, ifname: l.MiddleboxServerIf[0]}
	lb.none = len(progs) > 0 && progs[0] == ProgNone
	res.Settings.DelayMethod = l.DelayMethod
	res.Settings.LiveInterface = l.Middlebox.Name + "/" + lb.ifname
	if err := nsrun.Named(l.Middlebox.Name, func() error {
		lk, err := netlink.LinkByName(lb.ifname)
		if err != nil {
			return err
		}
		lb.ifidx = lk.Attrs().Index
		return nil
	}); err != nil {
		return fmt.Errorf("find %s: %w", lb.ifname, err)
	}
	for i := range lb.empty {
		if err := probe.LoadEmptyObjects(&lb.empty[i], nil); err != nil {
			return fmt.Errorf("load empty program: %w", err)
		}
		defer lb.empty[i].Close()
	}
	if lb.sink, err = traffic.NewSink(l.Servers[0], l.ServerAddr4[0], 0); err != nil {
		return err
	}
	defer lb.sink.Close()
	if o.LiveUDP {
		if lb.udp, err = traffic.NewUDPSink(l.Servers[0], udpServerAddr(l, lb.o.UDPIPv6), 0); err != nil {
			return err
		}
		defer lb.udp.Close()
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
	res.Settings.StatsMethod = method
	o.progress("%s: bpf_stats on via %s", group, method)

	for rep := 0; rep < o.Reps; rep++ {
		// Rotated, and reversed on every other rep, so that no
		// configuration always follows the same one.
		order := rotate(progs, rep/2)
		if rep%2 == 1 {
			order = reversed(order)
		}
		for _, prog := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			w, err := lb.window(ctx, rep+1, prog)
			if err != nil {
				return fmt.Errorf("rep %d, %s window: %w", rep+1, prog, err)
			}
			res.Windows = append(res.Windows, w)
			lb.record(res, w)
			o.progress("%s: rep %d/%d %-9s %s", group, rep+1, o.Reps, prog, w.brief())
		}
	}
	return nil
}

func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func (w *LiveWindow) brief() string {
	var b strings.Builder
	for _, h := range []struct {
		name string
		c    *HookCounters
	}{{"egress", w.Egress}, {"ingress", w.Ingress}} {
		if h.c != nil {
			fmt.Fprintf(&b, "%s %.1f ns/pkt, ", h.name, h.c.NsPerRun)
		}
	}
	fmt.Fprintf(&b, "%.0f pkt/s, %.1f Mbit/s", float64(w.IfTxPackets+w.IfRxPackets)/w.Seconds, float64(w.SinkBytes)*8/w.Seconds/1e6)
	if w.Program == ProgRttscope {
		fmt.Fprintf(&b, ", %d RTT samples", w.RTTEvents)
	}
	fmt.Fprintf(&b, ", CPU %.0f%% busy", 100*w.CPUBusy)
	if w.CPUSteal >= 0.005 {
		fmt.Fprintf(&b, " (%.1f%% stolen)", 100*w.CPUSteal)
	}
	if w.BulkRetransmits > 0 {
		fmt.Fprintf(&b, ", %d retransmits", w.BulkRetransmits)
	}
	return b.String()
}

// record turns a window into series values.
func (lb *liveBench) record(res *Result, w LiveWindow) {
	id := func(prog, hook, metric string) string {
		return (&Series{Group: lb.group, Case: lb.o.liveCase(), Program: prog, Hook: hook, Metric: metric}).ID()
	}
	mode := fmt.Sprintf("%v after %v warm-up", lb.o.Duration, lb.o.Warmup)
	for _, h := range []struct {
		hook string
		c    *HookCounters
		pkts uint64
	}{{"egress", w.Egress, w.IfTxPackets}, {"ingress", w.Ingress, w.IfRxPackets}} {
		if w.Program != ProgNone {
			s := res.series(lb.group, lb.o.liveCase(), w.Program, h.hook, MetricNsPerPacket, "ns", "bpf_stats, "+mode)
			if b := baselineOf(w.Program); b != "" {
				s.Baseline = id(b, h.hook, MetricNsPerPacket)
			}
			s.Add(h.c.nsPerPacket())
		}
		s := res.series(lb.group, lb.o.liveCase(), w.Program, h.hook, MetricPacketsPerS, "packets/s", "interface counters, "+mode)
		if w.Program != ProgNone && lb.none {
			s.Baseline = id(ProgNone, h.hook, MetricPacketsPerS)
		}
		s.Add(float64(h.pkts) / w.Seconds)
	}
	s := res.series(lb.group, lb.o.liveCase(), w.Program, "", MetricThroughput, "Mbit/s", "bytes received by the sink, "+mode)
	if w.Program != ProgNone && lb.none {
		s.Baseline = id(ProgNone, "", MetricThroughput)
	}
	s.Add(float64(w.SinkBytes) * 8 / w.Seconds / 1e6)
}

// monitorStopTimeout bounds the wait for monitor.Run to return.
const monitorStopTimeout = time.Minute

// attached is a configuration in place on the interface.
type attached struct {
	eg, in *ebpf.Program // nil for ProgNone
	stop   func() error
	mon    *countWriter
	owned  bool // eg and in are references of our own (found by ID)
}

func (lb *liveBench) attachEmpty() (*attached, error) {
	links, err := attachTCXPair(lb.lab.Middlebox.Name, lb.ifidx, lb.empty[0].EmptyTc, lb.empty[1].EmptyTc)
	if err != nil {
		return nil, fmt.Errorf("attach empty program: %w", err)
	}
	return &attached{eg: lb.empty[0].EmptyTc, in: lb.empty[1].EmptyTc, stop: func() error { return closeLinks(links) }}, nil
}

// attachTCXPair attaches eg to TCX egress and in to TCX ingress of
// interface ifidx in netns; on an error nothing stays attached.
func attachTCXPair(netns string, ifidx int, eg, in *ebpf.Program) ([]link.Link, error) {
	var links []link.Link
	err := nsrun.Named(netns, func() error {
		for _, a := range []struct {
			dir  ebpf.AttachType
			prog *ebpf.Program
		}{{ebpf.AttachTCXEgress, eg}, {ebpf.AttachTCXIngress, in}} {
			l, err := link.AttachTCX(link.TCXOptions{Interface: ifidx, Program: a.prog, Attach: a.dir})
			if err != nil {
				return fmt.Errorf("TCX %v: %w", a.dir, err)
			}
			links = append(links, l)
		}
		return nil
	})
	if err != nil {
		_ = closeLinks(links) // the attach error is the one to report
		return nil, err
	}
	return links, nil
}

// attachRttscope runs the monitor itself on the interface (TCX egress and
// ingress, default configuration), its output counted and discarded, and
// finds the programs it attached.
func (lb *liveBench) attachRttscope(ctx context.Context, cfg loader.Config) (*attached, error) {
	mctx, cancel := context.WithCancel(ctx)
	cw := &countWriter{}
	log := &testutil.Buffer{}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- monitor.Run(mctx, monitor.Options{
			Interfaces:      []string{lb.ifname},
			Netns:           lb.lab.Middlebox.Name,
			Attach:          loader.AttachOptions{IngressHook: loader.IngressTC, TCMode: loader.TCModeTCX},
			BPF:             cfg,
			CleanupInterval: time.Second,
			Output:          cw,
			Log:             log,
			OnAttached:      func() { close(ready) },
		})
	}()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("monitor: %w (log: %s)", err, strings.TrimSpace(log.String()))
			}
			return nil
		case <-time.After(monitorStopTimeout):
			// Leave it behind rather than hang the bench; the caller
			// fails and the lab's removal takes the interface away.
			return fmt.Errorf("monitor did not stop within %v", monitorStopTimeout)
		}
	}
	select {
	case <-ready:
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("monitor returned before attaching")
		}
		return nil, fmt.Errorf("monitor: %w", err)
	case <-ctx.Done():
		_ = stop() // interrupted: ctx.Err() is the one to report
		return nil, ctx.Err()
	}
	a := &attached{stop: stop, mon: cw, owned: true}
	err := nsrun.Named(lb.lab.Middlebox.Name, func() error {
		var err error
		if a.eg, err = findProgram(lb.ifidx, ebpf.AttachTCXEgress, nil); err != nil {
			return err
		}
		a.in, err = findProgram(lb.ifidx, ebpf.AttachTCXIngress, nil)
		return err
	})
	if err != nil {
		_ = a.close() // the lookup error is the one to report
		return nil, err
	}
	return a, nil
}

func (a *attached) close() error {
	var errs []error
	if a.stop != nil {
		errs = append(errs, a.stop())
		a.stop = nil
	}
	// Programs found by ID are our own references; the empty ones belong
	// to the liveBench.
	if a.owned {
		for _, p := range []*ebpf.Program{a.eg, a.in} {
			if p != nil {
				p.Close()
			}
		}
	}
	return errors.Join(errs...)
}

// monitorPrograms are the name prefixes of the monitors' tc programs:
// rttscope's, and ePPing's (xdp-project/bpf-examples pping), which
// --compare-bin can run through a wrapper that takes `monitor`'s arguments
// (docs/performance.md).
var monitorPrograms = []string{"rttscope_tc", "pping_tc"}

// findProgram returns the monitor's program attached through TCX at dir of
// the interface (in the current namespace).
func findProgram(ifidx int, dir ebpf.AttachType, skip map[ebpf.ProgramID]bool) (*ebpf.Program, error) {
	q, err := link.QueryPrograms(link.QueryOptions{Target: ifidx, Attach: dir})
	if err != nil {
		return nil, fmt.Errorf("query TCX programs: %w", err)
	}
	for _, ap := range q.Programs {
		if skip[ap.ID] {
			continue
		}
		p, err := ebpf.NewProgramFromID(ap.ID)
		if err != nil {
			continue
		}
		if info, err := p.Info(); err == nil && slices.ContainsFunc(monitorPrograms, func(prefix string) bool {
			return strings.HasPrefix(info.Name, prefix)
		}) {
			return p, nil
		}
		p.Close()
	}
	return nil, fmt.Errorf("no monitor program found at TCX %v", dir)
}

func (lb *liveBench) snapshot(a *attached) (snapshot, error) {
	s := snapshot{sink: lb.sink.Bytes()}
	if lb.udp != nil {
		s.sink = lb.udp.Bytes()
	}
	if a.eg != nil {
		var err error
		if s.eg, err = telemetry.ReadProgram(a.eg); err != nil {
			return s, err
		}
		if s.in, err = telemetry.ReadProgram(a.in); err != nil {
			return s, err
		}
	}
	if err := nsrun.Named(lb.lab.Middlebox.Name, func() error {
		lk, err := netlink.LinkByIndex(lb.ifidx)
		if err != nil {
			return err
		}
		if st := lk.Attrs().Statistics; st != nil {
			s.ifs = *st
		}
		return nil
	}); err != nil {
		return s, fmt.Errorf("interface counters: %w", err)
	}
	for _, ps := range lb.lab.DelayStats() {
		s.dlDrops += ps.ToServer.Dropped() + ps.ToClient.Dropped()
	}
	s.cpu = readCPUTimes()
	s.t = time.Now()
	return s, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// window measures one configuration: attach, start the transfer, warm up,
// read the counters, wait Duration, read them again, stop everything.
func (lb *liveBench) window(ctx context.Context, rep int, prog string) (w LiveWindow, err error) {
	lb.seq++
	w = LiveWindow{Rep: rep, Seq: lb.seq, Program: prog}
	a := &attached{}
	switch prog {
	case ProgNone:
	case ProgEmpty:
		a, err = lb.attachEmpty()
	case ProgRttscope:
		a, err = lb.attachRttscope(ctx, loader.DefaultConfig())
	case ProgPrev:
		a, err = lb.attachBinary(ctx, lb.o.CompareBinary)
	case ProgCur:
		a, err = lb.attachBinary(ctx, "")
	default:
		step, ok := stepOf(prog)
		if !ok {
			return w, fmt.Errorf("unknown configuration %q", prog)
		}
		cfg := loader.DefaultConfig()
		cfg.Steps = step
		a, err = lb.attachRttscope(ctx, cfg)
	}
	if err != nil {
		return w, err
	}
	defer func() {
		if a != nil {
			err = errors.Join(err, a.close())
		}
	}()

	// A new connection per window: the transfer lasts warm-up + duration
	// and a little more, so it is still in full flow at the second reading.
	dst := netip.AddrPortFrom(lb.lab.ServerAddr4[0], lb.sink.Addr().Port())
	var bulk traffic.BulkResult
	var bulkErr error
	var wg sync.WaitGroup
	if lb.udp != nil {
		flood, err := traffic.StartUDPFlood(lb.lab.Client, netip.AddrPortFrom(udpServerAddr(lb.lab, lb.o.UDPIPv6), lb.udp.Addr().Port()),
			traffic.UDPFloodOptions{PayloadSize: lb.o.UDPPayload, PPS: lb.o.UDPPPS, Senders: lb.o.UDPSenders})
		if err != nil {
			return w, err
		}
		defer func() { err = errors.Join(err, flood.Stop()) }()
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bulk, bulkErr = traffic.BulkStats(ctx, lb.lab.Client, dst, lb.o.Warmup+lb.o.Duration+300*time.Millisecond, lb.o.Pacing)
		}()
	}
	defer wg.Wait()

	if err := sleepCtx(ctx, lb.o.Warmup); err != nil {
		return w, err
	}
	s0, err := lb.snapshot(a)
	if err != nil {
		return w, err
	}
	if err := sleepCtx(ctx, lb.o.Duration); err != nil {
		return w, err
	}
	s1, err := lb.snapshot(a)
	if err != nil {
		return w, err
	}
	wg.Wait()
	if bulkErr != nil {
		return w, bulkErr
	}
	if a.mon != nil {
		// Stop the monitor now so that its final stats are in.
		stop := a.stop
		a.stop = nil
		if err := stop(); err != nil {
			return w, err
		}
	}

	w.Seconds = s1.t.Sub(s0.t).Seconds()
	if a.eg != nil {
		w.Egress = hookDelta(s0.eg, s1.eg)
		w.Ingress = hookDelta(s0.in, s1.in)
	}
	w.IfTxPackets = s1.ifs.TxPackets - s0.ifs.TxPackets
	w.IfRxPackets = s1.ifs.RxPackets - s0.ifs.RxPackets
	w.IfTxBytes = s1.ifs.TxBytes - s0.ifs.TxBytes
	w.IfRxBytes = s1.ifs.RxBytes - s0.ifs.RxBytes
	w.IfDrops = (s1.ifs.TxDropped + s1.ifs.RxDropped) - (s0.ifs.TxDropped + s0.ifs.RxDropped)
	w.SinkBytes = s1.sink - s0.sink
	w.DelayDrops = s1.dlDrops - s0.dlDrops
	if busy, steal := cpuShares(s0.cpu, s1.cpu); finite(busy) {
		w.CPUBusy, w.CPUSteal = busy, steal
	}
	w.BulkBytesAcked = bulk.Bytes
	w.BulkRetransmits = bulk.Retransmits
	w.BulkSRTTus = float64(bulk.SRTT) / float64(time.Microsecond)
	w.BulkTimestamps = bulk.Timestamps
	if a.mon != nil {
		w.RTTEvents = a.mon.rtts.Load()
		w.FlowEvents = a.mon.flows.Load()
		if st, ok := a.mon.lastStats(); ok {
			w.MonitorStats = true
			w.KernelPkts = st.Packets
			w.RingbufFull = st.RingbufFull
		}
	}
	return w, nil
}

// hookDelta is a program's accounting between readings a and b. NsPerRun
// stays 0 (omitted: JSON has no NaN) when the program did not run.
func hookDelta(a, b ebpf.ProgramStats) *HookCounters {
	h := &HookCounters{
		RunCnt:    b.RunCount - a.RunCount,
		RunTimeNs: uint64((b.Runtime - a.Runtime).Nanoseconds()),
		Misses:    b.RecursionMisses - a.RecursionMisses,
	}
	if b.RunCount > a.RunCount && b.Runtime >= a.Runtime {
		h.NsPerRun = float64(h.RunTimeNs) / float64(h.RunCnt)
	}
	return h
}

// nsPerPacket is the series value of a hook's window: NaN (missing) when
// nothing was attached or the program did not run.
func (h *HookCounters) nsPerPacket() float64 {
	if h == nil || h.RunCnt == 0 {
		return nan()
	}
	return h.NsPerRun
}

// countWriter is a format.Writer that counts events and keeps the last
// stats record, writing nothing.
type countWriter struct {
	rtts, flows atomic.Uint64
	mu          sync.Mutex
	stats       events.Stats
	haveStats   bool
}

func (c *countWriter) WriteRTT(*events.RTT) error        { c.rtts.Add(1); return nil }
func (c *countWriter) WriteFlow(*events.FlowEvent) error { c.flows.Add(1); return nil }
func (c *countWriter) Flush() error                      { return nil }
func (c *countWriter) Close() error                      { return nil }
func (c *countWriter) WriteStats(s *events.Stats) error {
	c.mu.Lock()
	c.stats, c.haveStats = *s, true
	c.mu.Unlock()
	return nil
}

func (c *countWriter) lastStats() (events.Stats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats, c.haveStats
}
