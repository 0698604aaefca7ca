package main

import (
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/flagval"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pdm"
)

func init() { subcommands = append(subcommands, newPDMCmd) }

func newPDMCmd() *cobra.Command {
	opts := pdm.Options{Log: os.Stderr}
	opts.TCMode = loader.TCModes[0]
	var (
		of        outputFlags
		read      string
		localNets []netip.Prefix
	)
	cmd := &cobra.Command{
		Use:   "pdm {-i IFNAME [-i IFNAME ...] | --read FILE} [flags]",
		Short: "RFC 8250 Performance and Diagnostic Metrics for IPv6 (insert and decode, eBPF)",
		Long: `pdm adds the IPv6 Performance and Diagnostic Metrics destination option
(RFC 8250) to the IPv6 TCP, UDP and ICMPv6 echo packets leaving the
interfaces, and decodes the PDM options of the packets arriving: for each one
it writes the peer's server delay (dtlr), the peer's round trip (dtls), this
host's round trip to the peer (round_trip) and the network RTT without the
peer's delay (network_rtt). Both hosts of a conversation run it. --passive
only decodes (both directions), never changes a packet. --read FILE decodes
the PDM options in a pcap or pcapng capture as --passive does live (implies
--passive; times are capture times; also rttscope replay --pdm FILE).

--pdm-report interval writes, instead of a record per option, a record per
5-tuple and --interval with the count, min, mean, max, p50/p90/p95/p99 and
histogram of dtlr, dtls and network_rtt (the monitor's log-linear bins).
Records go to the monitor's outputs and formats (standard, json, jsonl,
parquet; --write with rotation and compression) through the privacy
options (--anonymize ...; docs/privacy.md).

Packets that already carry extension headers, fragments, GSO packets and
packets that would exceed the interface MTU leave unchanged and are counted
(docs/pdm.md). Receivers must accept unknown destination options:
sysctl net.ipv6.max_dst_opts_number >= 1 (Linux's default is 8).`,
		Example: `  rttscope pdm -i eth0
  rttscope pdm -i eth0 --passive -F jsonl -w pdm.jsonl --rotate-interval 1h --compress zstd
  rttscope pdm -i eth0 --pdm-report interval --interval 10s -F json --anonymize pfx
  rttscope pdm --read trace.pcapng --local-net 2001:db8:1::/48`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPDMReportFlags(cmd, opts.Reporting); err != nil {
				return err
			}
			if read != "" {
				if len(opts.Interfaces) > 0 || opts.Netns != "" || opts.Duration > 0 {
					return usageError{"--read decodes a capture: -i, --netns and --duration do not apply"}
				}
				return runPDMRead(cmd, &of, pdm.ReadOptions{Path: read, MapSize: opts.MapSize, Lifetime: opts.Lifetime,
					LocalNets: localNets, Reporting: opts.Reporting})
			}
			if len(localNets) > 0 {
				return usageError{"--local-net only applies with --read"}
			}
			if err := opts.Validate(); err != nil {
				return usageError{err.Error()}
			}
			if err := checkPDMFormat(&of); err != nil {
				return err
			}
			out, finish, err := of.open()
			if err != nil {
				return err
			}
			opts.Output = out
			ignoreSIGPIPE()
			ctx, stop := stopContext(cmd.Context(), !of.hupReopens())
			defer stop()
			of.setTimeOrigin(time.Now().UnixNano()) // --relative-time counts from the start
			err = pdm.Run(ctx, opts)
			if ferr := finish(); err == nil {
				err = ferr
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&opts.Interfaces, "interface", "i", nil, "interface to hook (repeatable)")
	fl.StringVar(&opts.Netns, "netns", "", "network namespace (a name from ip netns list) the interfaces are in")
	fl.Var(flagval.OneOf(&opts.TCMode, loader.TCModes...), "tc-mode", "tc attach: auto (TCX, else clsact), tcx (Linux 6.6+) or clsact")
	addPDMFlags(fl, &opts.Config, &opts.Reporting)
	fl.BoolVar(&opts.Passive, "passive", false, "decode PDM options seen in both directions, insert nothing")
	of.register(cmd)
	fl.StringVarP(&read, "read", "r", "", "decode the PDM options in a pcap/pcapng capture (\"-\": stdin) instead of hooking interfaces; implies --passive")
	fl.Var(flagval.NewPrefixes(&localNets), "local-net", "with --read: packets from this prefix are egress, others ingress (repeatable; default: the capture's direction, else the first sender between two addresses is local)")
	fl.DurationVar(&opts.Duration, "duration", 0, "stop after this long (0 = run until SIGINT/SIGTERM)")
	cmd.AddCommand(newPDMBenchCmd())
	return cmd
}

// addPDMFlags defines the flags of the PDM state and report, shared by
// rttscope pdm and rttscope replay --pdm.
func addPDMFlags(fl *pflag.FlagSet, c *pdm.Config, r *pdm.Reporting) {
	c.MapSize, c.Lifetime = pdm.DefaultMapSize, pdm.DefaultLifetime
	r.Report, r.Interval = pdm.ReportModes[0], 10*time.Second
	fl.Uint32Var(&c.MapSize, "pdm-map-size", c.MapSize, "5-tuples with PDM state; when full, new ones are refused (counted), never evicted")
	fl.DurationVar(&c.Lifetime, "pdm-lifetime", c.Lifetime, "state of a 5-tuple idle this long starts over (new random PSN) and is freed")
	fl.Var(flagval.OneOf(&r.Report, pdm.ReportModes...), "pdm-report", "packet (a record per PDM option) or interval (per 5-tuple and --interval: count, min, mean, max, quantiles and histogram of dtlr, dtls and network_rtt)")
	fl.DurationVar(&r.Interval, "interval", r.Interval, "with --pdm-report interval: the length of the intervals (capture time with --read)")
}

// checkPDMReportFlags refuses --interval without --pdm-report interval.
func checkPDMReportFlags(cmd *cobra.Command, r pdm.Reporting) error {
	if cmd.Flags().Changed("interval") && r.Report != pdm.ReportInterval {
		return usageError{"--interval needs --pdm-report interval"}
	}
	if err := r.Validate(); err != nil {
		return usageError{err.Error()}
	}
	return nil
}

// checkPDMFormat refuses the one format without PDM records.
func checkPDMFormat(of *outputFlags) error {
	if of.format == "ppviz" {
		return usageError{"-F ppviz has no PDM records: use standard, json, jsonl or parquet"}
	}
	return nil
}

// runPDMRead decodes the PDM options of a capture (rttscope pdm --read,
// rttscope replay --pdm) into the output of of.
func runPDMRead(cmd *cobra.Command, of *outputFlags, ro pdm.ReadOptions) error {
	if err := ro.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if err := checkPDMFormat(of); err != nil {
		return err
	}
	out, finish, err := of.open()
	if err != nil {
		return err
	}
	ro.Output, ro.Log = out, os.Stderr
	ro.FirstPacket = of.setTimeOrigin // --relative-time counts from the first packet
	// Offline: nothing to undo, so SIGHUP keeps its default.
	ctx, stop := stopContext(cmd.Context(), false)
	defer stop()
	_, err = pdm.Read(ctx, ro)
	// Finish the output (closing "]" for json) before the error is
	// reported.
	if ferr := finish(); err == nil {
		err = ferr
	}
	return err
}

func newPDMBenchCmd() *cobra.Command {
	o := pdm.BenchOptions{ThroughputDuration: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Per-packet cost of the PDM programs (BPF_PROG_TEST_RUN), TCP throughput with PDM off/on; results under bench/results/",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Rounds < 1 || o.Runs < 1 {
				return usageError{"--rounds and --runs must be positive"}
			}
			if o.ThroughputRounds < 0 || o.ThroughputDuration <= 0 {
				return usageError{"--throughput-rounds must be >= 0 and --throughput-duration positive"}
			}
			_, err := pdm.Bench(cmd.Context(), o, os.Stdout)
			return err
		},
	}
	cmd.Flags().StringVarP(&o.Dir, "output-dir", "o", "bench/results", "directory for the JSON result (empty: print only)")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 15, "interleaved rounds of every case")
	cmd.Flags().IntVar(&o.Runs, "runs", 2000, "program runs per case and round")
	cmd.Flags().IntVar(&o.ThroughputRounds, "throughput-rounds", 5, "rounds of TCP bulk transfers with PDM off and on in a lab (0: none)")
	cmd.Flags().DurationVar(&o.ThroughputDuration, "throughput-duration", o.ThroughputDuration, "length of each bulk transfer")
	return cmd
}
