package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/flagval"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/monitor"
	"github.com/rttscope/rttscope/internal/sampling"
)

func init() { subcommands = append(subcommands, newMonitorCmd) }

func newMonitorCmd() *cobra.Command {
	so := sampling.Default()
	opts := monitor.Options{Log: os.Stderr}
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "monitor -i IFNAME [-i IFNAME ...] [flags]",
		Short: "Report per-flow RTTs of the traffic passing interfaces (live, eBPF)",
		Long: `monitor attaches eBPF programs to the egress (tc/TCX) and ingress (tc/TCX or
XDP) hooks of each interface and reports round-trip times of the flows that
pass, without sending any packet: for TCP from the timestamp option (a TSval
seen in one direction, echoed as TSecr in the other) or, in segments without
it, from sequence numbers and the ACK that covers them (--tcp-mode), and from
the handshake (--tcp-handshake); for ICMP from echo request/reply pairs. Each
sample names its source (json: source; docs/sources.md). It only observes:
packets are never dropped or changed.

Samples are taken in both directions at each interface. A sample "matched on
egress" (json: match_on_egress) was completed by a packet leaving this host,
so it includes this host's own forwarding or processing delay.

The hooks are BPF links held by this process: they disappear when it exits,
even on kill -9. On kernels before 6.6 the legacy clsact attach is used
(--tc-mode clsact), which is removed on orderly exit only: SIGINT, SIGTERM,
SIGHUP (unless -w FILE, which SIGHUP reopens) and a closed output pipe
(| head: exit status 141) all end the run in order.`,
		Example: `  rttscope monitor -i eth0
  rttscope monitor -i eth0 -i eth1 -C -F json -w /var/log/rtt.json
  rttscope monitor -i eth0 -r 0 -F ppviz > rtt.ppviz
  rttscope monitor --netns mylab-mb -i veth1 -I xdp
  rttscope monitor -i eth0 --aggregate 10s -F parquet -w /var/log/rtt/rtt.parquet \
      --kafka brokers=k1:9092,topic=rtt-site1 --metrics-addr :9464 --anonymize pfx`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.BPF, opts.Report = so.BPF, so.Report
			if of.sinks.metricsAddr != "" && !cmd.Flags().Changed("stats-interval") {
				// The self-telemetry metrics are those of the stats records.
				opts.StatsInterval = metricsStatsInterval
			}
			if err := opts.Validate(); err != nil {
				return usageError{err.Error()}
			}
			out, finish, err := of.open()
			if err != nil {
				return err
			}
			ignoreSIGPIPE()
			ctx, stop := stopContext(cmd.Context(), !of.hupReopens())
			defer stop()
			opts.Output = out
			of.setTimeOrigin(time.Now().UnixNano()) // --relative-time counts from the start
			err = monitor.Run(ctx, opts)
			if ferr := finish(); err == nil {
				err = ferr
			}
			return err
		},
	}
	so.AddFlags(cmd.Flags(), nil)
	of.register(cmd)
	fl := cmd.Flags()
	fl.StringArrayVarP(&opts.Interfaces, "interface", "i", nil, "interface to monitor (repeatable)")
	fl.StringVar(&opts.Netns, "netns", "", "network namespace (a name from ip netns list) the interfaces are in")
	a := &opts.Attach
	a.IngressHook, a.XDPMode, a.TCMode = loader.IngressHooks[0], loader.XDPModes[0], loader.TCModes[0]
	fl.VarP(flagval.OneOf(&a.IngressHook, loader.IngressHooks...), "ingress-hook", "I", "ingress hook: tc or xdp")
	fl.VarP(flagval.OneOf(&a.XDPMode, loader.XDPModes...).Alias("unspecified", loader.XDPModeAuto), "xdp-mode", "x", "XDP attach mode with -I xdp: auto (native, else generic; ePPing's unspecified), native or generic")
	fl.Var(flagval.OneOf(&a.TCMode, loader.TCModes...), "tc-mode", "tc attach: auto (TCX, else clsact), tcx (Linux 6.6+) or clsact")
	opts.CleanupInterval = time.Second
	fl.VarP(flagval.NewSeconds(&opts.CleanupInterval), "cleanup-interval", "c", "how often idle flows and unanswered timestamps are expired (in the kernel): seconds or a duration; 0 = never (as ePPing's -c 0)")
	fl.DurationVar(&opts.StatsInterval, "stats-interval", 0, "write a stats record this often (0 = only at exit; 10s with --metrics-addr); to stderr for standard/ppviz, in the stream for json/jsonl")
	fl.BoolVar(&opts.BPFStats, "bpf-stats", false, "enable the kernel's BPF run time accounting for the run, so stats records give each program's run time per packet (costs every BPF program on the host about 20-80 ns per run; without it the figures appear only when sysctl kernel.bpf_stats_enabled=1)")
	fl.DurationVar(&opts.Duration, "duration", 0, "stop after this long (0 = run until SIGINT/SIGTERM)")
	return cmd
}
