package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/flagval"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pdm"
)

func init() { subcommands = append(subcommands, newPDMCmd) }

func newPDMCmd() *cobra.Command {
	opts := pdm.Options{Log: os.Stderr}
	opts.MapSize, opts.Lifetime, opts.TCMode = pdm.DefaultMapSize, pdm.DefaultLifetime, loader.TCModes[0]
	opts.Report, opts.Interval = pdm.ReportModes[0], 10*time.Second
	format, write, read := pdm.Formats[0], "", ""
	var localNets []netip.Prefix
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
--passive; times are capture times).

Packets that already carry extension headers, fragments, GSO packets and
packets that would exceed the interface MTU leave unchanged and are counted
(docs/pdm.md). Receivers must accept unknown destination options:
sysctl net.ipv6.max_dst_opts_number >= 1 (Linux's default is 8).`,
		Example: `  rttscope pdm -i eth0
  rttscope pdm -i eth0 --passive -F json -w pdm.json
  rttscope pdm --read trace.pcapng --local-net 2001:db8:1::/48`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("interval") && opts.Report != pdm.ReportInterval {
				return usageError{"--interval needs --pdm-report interval"}
			}
			if read != "" {
				if len(opts.Interfaces) > 0 || opts.Netns != "" || opts.Duration > 0 {
					return usageError{"--read decodes a capture: -i, --netns and --duration do not apply"}
				}
				if err := opts.Config.Validate(); err != nil {
					return usageError{err.Error()}
				}
				if opts.Report != pdm.ReportPacket {
					return usageError{"--read writes a record per PDM option: --pdm-report interval does not apply"}
				}
			} else if len(localNets) > 0 {
				return usageError{"--local-net only applies with --read"}
			} else if err := opts.Validate(); err != nil {
				return usageError{err.Error()}
			}
			out := os.Stdout
			if write != "" {
				f, err := os.OpenFile(write, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					return fmt.Errorf("open output: %w", err)
				}
				defer f.Close()
				out = f
			}
			w, err := pdm.NewWriter(out, format)
			if err != nil {
				return usageError{err.Error()}
			}
			opts.Output = w
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if read != "" {
				_, err = pdm.Read(ctx, pdm.ReadOptions{Path: read, MapSize: opts.MapSize, Lifetime: opts.Lifetime,
					LocalNets: localNets, Output: w, Log: os.Stderr})
			} else {
				err = pdm.Run(ctx, opts)
			}
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&opts.Interfaces, "interface", "i", nil, "interface to hook (repeatable)")
	fl.StringVar(&opts.Netns, "netns", "", "network namespace (a name from ip netns list) the interfaces are in")
	fl.Var(flagval.OneOf(&opts.TCMode, loader.TCModes...), "tc-mode", "tc attach: auto (TCX, else clsact), tcx (Linux 6.6+) or clsact")
	fl.Uint32Var(&opts.MapSize, "pdm-map-size", opts.MapSize, "5-tuples with PDM state; when full, new ones are refused (counted), never evicted")
	fl.DurationVar(&opts.Lifetime, "pdm-lifetime", opts.Lifetime, "state of a 5-tuple idle this long starts over (new random PSN) and is freed")
	fl.Var(flagval.OneOf(&opts.Report, pdm.ReportModes...), "pdm-report", "packet (a record per PDM option received) or interval (count, sum, min, max of dtlr, dtls and network_rtt per 5-tuple, folded in the kernel, a record per --interval)")
	fl.DurationVar(&opts.Interval, "interval", opts.Interval, "with --pdm-report interval: how often to write the records")
	fl.BoolVar(&opts.Passive, "passive", false, "decode PDM options seen in both directions, insert nothing")
	fl.VarP(flagval.OneOf(&format, pdm.Formats...), "format", "F", "output format: jsonl (one object per line) or json (one array)")
	fl.StringVarP(&write, "write", "w", "", "append output to FILE instead of stdout")
	fl.StringVarP(&read, "read", "r", "", "decode the PDM options in a pcap/pcapng capture (\"-\": stdin) instead of hooking interfaces; implies --passive")
	fl.Var(flagval.NewPrefixes(&localNets), "local-net", "with --read: packets from this prefix are egress, others ingress (repeatable; default: the capture's direction, else the first sender between two addresses is local)")
	fl.DurationVar(&opts.Duration, "duration", 0, "stop after this long (0 = run until SIGINT/SIGTERM)")
	cmd.AddCommand(newPDMBenchCmd())
	return cmd
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
