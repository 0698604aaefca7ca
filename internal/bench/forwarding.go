package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/traffic"
)

// `rttscope bench forwarding` (seed 002): how fast the router namespace of
// a lab forwards under each router mode (fwdmodes.go): the kernel's IP
// forwarding, a tc BPF forwarder, an XDP forwarder, nftables flowtable
// software offload. Traffic: one TCP flow, N TCP flows, small UDP
// datagrams, client → router → server. Latency under load: ping from the
// client, and rttscope itself on the client's interface.

// GroupForwarding is the group of the forwarding study's series.
const GroupForwarding = "forwarding"

// Metrics of the forwarding study.
const (
	MetricRouterPPS    = "router_packets_per_s" // packets the two ends received (both directions)
	MetricSystemCores  = "system_cores"         // kernel (non-softirq) CPU time per second
	MetricPingRTT      = "ping_rtt_us"          // median ICMP echo RTT from the client
	MetricPingLoss     = "ping_loss"            // share of echo requests unanswered
	MetricRttscopeRTT  = "rttscope_rtt_us"      // median RTT rttscope measured on the client
	MetricRttscopeRTTs = "rttscope_samples"     // RTT samples rttscope reported in the window
	MetricDrops        = "drops_per_s"          // interface drops at the router
)

func init() {
	registerDirections(HigherFaster, MetricRouterPPS)
	registerDirections(LowerFaster, MetricPingRTT, MetricRttscopeRTT)
}

// ForwardingOptions configure `rttscope bench forwarding`.
type ForwardingOptions struct {
	Name       string
	Method     Method
	Modes      []string // router modes (ForwardModes), the first is the baseline
	TCPFlows   int      // flows of the tcp-N case (0: no such case)
	SingleTCP  bool     // the tcp-1 case
	UDP        bool     // the small-datagram UDP case
	UDPPayload int
	UDPSenders int
	// PingInterval between the echo requests of the latency probe (0: no ping).
	PingInterval time.Duration
	// RttscopeRTT runs `rttscope monitor` on the client's interface to
	// measure RTT under load (MonitorBinary, default this executable).
	RttscopeRTT   bool
	MonitorBinary string
	Progress      io.Writer
}

// DefaultForwardingOptions: every mode, 1 and 8 TCP flows, 64 B UDP.
func DefaultForwardingOptions() ForwardingOptions {
	m := DefaultMethod()
	m.CPUs = lastCPU()
	return ForwardingOptions{
		Name: "forwarding", Method: m, Modes: ForwardModes,
		TCPFlows: 8, SingleTCP: true, UDP: true, UDPPayload: 64, UDPSenders: 1,
		PingInterval: 20 * time.Millisecond, RttscopeRTT: true,
	}
}

// fwdBench is the state of a forwarding run.
type fwdBench struct {
	o       *ForwardingOptions
	lab     *lab.Lab
	routers *routerModes
	// current traffic
	sink    *traffic.Sink
	udpSink *traffic.UDPSink
	flows   *traffic.ManyFlows
	udp     *traffic.UDPFlood
	mon     *monitorProc
}

// FwdWindow is the raw record of one window.
type FwdWindow struct {
	Seconds       float64 `json:"seconds"`
	SinkBytes     uint64  `json:"sink_bytes"`
	ClientRxPkts  uint64  `json:"client_rx_packets"`
	ServerRxPkts  uint64  `json:"server_rx_packets"`
	RouterDrops   uint64  `json:"router_drops"`
	CPU           cpuUse  `json:"cpu"`
	PingSent      int     `json:"ping_sent"`
	PingReplies   int     `json:"ping_replies"`
	PingMedianUs  float64 `json:"ping_median_us,omitempty"`
	RttscopeCount int     `json:"rttscope_samples"`
	RttscopeMedUs float64 `json:"rttscope_median_us,omitempty"`
}

// RunForwarding runs the forwarding study.
func RunForwarding(ctx context.Context, o ForwardingOptions) (_ *Result, err error) {
	if err := checkRoot(o.Progress); err != nil {
		return nil, err
	}
	if len(o.Modes) == 0 {
		return nil, errors.New("forwarding: no router mode")
	}
	if o.UDP && (o.UDPPayload < 1 || o.UDPPayload > MaxUDPPayload(false) || o.UDPSenders < 1) {
		return nil, errors.New("forwarding: UDP payload must be 1-1472 bytes and senders >= 1")
	}
	if o.TCPFlows < 0 || (!o.SingleTCP && o.TCPFlows == 0 && !o.UDP) {
		return nil, errors.New("forwarding: no traffic case")
	}
	if o.MonitorBinary == "" && o.RttscopeRTT {
		if o.MonitorBinary, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	if err := o.Method.validate(); err != nil {
		return nil, err
	}
	l, err := lab.New(ctx, lab.Config{Prefix: "rttfwd", Paths: []lab.PathSpec{{}}})
	if err != nil {
		return nil, err
	}
	defer closeLab(l, &err)
	fb := &fwdBench{o: &o, lab: l}
	if fb.routers, err = newRouterModes(l); err != nil {
		return nil, err
	}
	defer fb.routers.Close()

	st := &Study{
		Group:  GroupForwarding,
		Title:  "rttscope bench forwarding: router modes in a namespace lab (client → router → server)",
		Method: o.Method,
		Metrics: []MetricSpec{
			{MetricGoodput, "Mbit/s", "bytes received by the sink per second", true},
			{MetricRouterPPS, "packets/s", "packets the client and the server received (everything the router forwarded, both directions)", true},
			{MetricSoftirqCores, "CPUs", "softirq CPU time per second of the measured CPUs (the router's forwarding runs there, with the ends' receive path)", true},
			{MetricSystemCores, "CPUs", "system (non-softirq kernel) CPU time per second of the measured CPUs", false},
			{MetricBusyCores, "CPUs", "busy CPU time per second of the measured CPUs", false},
			{MetricPingRTT, "µs", "median RTT of ICMP echo requests from the client to the server during the window", true},
			{MetricPingLoss, "share", "echo requests without reply", false},
			{MetricRttscopeRTT, "µs", "median RTT that rttscope monitor (--rate-limit 0, TCP and ICMP, on the client's interface) reported during the window", true},
			{MetricRttscopeRTTs, "samples", "RTT samples rttscope reported during the window", false},
			{MetricDrops, "packets/s", "drops counted by the router's interfaces", false},
		},
		Details: map[string]string{
			"topology":     "lab with a direct path: client eth0 ─veth─ router (mb-cli | mb-srv0) ─veth─ server eth0, every veth without GRO/TSO/checksum offload (MTU-sized frames), static neighbour entries",
			"router modes": routerModesText(),
			"latency":      fmt.Sprintf("ping every %v from the client; rttscope monitor --rate-limit 0 -C (every new TCP timestamp and ICMP echo; output read through a pipe, not pinned) on the client's eth0, running through every mode alike", o.PingInterval),
		},
	}
	for _, name := range o.Modes {
		cfg, err := fb.routers.config(ctx, name)
		if err != nil {
			return nil, err
		}
		st.Configs = append(st.Configs, cfg)
	}
	if fb.routers.tcAttach != "" {
		st.Details["tc-bpf attach"] = fb.routers.tcAttach
	}
	if o.SingleTCP {
		st.Cases = append(st.Cases, StudyCase{Name: "tcp-1", Start: func(ctx context.Context) (func() error, error) { return fb.startTCP(ctx, 1) }})
	}
	if o.TCPFlows > 0 {
		n := o.TCPFlows
		st.Cases = append(st.Cases, StudyCase{Name: fmt.Sprintf("tcp-%d", n), Start: func(ctx context.Context) (func() error, error) { return fb.startTCP(ctx, n) }})
	}
	if o.UDP {
		st.Cases = append(st.Cases, StudyCase{Name: fmt.Sprintf("udp-%dB", o.UDPPayload), Start: fb.startUDP})
	}
	st.Details["traffic"] = fmt.Sprintf("tcp-1: one TCP flow as fast as it goes; tcp-%d: %d flows; udp-%dB: %d sender(s) of %d B datagrams as fast as they go",
		o.TCPFlows, o.TCPFlows, o.UDPPayload, o.UDPSenders, o.UDPPayload)
	st.Window = func(ctx context.Context, _ StudyCase, _ StudyConfig) (map[string]float64, any, error) {
		return fb.window(ctx)
	}
	return RunStudy(ctx, o.Name, st, o.Progress)
}

func (fb *fwdBench) startMonitor() error {
	if !fb.o.RttscopeRTT {
		return nil
	}
	m, err := startMonitorProc(fb.o.MonitorBinary, fb.lab.Client.Name, lab.ClientIf,
		[]string{"--tc-mode", "tcx", "-F", "jsonl", "-T", "-C", "--rate-limit", "0"}, true, true)
	if err != nil {
		return err
	}
	fb.mon = m
	// The probe measures; it must not fight the pinned traffic for its
	// CPU (its threads start on the pinned CPU, as children inherit).
	if len(fb.o.Method.CPUs) > 0 {
		if err := unpinProcess(m.cmd.Process.Pid); err != nil {
			return fmt.Errorf("unpin the rttscope monitor: %w", err)
		}
	}
	return nil
}

func (fb *fwdBench) stopTraffic() error {
	var errs []error
	if fb.mon != nil {
		errs = append(errs, fb.mon.stop())
		fb.mon = nil
	}
	if fb.flows != nil {
		errs = append(errs, fb.flows.Stop())
		fb.flows = nil
	}
	if fb.udp != nil {
		errs = append(errs, fb.udp.Stop())
		fb.udp = nil
	}
	if fb.sink != nil {
		errs = append(errs, fb.sink.Close())
		fb.sink = nil
	}
	if fb.udpSink != nil {
		errs = append(errs, fb.udpSink.Close())
		fb.udpSink = nil
	}
	return errors.Join(errs...)
}

func (fb *fwdBench) startTCP(ctx context.Context, flows int) (func() error, error) {
	l := fb.lab
	s, err := traffic.NewSink(l.Servers[0], l.ServerAddr4[0], 0)
	if err != nil {
		return nil, err
	}
	fb.sink = s
	if err := fb.startMonitor(); err != nil {
		_ = fb.stopTraffic() // the start error is the one to report
		return nil, err
	}
	if fb.flows, err = traffic.StartManyFlows(ctx, l.Client, s.Addr(), traffic.ManyFlowsOptions{Flows: flows}); err != nil {
		_ = fb.stopTraffic() // the start error is the one to report
		return nil, err
	}
	return fb.stopTraffic, nil
}

func (fb *fwdBench) startUDP(context.Context) (func() error, error) {
	l := fb.lab
	s, err := traffic.NewUDPSink(l.Servers[0], l.ServerAddr4[0], 0)
	if err != nil {
		return nil, err
	}
	fb.udpSink = s
	if err := fb.startMonitor(); err != nil {
		_ = fb.stopTraffic() // the start error is the one to report
		return nil, err
	}
	fb.udp, err = traffic.StartUDPFlood(l.Client, netip.AddrPortFrom(l.ServerAddr4[0], s.Addr().Port()),
		traffic.UDPFloodOptions{PayloadSize: fb.o.UDPPayload, Senders: fb.o.UDPSenders})
	if err != nil {
		_ = fb.stopTraffic() // the start error is the one to report
		return nil, err
	}
	return fb.stopTraffic, nil
}

// fwdSnap is one reading of a window's counters.
type fwdSnap struct {
	t            time.Time
	sink         uint64
	cliRx, srvRx uint64
	drops        uint64
	cpu          cpuTimes
}

func linkStats(n *lab.Node, ifname string) (netlink.LinkStatistics, error) {
	var st netlink.LinkStatistics
	err := n.Do(func() error {
		lk, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		if s := lk.Attrs().Statistics; s != nil {
			st = *s
		}
		return nil
	})
	return st, err
}

func (fb *fwdBench) snap() (fwdSnap, error) {
	s := fwdSnap{}
	cli, err := linkStats(fb.lab.Client, lab.ClientIf)
	if err != nil {
		return s, err
	}
	srv, err := linkStats(fb.lab.Servers[0], lab.ServerIf)
	if err != nil {
		return s, err
	}
	s.cliRx, s.srvRx = cli.RxPackets, srv.RxPackets
	for _, ifn := range []string{fb.lab.MiddleboxClientIf, fb.lab.MiddleboxServerIf[0]} {
		st, err := linkStats(fb.lab.Middlebox, ifn)
		if err != nil {
			return s, err
		}
		s.drops += st.RxDropped + st.TxDropped
	}
	if fb.sink != nil {
		s.sink = fb.sink.Bytes()
	}
	if fb.udpSink != nil {
		s.sink = fb.udpSink.Bytes()
	}
	s.cpu = readCPUTimesOf(fb.o.Method.CPUs)
	s.t = time.Now()
	return s, nil
}

func (fb *fwdBench) window(ctx context.Context) (map[string]float64, any, error) {
	d := fb.o.Method.Duration
	var (
		wg      sync.WaitGroup
		replies []traffic.PingReply
		pingErr error
		sent    int
	)
	if fb.o.PingInterval > 0 {
		sent = max(1, int(d/fb.o.PingInterval))
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies, pingErr = traffic.PingWith(ctx, fb.lab.Client, fb.lab.ServerAddr4[0],
				traffic.PingOptions{Count: sent, Interval: fb.o.PingInterval, Wait: 200 * time.Millisecond})
		}()
	}
	s0, err := fb.snap()
	if err != nil {
		wg.Wait()
		return nil, nil, err
	}
	serr := sleepCtx(ctx, d)
	s1, err := fb.snap()
	wg.Wait()
	if err = errors.Join(serr, err, pingErr); err != nil {
		return nil, nil, err
	}
	sec := s1.t.Sub(s0.t).Seconds()
	w := FwdWindow{Seconds: sec, SinkBytes: s1.sink - s0.sink, ClientRxPkts: s1.cliRx - s0.cliRx, ServerRxPkts: s1.srvRx - s0.srvRx,
		RouterDrops: s1.drops - s0.drops, CPU: cpuUseBetween(s0.cpu, s1.cpu, sec), PingSent: sent, PingReplies: len(replies)}
	v := map[string]float64{
		MetricGoodput:      float64(w.SinkBytes) * 8 / sec / 1e6,
		MetricRouterPPS:    float64(w.ClientRxPkts+w.ServerRxPkts) / sec,
		MetricSoftirqCores: w.CPU.Softirq,
		MetricSystemCores:  w.CPU.System,
		MetricBusyCores:    w.CPU.Busy,
		MetricDrops:        float64(w.RouterDrops) / sec,
		MetricPingRTT:      nan(),
		MetricRttscopeRTT:  nan(),
	}
	if sent > 0 {
		rtts := make([]float64, len(replies))
		for i, r := range replies {
			rtts[i] = float64(r.RTT) / 1e3
		}
		if len(rtts) > 0 {
			w.PingMedianUs = Median(rtts)
			v[MetricPingRTT] = w.PingMedianUs
		}
		v[MetricPingLoss] = 1 - float64(len(replies))/float64(sent)
	}
	if fb.mon != nil {
		r := fb.mon.rttsBetween(s0.t, s1.t)
		w.RttscopeCount = len(r)
		v[MetricRttscopeRTTs] = float64(len(r))
		if len(r) > 0 {
			w.RttscopeMedUs = Median(r) / 1e3
			v[MetricRttscopeRTT] = w.RttscopeMedUs
		}
	}
	return v, w, nil
}
