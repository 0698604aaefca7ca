package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/telemetry"
	"github.com/rttscope/rttscope/internal/traffic"
)

// `rttscope bench hooks` (seed 003): what a BPF tracing program costs per
// event, by program type. Small UDP datagrams flow client → middlebox →
// server through the lab (each is received twice: by the middlebox and by
// the server); every configuration attaches one program of bpf/hooks.c to
// the receive path (the net:netif_receive_skb tracepoint, or the kernel
// function __netif_receive_skb), empty or counting, with bpf_stats off or
// on. The baseline attaches nothing.

// GroupHooks is the group of the hooks study's series.
const GroupHooks = "hooks"

// HookTypes are the program types compared, in report order.
var HookTypes = []string{"tracepoint", "raw_tp", "tp_btf", "kprobe", "kprobe.multi", "fentry"}

// Metrics of the hooks study.
const (
	MetricSinkPPS     = "packets_per_s"     // datagrams received by the sink
	MetricCPUNsPerPkt = "cpu_ns_per_packet" // busy CPU time / datagrams received
	// MetricEventsPerS (events.go): program runs per second here
	MetricEventsPerPkt = "events_per_packet" // program runs per datagram received
	MetricBPFNsPerRun  = "bpf_ns_per_run"    // bpf_stats run_time_ns / run_cnt
	// MetricBPFNetNsPerRun is bpf_ns_per_run less bpf_stats' residual
	// (statsresidual.go): the clock reads inside the reported time.
	MetricBPFNetNsPerRun = "bpf_net_ns_per_run"
)

func init() {
	registerDirections(LowerFaster, MetricCPUNsPerPkt, MetricBPFNsPerRun, MetricBPFNetNsPerRun)
}

// hookTarget is the hot path every program attaches to.
const (
	hookTPGroup  = "net"
	hookTPName   = "netif_receive_skb"
	hookFunction = "__netif_receive_skb"
)

// HooksOptions configure `rttscope bench hooks`.
type HooksOptions struct {
	Name       string
	Method     Method
	UDPPayload int
	Senders    int
	// Types limits the program types (default HookTypes).
	Types []string
	// Stats runs every program with bpf_stats off and on (else off only).
	Stats    bool
	Progress io.Writer
}

// DefaultHooksOptions: every type, both flavours, stats off and on.
func DefaultHooksOptions() HooksOptions {
	m := DefaultMethod()
	m.Duration = 2 * time.Second
	m.Warmup = 500 * time.Millisecond
	m.CPUs = lastCPU()
	return HooksOptions{Name: "hooks", Method: m, UDPPayload: 16, Senders: 1, Types: HookTypes, Stats: true}
}

// hookConfig is one program of one configuration.
type hookConfig struct {
	typ, flavour string
	stats        bool
}

func (h hookConfig) name() string {
	n := h.typ + "-" + h.flavour
	if h.stats {
		n += "+stats"
	}
	return n
}

func (h hookConfig) progName() string {
	return strings.ReplaceAll(h.typ, ".", "_") + "_" + h.flavour
}

// hookState is what a window of the hooks study reads.
type hookState struct {
	sink  *traffic.UDPSink
	flood *traffic.UDPFlood
	cpus  []int
	// kconfig is /proc/config.gz, to explain refusals
	kconfig map[string]string
	// the attached program of the current window (nil for the baseline)
	prog *ebpf.Program
	hits *ebpf.Map
	// residual measures bpf_stats' residual before stats-on windows
	residual *statsResidual
}

// HookWindow is the raw record of one window.
type HookWindow struct {
	Packets   uint64 `json:"sink_packets"`
	Sent      uint64 `json:"sent"`
	Events    uint64 `json:"events,omitempty"`
	RunCnt    uint64 `json:"run_cnt,omitempty"`
	RunTimeNs uint64 `json:"run_time_ns,omitempty"`
	// ResidualNs is bpf_stats' residual per run (stats-on windows).
	ResidualNs float64 `json:"bpf_stats_residual_ns,omitempty"`
	CPU        cpuUse  `json:"cpu"`
	Seconds    float64 `json:"seconds"`
}

// RunHooks runs the hooks study.
func RunHooks(ctx context.Context, o HooksOptions) (_ *Result, err error) {
	if err := checkRoot(o.Progress); err != nil {
		return nil, err
	}
	if o.UDPPayload < 1 || o.UDPPayload > MaxUDPPayload(false) || o.Senders < 1 {
		return nil, errors.New("hooks: UDP payload must be 1-1472 bytes and senders >= 1")
	}
	spec, err := probe.LoadHooks()
	if err != nil {
		return nil, err
	}
	// Perf-event tracepoints look their IDs up in tracefs.
	unmount, err := ensureTracefs()
	if err != nil {
		return nil, err
	}
	defer func() {
		if uerr := unmount(); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	residual, err := newStatsResidual()
	if err != nil {
		return nil, err
	}
	defer func() { _ = residual.Close() }() // a loaded program; nothing attached
	hs := &hookState{cpus: o.Method.CPUs, kconfig: kernelConfig(), residual: residual}
	st := &Study{
		Group:  GroupHooks,
		Title:  "rttscope bench hooks: cost of BPF tracing program types on the packet receive path",
		Method: o.Method,
		Metrics: []MetricSpec{
			{MetricSinkPPS, "packets/s", "UDP datagrams received by the sink per second", true},
			{MetricCPUNsPerPkt, "ns", "busy CPU time of the measured CPUs per datagram received", true},
			{MetricEventsPerS, "events/s", "program runs per second: the per-CPU counter (count flavour) or bpf_stats run_cnt", false},
			{MetricEventsPerPkt, "events", "program runs per datagram received (all of the host's packets fire the hook)", false},
			{MetricBPFNsPerRun, "ns", "bpf_stats run_time_ns / run_cnt (stats on only)", true},
			{MetricBPFNetNsPerRun, "ns", "bpf_ns_per_run less bpf_stats' residual: an empty tc program's reported run time per run under BPF_PROG_TEST_RUN, the least measured before this and every earlier stats-on window (stats on only)", true},
		},
		Details: map[string]string{
			"hot path":       fmt.Sprintf("tracepoint %s:%s (in __netif_receive_skb_core) and kernel function %s (its caller on the backlog path of veth and loopback)", hookTPGroup, hookTPName, hookFunction),
			"traffic":        fmt.Sprintf("UDP, %d B payload, %d sender(s) as fast as they go, client → middlebox (kernel forwarding) → server of a lab with a direct path; each datagram is received twice", o.UDPPayload, o.Senders),
			"programs":       "bpf/hooks.c: empty (return 0) and count (one per-CPU array counter update); +stats: kernel.bpf_stats_enabled on during the window (BPF_ENABLE_STATS)",
			"cost per event": "cost per event = (cpu_ns_per_packet - baseline's) / events_per_packet; its interval is the bootstrap interval of the difference divided the same way",
		},
	}
	st.Configs = append(st.Configs, StudyConfig{Name: ProgNone})
	types := o.Types
	if len(types) == 0 {
		types = HookTypes
	}
	for _, t := range types {
		for _, fl := range []string{"empty", "count"} {
			stats := []bool{false}
			if o.Stats {
				stats = append(stats, true)
			}
			for _, on := range stats {
				hc := hookConfig{t, fl, on}
				cfg := StudyConfig{Name: hc.name()}
				if reason := hs.probe(spec, hc); reason != "" {
					cfg.Unavailable = reason
				} else {
					cfg.Setup = func(ctx context.Context) (func() error, error) { return hs.setup(spec, hc) }
				}
				st.Configs = append(st.Configs, cfg)
			}
		}
	}
	st.Cases = []StudyCase{{Name: fmt.Sprintf("udp-%dB", o.UDPPayload), Start: func(ctx context.Context) (func() error, error) {
		return hs.start(ctx, o)
	}}}
	st.Window = func(ctx context.Context, _ StudyCase, _ StudyConfig) (map[string]float64, any, error) {
		return hs.window(ctx, o.Method.Duration)
	}
	res, err := RunStudy(ctx, o.Name, st, o.Progress)
	if res != nil {
		addHookCostPerEvent(res)
	}
	return res, err
}

// checkRoot refuses to run without root, and removes the namespaces of
// labs whose process died (a bench killed with SIGKILL) before a study
// builds its own.
func checkRoot(progress io.Writer) error {
	if unix.Geteuid() != 0 {
		return errors.New("bench needs root (BPF programs, network namespaces): run with sudo")
	}
	if removed, err := lab.CleanupStale(); len(removed) > 0 && progress != nil {
		fmt.Fprintf(progress, "bench: removed namespaces of labs whose process died: %s\n", strings.Join(removed, " "))
	} else if err != nil && progress != nil {
		fmt.Fprintf(progress, "bench: warning: cleaning up stale labs: %v\n", err)
	}
	return nil
}

// lastCPU pins to the highest numbered CPU (none on a single-CPU machine,
// where pinning changes nothing).
func lastCPU() []int {
	c, _ := ParseCPUs("last")
	if len(c) == 1 && c[0] == 0 {
		return nil
	}
	return c
}

// loadHook loads one program of bpf/hooks.c (with its own counter map).
func loadHook(spec *ebpf.CollectionSpec, hc hookConfig) (*ebpf.Collection, error) {
	cs := spec.Copy()
	name := hc.progName()
	ps, ok := cs.Programs[name]
	if !ok {
		return nil, fmt.Errorf("no program %s in bpf/hooks.c", name)
	}
	cs.Programs = map[string]*ebpf.ProgramSpec{name: ps}
	return ebpf.NewCollection(cs)
}

// attachHook attaches prog as its type says.
func attachHook(typ string, prog *ebpf.Program) (link.Link, error) {
	switch typ {
	case "tracepoint":
		return link.Tracepoint(hookTPGroup, hookTPName, prog, nil)
	case "raw_tp":
		return link.AttachRawTracepoint(link.RawTracepointOptions{Name: hookTPName, Program: prog})
	case "tp_btf", "fentry":
		return link.AttachTracing(link.TracingOptions{Program: prog})
	case "kprobe":
		return link.Kprobe(hookFunction, prog, nil)
	case "kprobe.multi":
		return link.KprobeMulti(prog, link.KprobeMultiOptions{Symbols: []string{hookFunction}})
	}
	return nil, fmt.Errorf("unknown program type %q", typ)
}

// probe loads and attaches the program once; it returns "" when that
// works, else the errno and its likely cause.
func (hs *hookState) probe(spec *ebpf.CollectionSpec, hc hookConfig) string {
	coll, err := loadHook(spec, hc)
	if err != nil {
		return hookRefusal(hc.typ, "load", err, hs.kconfig)
	}
	defer coll.Close()
	l, err := attachHook(hc.typ, coll.Programs[hc.progName()])
	if err != nil {
		return hookRefusal(hc.typ, "attach", err, hs.kconfig)
	}
	_ = l.Close() // probing only
	return ""
}

// hookRefusal explains why the kernel refused a program type, from the
// errno and, where it tells, the kernel's configuration.
func hookRefusal(typ, step string, err error, cfg map[string]string) string {
	errno := "no errno"
	var en unix.Errno
	if errors.As(err, &en) {
		errno = unix.ErrnoName(en) + " (" + en.Error() + ")"
	}
	notSet := func(opt string) bool { return cfg != nil && cfg[opt] != "y" }
	var cause string
	switch {
	case typ == "kprobe" && notSet("CONFIG_KPROBES"):
		cause = "CONFIG_KPROBES is not set in this kernel (/proc/config.gz): no kprobes at all"
	case typ == "kprobe.multi" && notSet("CONFIG_FPROBE"):
		cause = "CONFIG_FPROBE is not set in this kernel (/proc/config.gz): multi-kprobes need fprobe"
	case typ == "fentry" && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)) && lockdownMode(cfg) != "" && lockdownMode(cfg) != "none":
		cause = "kernel lockdown (" + lockdownMode(cfg) + " mode) refuses BPF trampolines on this kernel"
	case errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, syscall.Errno(524)): // 524: ENOTSUPP, kernel-internal
		cause = "the kernel does not support this program type"
	case errors.Is(err, unix.ENOENT):
		cause = "no " + hookFunction + " to attach to (not traceable or inlined in this kernel)"
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		cause = "refused by policy (lockdown, or missing CAP_BPF/CAP_PERFMON)"
	case errors.Is(err, unix.EINVAL):
		cause = "the kernel rejected the attach (no ftrace support for the function, or the type is not built in)"
	default:
		cause = "see the error"
	}
	return fmt.Sprintf("%s %s refused: %s: %s (%v)", typ, step, errno, cause, err)
}

func (hs *hookState) setup(spec *ebpf.CollectionSpec, hc hookConfig) (func() error, error) {
	coll, err := loadHook(spec, hc)
	if err != nil {
		return nil, err
	}
	prog := coll.Programs[hc.progName()]
	l, err := attachHook(hc.typ, prog)
	if err != nil {
		coll.Close()
		return nil, err
	}
	var stats io.Closer
	if hc.stats {
		if stats, err = telemetry.EnableBPFStats(); err != nil {
			l.Close()
			coll.Close()
			return nil, fmt.Errorf("enable bpf_stats: %w", err)
		}
	}
	hs.prog, hs.hits = prog, coll.Maps["hits"]
	if hc.flavour != "count" {
		hs.hits = nil
	}
	if !hc.stats {
		hs.prog = nil
	}
	return func() error {
		hs.prog, hs.hits = nil, nil
		var errs []error
		if stats != nil {
			errs = append(errs, stats.Close())
		}
		errs = append(errs, l.Close())
		coll.Close()
		return errors.Join(errs...)
	}, nil
}

func (hs *hookState) start(ctx context.Context, o HooksOptions) (func() error, error) {
	l, err := lab.New(ctx, lab.Config{Prefix: "rtthooks", Paths: []lab.PathSpec{{}}})
	if err != nil {
		return nil, err
	}
	stop := func() error {
		var errs []error
		if hs.flood != nil {
			errs = append(errs, hs.flood.Stop())
			hs.flood = nil
		}
		if hs.sink != nil {
			errs = append(errs, hs.sink.Close())
			hs.sink = nil
		}
		return errors.Join(append(errs, l.Close())...)
	}
	if hs.sink, err = traffic.NewUDPSink(l.Servers[0], l.ServerAddr4[0], 0); err != nil {
		_ = stop() // the sink error is the one to report
		return nil, err
	}
	hs.flood, err = traffic.StartUDPFlood(l.Client, netip.AddrPortFrom(l.ServerAddr4[0], hs.sink.Addr().Port()),
		traffic.UDPFloodOptions{PayloadSize: o.UDPPayload, Senders: o.Senders})
	if err != nil {
		_ = stop() // the flood error is the one to report
		return nil, err
	}
	return stop, nil
}

// sumPerCPU sums the per-CPU values of key 0 of m (0 for a nil map).
func sumPerCPU(m *ebpf.Map) uint64 {
	if m == nil {
		return 0
	}
	var vals []uint64
	if err := m.Lookup(uint32(0), &vals); err != nil {
		return 0
	}
	var n uint64
	for _, v := range vals {
		n += v
	}
	return n
}

func (hs *hookState) window(ctx context.Context, d time.Duration) (map[string]float64, any, error) {
	read := func() (pk, sent, hits uint64, ps ebpf.ProgramStats, cpu cpuTimes, t time.Time, err error) {
		if hs.prog != nil {
			if ps, err = telemetry.ReadProgram(hs.prog); err != nil {
				return
			}
		}
		return hs.sink.Packets(), hs.flood.Sent(), sumPerCPU(hs.hits), ps, readCPUTimesOf(hs.cpus), time.Now(), nil
	}
	// Outside the window: its ~10 ms of test runs are not the hook's.
	residual := 0.0
	if hs.prog != nil {
		var err error
		if residual, err = hs.residual.measure(); err != nil {
			return nil, nil, err
		}
	}
	p0, s0, h0, ps0, c0, t0, err := read()
	if err != nil {
		return nil, nil, err
	}
	if err := sleepCtx(ctx, d); err != nil {
		return nil, nil, err
	}
	p1, s1, h1, ps1, c1, t1, err := read()
	if err != nil {
		return nil, nil, err
	}
	sec := t1.Sub(t0).Seconds()
	w := HookWindow{Packets: p1 - p0, Sent: s1 - s0, Events: h1 - h0, Seconds: sec,
		RunCnt: ps1.RunCount - ps0.RunCount, RunTimeNs: uint64(ps1.Runtime - ps0.Runtime), ResidualNs: residual, CPU: cpuUseBetween(c0, c1, sec)}
	v := map[string]float64{
		MetricSinkPPS:        float64(w.Packets) / sec,
		MetricCPUNsPerPkt:    nan(),
		MetricEventsPerS:     nan(),
		MetricBPFNsPerRun:    nan(),
		MetricBPFNetNsPerRun: nan(),
	}
	if w.Packets > 0 {
		v[MetricCPUNsPerPkt] = w.CPU.Busy * sec * 1e9 / float64(w.Packets)
	}
	events := w.Events
	if events == 0 {
		events = w.RunCnt
	}
	if events > 0 {
		v[MetricEventsPerS] = float64(events) / sec
		if w.Packets > 0 {
			v[MetricEventsPerPkt] = float64(events) / float64(w.Packets)
		}
	}
	if w.RunCnt > 0 {
		v[MetricBPFNsPerRun] = float64(w.RunTimeNs) / float64(w.RunCnt)
		v[MetricBPFNetNsPerRun] = netRunTimeNs(w.RunTimeNs, w.RunCnt, residual) / float64(w.RunCnt)
	}
	return v, w, nil
}

// Derived is a figure computed from several series (e.g. the hooks
// study's cost per event).
type Derived struct {
	Group  string  `json:"group"`
	Case   string  `json:"case"`
	Config string  `json:"config"`
	Name   string  `json:"name"`
	Unit   string  `json:"unit"`
	Value  float64 `json:"value"`
	Low    float64 `json:"ci95_low"`
	High   float64 `json:"ci95_high"`
	How    string  `json:"how"`
}

// addHookCostPerEvent derives each configuration's cost per event: the
// difference of its CPU ns per packet to the baseline's (bootstrap
// interval), divided by its events per packet (from its own counter or
// bpf_stats, else from the count flavour of the same type).
func addHookCostPerEvent(res *Result) {
	for _, key := range res.caseKeys() {
		if key.group != GroupHooks {
			continue
		}
		for _, s := range res.Series {
			if s.Group != key.group || s.Case != key.cas || s.Metric != MetricCPUNsPerPkt || s.Compare == nil || s.Compare.DeltaLow == nil {
				continue
			}
			epp := eventsPerPacket(res, key.cas, s.Program)
			if !(epp > 0) {
				continue
			}
			res.Derived = append(res.Derived, Derived{
				Group: key.group, Case: key.cas, Config: s.Program, Name: "cost_per_event", Unit: "ns",
				Value: (s.Summary.Mean - meanOf(res, seriesID(key.group, key.cas, ProgNone, "", MetricCPUNsPerPkt))) / epp,
				Low:   *s.Compare.DeltaLow / epp, High: *s.Compare.DeltaHigh / epp,
				How: fmt.Sprintf("(mean cpu_ns_per_packet - baseline mean) / %.3g events per packet; interval: bootstrap interval of the difference / the same", epp),
			})
		}
	}
}

func meanOf(res *Result, id string) float64 {
	if s := res.Lookup(id); s != nil {
		return s.Summary.Mean
	}
	return nan()
}

// eventsPerPacket is the median events per packet of config, or of the
// count flavour of its type when config has no event count.
func eventsPerPacket(res *Result, cas, config string) float64 {
	if s := res.Lookup(seriesID(GroupHooks, cas, config, "", MetricEventsPerPkt)); s != nil && s.Summary.N > 0 {
		return s.Summary.Median
	}
	typ, _, _ := strings.Cut(config, "-")
	for _, alt := range []string{typ + "-count", typ + "-count+stats", typ + "-empty+stats"} {
		if s := res.Lookup(seriesID(GroupHooks, cas, alt, "", MetricEventsPerPkt)); s != nil && s.Summary.N > 0 {
			return s.Summary.Median
		}
	}
	return nan()
}
