package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/flagval"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pdm"
	"github.com/rttscope/rttscope/internal/replay"
	"github.com/rttscope/rttscope/internal/sampling"
)

func init() { subcommands = append(subcommands, newReplayCmd) }

const replayLong = `replay runs a packet capture through the very BPF programs that monitor
attaches live (through BPF_PROG_TEST_RUN), so a capture and a live run of the
same traffic give the same samples. It reads pcap and pcapng files, gzip
compressed or not ("-" is standard input), of link types Ethernet, Linux
cooked (SLL, SLL2) and raw IP, and writes every output format of monitor.
Loading BPF programs needs root (or CAP_BPF and CAP_NET_ADMIN).

Time: each packet's capture timestamp is the programs' "now", so RTTs are
differences of capture timestamps. Idle flows and unanswered timestamps are
expired as live, by capture time: at every multiple of --cleanup-interval
(since the Unix epoch) that passes between two packets. Flows still open at
the end of the file are not reported as closing.

Direction: the programs need to know which packets left the observation
point (egress) and which arrived (ingress); it decides only whether a sample
is "matched on egress", never an RTT value. Per packet, the first rule that
applies wins:
  1. the capture's own direction: pcapng packet flags (tshark/dumpcap), or
     the packet type of Linux cooked captures (tcpdump -i any): outbound
     is egress, inbound is ingress;
  2. with --local-net or --local-mac: packets sent FROM a local-net address
     or a local MAC address are egress (the observation point faces the
     outside), all others ingress;
  3. otherwise per flow: the side that sent the flow's SYN (or, when no SYN
     was captured, that sent the flow's first packet; the receiver if that
     packet is a SYN-ACK or an echo reply) is the inside, and its packets
     are egress.

--pdm decodes the RFC 8250 PDM options of the capture instead, as
rttscope pdm --read FILE does (docs/pdm.md): the PDM programs, a record per
option or (--pdm-report interval) per 5-tuple and interval of capture time,
in the same formats and outputs. It takes --local-net, the output and
privacy flags and the --pdm-* flags; the RTT flags do not apply.

Captures on "any" (tcpdump -i any) of a forwarding host hold each forwarded
packet twice, once per interface: capture one interface instead (keeping the
direction: tcpdump -i any -y LINUX_SLL2 ifindex N), or keep one interface
of a multi-interface pcapng with --interface-id.

Throughput: every packet is one BPF_PROG_TEST_RUN system call (a couple of
microseconds in the kernel). With --workers N > 1 (default: one per CPU) the
flows are spread over N threads; events are then written in time order
per batch of packets, so only events of different flows with equal
timestamps may come out in another order than with --workers 1.

A truncated, corrupt or unsupported file stops the replay with an error that
names the file and the packet index (0-based: Wireshark's frame number minus
one), after the events computed so far have been written (exit code 1).`

func newReplayCmd() *cobra.Command {
	so := sampling.Default()
	opts := replay.Options{}
	var (
		of     outputFlags
		decPDM bool
		pdmCfg pdm.Config
		pdmRep pdm.Reporting
	)
	cmd := &cobra.Command{
		Use:   "replay [flags] FILE",
		Short: "Report per-flow RTTs of a pcap/pcapng capture, timed by the capture (BPF)",
		Long:  replayLong,
		Example: `  rttscope replay trace.pcapng
  rttscope replay -C -F json trace.pcap.gz > rtt.json
  rttscope replay --local-net 10.0.0.0/8 --local-net 2001:db8::/32 -r 0 trace.pcap
  tcpdump -i eth0 -w - | rttscope replay -F jsonl -`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Sprintf("want exactly one capture file (or - for standard input), got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReplayPDMFlags(cmd, decPDM); err != nil {
				return err
			}
			if decPDM {
				if err := checkPDMReportFlags(cmd, pdmRep); err != nil {
					return err
				}
				return runPDMRead(cmd, &of, pdm.ReadOptions{Path: args[0], MapSize: pdmCfg.MapSize, Lifetime: pdmCfg.Lifetime,
					LocalNets: opts.Direction.LocalNets, Reporting: pdmRep})
			}
			if err := so.Validate(); err != nil {
				return usageError{err.Error()}
			}
			if err := of.validate(); err != nil {
				return err
			}
			opts.Path, opts.BPF, opts.Report = args[0], so.BPF, so.Report
			if opts.CleanupInterval <= 0 {
				return usageError{"--cleanup-interval must be > 0"}
			}
			if opts.Workers < 1 || opts.Workers > 64 {
				return usageError{fmt.Sprintf("invalid --workers %d: want 1 to 64", opts.Workers)}
			}
			for _, id := range opts.Interfaces {
				if id < 0 {
					return usageError{fmt.Sprintf("invalid --interface-id %d: want a pcapng interface ID >= 0", id)}
				}
			}
			if replay.IsTerminal(os.Stderr) {
				opts.Progress = os.Stderr
			}
			opts.FirstPacket = of.setTimeOrigin // --relative-time counts from the first packet
			rp, err := replay.Open(opts)
			if err != nil {
				return err
			}
			defer rp.Close()
			out, finish, err := of.open()
			if err != nil {
				return err
			}
			warnNoExpiry(cmd.ErrOrStderr(), rp.Variant())
			// Offline: nothing to undo, so SIGHUP keeps its default.
			ctx, stop := stopContext(cmd.Context(), false)
			defer stop()
			sum, err := rp.Run(ctx, out)
			// Finish the output (closing "]" for json) before the error
			// is reported.
			if ferr := finish(); err == nil {
				err = ferr
			}
			warnNoInterface(cmd.ErrOrStderr(), args[0], opts.Interfaces, sum)
			return err
		},
	}
	so.AddFlags(cmd.Flags(), func(name string) bool { return name != "include-local" })
	of.register(cmd)
	fl := cmd.Flags()
	fl.Var(flagval.NewPrefixes(&opts.Direction.LocalNets), "local-net", "CIDR of the inside (repeatable): packets from these addresses are egress (used when the capture has no direction)")
	fl.Var(flagval.NewMACs(&opts.Direction.LocalMACs), "local-mac", "MAC address of the observation point (repeatable): frames from it are egress (used when the capture has no direction)")
	fl.Var(flagval.NewSeconds(&opts.AggregateOffset), "aggregate-offset", "with --aggregate, start the intervals at multiples of the interval since the Unix epoch plus this offset: seconds or a duration (to line them up with a live recording's)")
	fl.IntSliceVar(&opts.Interfaces, "interface-id", nil, "only replay packets of this pcapng interface ID (0-based, repeatable or comma-separated)")
	opts.CleanupInterval = replay.DefaultCleanupInterval
	fl.VarP(flagval.NewSeconds(&opts.CleanupInterval), "cleanup-interval", "c", "expire idle flows and timestamps at every multiple of this much capture time: seconds or a duration")
	fl.IntVar(&opts.Workers, "workers", replay.DefaultWorkers(), "threads that run packets through the programs at once, each flow on one of them (1: strictly sequential)")
	fl.BoolVar(&decPDM, "pdm", false, "decode the RFC 8250 PDM options of the capture (rttscope pdm --read) instead of measuring RTTs")
	addPDMFlags(fl, &pdmCfg, &pdmRep)
	fl.BoolVar(&opts.Stats, "stats", false, "write a record of the kernel counters after the last packet (in the stream for json/jsonl, to stderr for standard/ppviz)")
	return cmd
}

// checkReplayPDMFlags refuses, with --pdm, the flags of RTT measurement,
// and without it the --pdm-* flags: only --local-net, the output and
// privacy flags apply to both.
func checkReplayPDMFlags(cmd *cobra.Command, decPDM bool) error {
	shared := map[string]bool{"local-net": true}
	var scratch outputFlags
	tmp := &cobra.Command{}
	scratch.register(tmp)
	tmp.Flags().VisitAll(func(f *pflag.Flag) { shared[f.Name] = true })
	pdmOnly := map[string]bool{"pdm": true, "pdm-map-size": true, "pdm-lifetime": true, "pdm-report": true, "interval": true}
	var bad []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if !shared[f.Name] && pdmOnly[f.Name] != decPDM {
			bad = append(bad, "--"+f.Name)
		}
	})
	switch {
	case len(bad) > 0 && decPDM:
		return usageError{fmt.Sprintf("%s: not with --pdm (it takes --local-net, the output, privacy and --pdm-* flags)", strings.Join(bad, ", "))}
	case len(bad) > 0:
		return usageError{fmt.Sprintf("%s: only with --pdm", strings.Join(bad, ", "))}
	}
	return nil
}

// warnNoExpiry says so when the kernel left replay without timed expiry
// (loader.CleanupNone): its output then differs from a live run's, since
// idle flows never time out and a timestamp older than the timeout can
// still be matched.
func warnNoExpiry(w io.Writer, v loader.Variant) {
	if v.Cleanup != loader.CleanupNone {
		return
	}
	fmt.Fprintln(w, "rttscope: warning: no timed expiry on this kernel: idle flows never time out and timestamps older than the timeout can still be matched (`rttscope doctor` says what is missing)")
}

// warnNoInterface says so when --interface-id kept none of the capture's
// packets: a wrong interface ID would otherwise look like a capture
// without RTTs.
func warnNoInterface(w io.Writer, path string, ids []int, sum replay.Summary) {
	if len(ids) == 0 || sum.Packets == 0 || sum.Filtered < sum.Packets {
		return
	}
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.Itoa(id)
	}
	fmt.Fprintf(w, "rttscope: warning: %s: no packet of --interface-id %s among its %d packets (pcap files have interface 0 only)\n",
		path, strings.Join(list, ","), sum.Packets)
}
