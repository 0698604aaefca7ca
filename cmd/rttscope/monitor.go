package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/monitor"
	"github.com/rttscope/rttscope/internal/output"
)

func init() { subcommands = append(subcommands, newMonitorCmd) }

// sampleFlags are the flags that shape samples; replay shares them.
type sampleFlags struct {
	rateLimit        string
	rttRate          float64
	rttType          string
	tcp, icmp        bool
	includeSYN       bool
	includeLocal     bool
	tcpFlowTimeout   time.Duration
	otherFlowTimeout time.Duration
	tsTimeout        time.Duration
	flowMapSize      uint32
	tsMapSize        uint32
	ringbufSize      uint32
	aggregate        time.Duration
	aggV4, aggV6     uint8
	aggReverse       bool
	prefixMapSize    uint32
	flowSummary      bool
	flowSummaryEvery time.Duration
}

func (f *sampleFlags) register(cmd *cobra.Command, withLocal bool) {
	fl := cmd.Flags()
	def := loader.DefaultConfig()
	fl.StringVarP(&f.rateLimit, "rate-limit", "r", "100", "minimum time between two timestamps of one flow direction: milliseconds (ePPing style, e.g. 100) or a duration (e.g. 250us); 0 samples every new identifier")
	fl.Float64VarP(&f.rttRate, "rtt-rate", "R", 0, "rate-limit by RTT instead: at most one timestamp per RTT-RATE times the flow's RTT (e.g. 1 = once per RTT); 0 = off")
	fl.StringVarP(&f.rttType, "rtt-type", "t", "min", "RTT the --rtt-rate applies to: min or smoothed")
	fl.BoolVarP(&f.tcp, "tcp", "T", false, "report TCP RTTs from TCP timestamps (the default when neither -T nor -C is given)")
	fl.BoolVarP(&f.icmp, "icmp", "C", false, "report ICMP and ICMPv6 echo RTTs")
	fl.BoolVarP(&f.includeSYN, "include-syn", "s", false, "also timestamp SYNs, so handshakes open flows and give samples (can fill state under SYN floods)")
	if withLocal {
		fl.BoolVarP(&f.includeLocal, "include-local", "l", false, "also timestamp packets addressed to this host, giving samples of its own response time (matched on egress)")
	}
	fl.DurationVar(&f.tcpFlowTimeout, "tcp-flow-timeout", def.TCPFlowTimeout, "forget TCP flows idle this long (reported as closing due to flow timeout)")
	fl.DurationVar(&f.otherFlowTimeout, "icmp-flow-timeout", def.OtherFlowTimeout, "forget ICMP flows idle this long")
	fl.DurationVar(&f.tsTimeout, "timestamp-timeout", def.TimestampTimeout, "drop timestamps not answered within this time")
	fl.Uint32Var(&f.flowMapSize, "flow-map-size", def.FlowMapSize, "maximum number of concurrent flows tracked in the kernel")
	fl.Uint32Var(&f.tsMapSize, "timestamp-map-size", def.TimestampMapSize, "maximum number of outstanding timestamps in the kernel")
	fl.Uint32Var(&f.ringbufSize, "ringbuf-size", def.RingbufSize, "size of the kernel-to-user event ring buffer in bytes (power of two)")
	fl.DurationVar(&f.aggregate, "aggregate", 0, "aggregated mode: summarise RTTs (log-linear histograms, quantiles) and traffic per IP prefix in the kernel and report every INTERVAL (e.g. 10s) instead of per-sample and flow events; 0 = off")
	fl.Uint8Var(&f.aggV4, "aggregate-subnets-v4", def.AggPrefixV4, "prefix length of IPv4 aggregation prefixes (0-32)")
	fl.Uint8Var(&f.aggV6, "aggregate-subnets-v6", def.AggPrefixV6, "prefix length of IPv6 aggregation prefixes (0-128)")
	fl.BoolVar(&f.aggReverse, "aggregate-reverse", false, "aggregate RTTs on the destination of the reply (the host that sent the timestamped packet) instead of its source, and traffic on the local instead of the remote address")
	fl.BoolVar(&f.flowSummary, "flow-summary", false, "report one summary per flow when it ends (FIN, RST, timeout): packets and bytes each way, duration, RTT count, min, mean, p50, p99, max (kernel memory: see docs/aggregation.md)")
	fl.DurationVar(&f.flowSummaryEvery, "flow-summary-interval", 0, "with --flow-summary, also report every live flow this often (0 = only at the end)")
	fl.Uint32Var(&f.prefixMapSize, "prefix-map-size", def.PrefixMapSize, "maximum number of prefixes per aggregation interval (kernel memory: see docs/aggregation.md)")
}

// config turns the flags into a BPF configuration.
func (f *sampleFlags) config() (loader.Config, error) {
	cfg := loader.DefaultConfig()
	rl, err := parseMillis(f.rateLimit)
	if err != nil {
		return cfg, usageError{fmt.Sprintf("invalid --rate-limit %q: want milliseconds (e.g. 100) or a duration (e.g. 250us)", f.rateLimit)}
	}
	cfg.RateLimit = rl
	cfg.RTTRate = f.rttRate
	switch f.rttType {
	case "min":
	case "smoothed", "srtt":
		cfg.RTTRateUseSRTT = true
	default:
		return cfg, usageError{fmt.Sprintf("invalid --rtt-type %q: want min or smoothed", f.rttType)}
	}
	cfg.TrackTCP = f.tcp || !f.icmp
	cfg.TrackICMP = f.icmp
	cfg.IncludeSYN = f.includeSYN
	cfg.IncludeLocal = f.includeLocal
	cfg.TCPFlowTimeout = f.tcpFlowTimeout
	cfg.OtherFlowTimeout = f.otherFlowTimeout
	cfg.TimestampTimeout = f.tsTimeout
	cfg.FlowMapSize = f.flowMapSize
	cfg.TimestampMapSize = f.tsMapSize
	cfg.RingbufSize = f.ringbufSize
	if f.aggregate < 0 {
		return cfg, usageError{"--aggregate must be >= 0"}
	}
	cfg.Aggregate, cfg.AggregateInterval = f.aggregate > 0, f.aggregate
	cfg.AggPrefixV4, cfg.AggPrefixV6 = f.aggV4, f.aggV6
	cfg.AggReverse = f.aggReverse
	cfg.PrefixMapSize = f.prefixMapSize
	if f.flowSummaryEvery < 0 || (f.flowSummaryEvery > 0 && !f.flowSummary) {
		return cfg, usageError{"--flow-summary-interval needs --flow-summary and must be >= 0"}
	}
	cfg.FlowSummary, cfg.FlowSummaryInterval = f.flowSummary, f.flowSummaryEvery
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err.Error()}
	}
	return cfg, nil
}

// parseMillis accepts a plain number of milliseconds (as ePPing does) or a
// Go duration.
func parseMillis(s string) (time.Duration, error) {
	if ms, err := strconv.ParseFloat(s, 64); err == nil {
		if ms < 0 || ms > 1e9 {
			return 0, fmt.Errorf("out of range")
		}
		return time.Duration(ms * float64(time.Millisecond)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration")
	}
	return d, nil
}

// outputFlags choose the format and destination.
type outputFlags struct {
	format string
	write  string
}

func (o *outputFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "format", "F", "standard", "output format: "+strings.Join(format.Names(), ", ")+" (see README: compatible with ePPing)")
	cmd.Flags().StringVarP(&o.write, "write", "w", "", "append output to FILE instead of stdout; SIGHUP reopens it (log rotation)")
}

// open returns the writer and a function that finishes the output.
func (o *outputFlags) open() (format.Writer, func() error, error) {
	if !validFormat(o.format) {
		return nil, nil, usageError{fmt.Sprintf("invalid --format %q: want one of %s", o.format, strings.Join(format.Names(), ", "))}
	}
	f, err := output.Open(o.write)
	if err != nil {
		return nil, nil, err
	}
	w, err := format.New(o.format, f, format.Options{})
	if err != nil {
		f.Close()
		return nil, nil, usageError{err.Error()}
	}
	f.SetRestarter(w)
	stop := output.NotifyReopen(f, func(err error) { fmt.Fprintln(os.Stderr, "rttscope: reopen output:", err) })
	return w, func() error {
		stop()
		werr := w.Close()
		if ferr := f.Close(); werr == nil {
			werr = ferr
		}
		return werr
	}, nil
}

func validFormat(name string) bool {
	for _, n := range format.Names() {
		if n == name {
			return true
		}
	}
	return false
}

func newMonitorCmd() *cobra.Command {
	var (
		sf              sampleFlags
		of              outputFlags
		ifaces          []string
		netns           string
		ingressHook     string
		xdpMode         string
		tcMode          string
		cleanupInterval time.Duration
		statsInterval   time.Duration
		bpfStats        bool
		duration        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "monitor -i IFNAME [-i IFNAME ...] [flags]",
		Short: "Report per-flow RTTs of the traffic passing interfaces (live, eBPF)",
		Long: `monitor attaches eBPF programs to the egress (tc/TCX) and ingress (tc/TCX or
XDP) hooks of each interface and reports round-trip times of the flows that
pass, without sending any packet: for TCP from the timestamp option (a TSval
seen in one direction, echoed as TSecr in the other), for ICMP from echo
request/reply pairs. It only observes: packets are never dropped or changed.

Samples are taken in both directions at each interface. A sample "matched on
egress" (json: match_on_egress) was completed by a packet leaving this host,
so it includes this host's own forwarding or processing delay.

The hooks are BPF links held by this process: they disappear when it exits,
even on kill -9. On kernels before 6.6 the legacy clsact attach is used
(--tc-mode clsact), which is removed on orderly exit only.`,
		Example: `  rttscope monitor -i eth0
  rttscope monitor -i eth0 -i eth1 -C -F json -w /var/log/rtt.json
  rttscope monitor -i eth0 -r 0 -F ppviz > rtt.ppviz
  rttscope monitor --netns mylab-mb -i veth1 -I xdp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := sf.config()
			if err != nil {
				return err
			}
			if ingressHook != loader.IngressTC && ingressHook != loader.IngressXDP {
				return usageError{fmt.Sprintf("invalid --ingress-hook %q: want tc or xdp", ingressHook)}
			}
			if xdpMode != loader.XDPModeAuto && xdpMode != loader.XDPModeNative && xdpMode != loader.XDPModeGeneric {
				return usageError{fmt.Sprintf("invalid --xdp-mode %q: want auto, native or generic", xdpMode)}
			}
			if tcMode != loader.TCModeAuto && tcMode != loader.TCModeTCX && tcMode != loader.TCModeClsact {
				return usageError{fmt.Sprintf("invalid --tc-mode %q: want auto, tcx or clsact", tcMode)}
			}
			if len(ifaces) == 0 {
				return usageError{"no interface given: use -i IFNAME (repeatable)"}
			}
			if cleanupInterval <= 0 || statsInterval < 0 || duration < 0 {
				return usageError{"--cleanup-interval must be > 0; --stats-interval and --duration must be >= 0"}
			}
			out, finish, err := of.open()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err = monitor.Run(ctx, monitor.Options{
				Interfaces:      ifaces,
				Netns:           netns,
				Attach:          loader.AttachOptions{IngressHook: ingressHook, XDPMode: xdpMode, TCMode: tcMode},
				BPF:             cfg,
				CleanupInterval: cleanupInterval,
				StatsInterval:   statsInterval,
				BPFStats:        bpfStats,
				Duration:        duration,
				Output:          out,
				Log:             os.Stderr,
			})
			if ferr := finish(); err == nil {
				err = ferr
			}
			return err
		},
	}
	sf.register(cmd, true)
	of.register(cmd)
	fl := cmd.Flags()
	fl.StringArrayVarP(&ifaces, "interface", "i", nil, "interface to monitor (repeatable)")
	fl.StringVar(&netns, "netns", "", "network namespace (a name from ip netns list) the interfaces are in")
	fl.StringVarP(&ingressHook, "ingress-hook", "I", loader.IngressTC, "ingress hook: tc or xdp")
	fl.StringVarP(&xdpMode, "xdp-mode", "x", loader.XDPModeAuto, "XDP attach mode with -I xdp: auto (native, else generic), native or generic")
	fl.StringVar(&tcMode, "tc-mode", loader.TCModeAuto, "tc attach: auto (TCX, else clsact), tcx (Linux 6.6+) or clsact")
	fl.DurationVarP(&cleanupInterval, "cleanup-interval", "c", time.Second, "how often idle flows and unanswered timestamps are expired (in the kernel)")
	fl.DurationVar(&statsInterval, "stats-interval", 0, "write a stats record this often (0 = only at exit); to stderr for standard/ppviz, in the stream for json/jsonl")
	fl.BoolVar(&bpfStats, "bpf-stats", false, "enable the kernel's BPF run time accounting for the run, so stats records give each program's run time per packet (costs every BPF program on the host about 20-80 ns per run; without it the figures appear only when sysctl kernel.bpf_stats_enabled=1)")
	fl.DurationVar(&duration, "duration", 0, "stop after this long (0 = run until SIGINT/SIGTERM)")
	return cmd
}
