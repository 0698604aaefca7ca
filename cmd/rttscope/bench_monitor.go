package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/bench"
	"github.com/rttscope/rttscope/internal/lab"
)

const benchMonitorLong = `Measure what monitoring a router's interface costs (seed 000 part 4): the
lab's router forwards TCP with --flows flows (default 1, 1,000 and 10,000)
and small UDP datagrams while, in turn, nothing (the baseline), an empty tc
program (what any tc-based monitor pays before doing anything), rttscope in
each mode (per-sample, sampled, aggregated, flow-summary), tcpdump writing
a capture, and every --external command watch its server-facing interface.

--external NAME='CMD {iface}' adds a configuration NAME: CMD runs with
sh -c inside the router's namespace, {iface} replaced by the interface,
in its own process group; its CPU time and its output (stdout and stderr
bytes and lines) are counted, and it is stopped with SIGINT (then SIGTERM,
then SIGKILL, each after 5 s; the report says which it took). Example:
  --external epping='cd /opt/epping/bin && exec ./pping -i {iface}'
(ePPing loads pping_kern.o from its working directory; building it:
docs/experiments.md)

--compare-bin OLD runs each of --modes also with the rttscope binary OLD
(an earlier build; configuration rttscope-MODE-prev, same arguments,
interleaved in every round) and reports the monitor's (this executable,
or --monitor-bin) net BPF ns/packet, net CPU share and forwarded
packets/s as ratios to OLD's with their 95 % bootstrap intervals
(bpf_net_ns_per_packet_vs_prev, ...): how a change to the data path is
judged on the router's traffic.

Per window: forwarded Mbit/s and packets/s (ratio to nothing with its 95 %
bootstrap interval and verdict), the monitor's CPU and its share of the
busy CPU time, BPF ns per packet (bpf_stats of every program on the
interface, TCX, clsact or XDP, whoever attached it), both also net of
bpf_stats' residual (the accounting's clock reads inside the reported run
time, measured before every window: the *_net metrics, what the programs
cost with the accounting off), busy CPU ns per packet (everything on the
machine, the monitor included), samples reported per second, samples lost.
--bpf-stats=false leaves the accounting off: no BPF figures, but the
throughput and busy CPU per packet are then what monitoring costs in
production. Method, verdicts and files: docs/experiments.md.
The TCP sink and flows are separate programs the bench builds with go: run
from the source tree.`

func init() { benchSubcommands = append(benchSubcommands, newBenchMonitorCmd) }

func newBenchMonitorCmd() *cobra.Command {
	o := bench.DefaultMonitorOptions()
	var externals []string
	var trate string
	tcp := true
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "Cost of monitoring a router: rttscope's modes, tcpdump, external monitors",
		Long:  benchMonitorLong,
		Example: `  sudo rttscope bench monitor
  sudo rttscope bench monitor --flows 1000,10000 --modes aggregated --tcpdump=false
  sudo rttscope bench monitor --external pping='pping -i {iface}'
  sudo rttscope bench monitor --modes sampled,aggregated --flows 1000,10000 --compare-bin ./rttscope.old
  sudo rttscope bench monitor --modes aggregated --tcp=false --tcpdump=false`,
		Args: noArgs("monitor"),
	}
	mf := addMethodFlags(cmd.Flags(), &o.Method, &o.Name, "none")
	f := cmd.Flags()
	f.IntSliceVar(&o.Flows, "flows", o.Flows, "TCP cases: concurrent flow counts")
	f.BoolVar(&tcp, "tcp", true, "run the TCP cases (false: none, e.g. with --udp for the UDP case alone)")
	f.BoolVar(&o.UDP, "udp", o.UDP, "run the small-datagram UDP case")
	f.StringSliceVar(&o.Modes, "modes", o.Modes, "rttscope modes to run")
	f.BoolVar(&o.Tcpdump, "tcpdump", o.Tcpdump, "run tcpdump writing a capture")
	f.BoolVar(&o.Empty, "empty", o.Empty, "run an empty tc program (TCX egress and ingress) as a configuration")
	f.StringArrayVar(&externals, "external", nil, "NAME='CMD {iface}': an external monitor command (repeatable)")
	f.DurationVar(&o.ExternalStart, "external-start", o.ExternalStart, "time an external monitor gets to start before its window's warm-up")
	f.DurationVar(&o.ExternalAttach, "external-attach", 0, "then wait up to this long for BPF programs to appear on the interface (for monitors such as ePPing that load for seconds; none by then: the external is not available)")
	f.IntVar(&o.WriteSize, "write-size", o.WriteSize, "bytes per TCP write")
	f.BoolVar(&o.ECN, "ecn", false, "the TCP endpoints negotiate ECN (net.ipv4.tcp_ecn=1): data segments ECT(0), ACKs Not-ECT")
	f.StringVar(&trate, "tcp-rate", "unlimited", "aggregate TCP rate of all flows (e.g. 200mbit)")
	f.IntVar(&o.UDPPayload, "udp-payload", o.UDPPayload, "UDP payload bytes")
	f.Uint64Var(&o.UDPPPS, "udp-pps", o.UDPPPS, "UDP datagrams per second (0 = as fast as the senders go)")
	f.IntVar(&o.UDPSenders, "udp-senders", o.UDPSenders, "UDP sending sockets")
	f.BoolVar(&o.UDPIPv6, "udp-ipv6", false, "send the UDP flood over IPv6 instead of IPv4 (--udp-payload up to 1452)")
	f.BoolVar(&o.BPFStats, "bpf-stats", o.BPFStats, "turn on the kernel's BPF run-time accounting for the run (the BPF ns and CPU share figures need it); false: leave it off (the run refuses to start while it is on) so the programs run as in production and throughput and busy_ns_per_packet give the monitors' cost there")
	f.StringVar(&o.MonitorBinary, "monitor-bin", "", "rttscope binary to run as the monitor (default: this executable)")
	f.StringVar(&o.CompareBinary, "compare-bin", "", "also run each mode with this rttscope binary (an earlier build) and report the monitor's figures (this executable's, or --monitor-bin's) as ratios to its")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := mf.check(); err != nil {
			return err
		}
		if !tcp {
			o.Flows = nil
		}
		for _, m := range o.Modes {
			if !slices.Contains(bench.MonitorModes, m) {
				return usageError{fmt.Sprintf("--modes: unknown mode %q (want some of %v)", m, bench.MonitorModes)}
			}
		}
		for _, n := range o.Flows {
			if n < 1 || n > 60000 {
				return usageError{fmt.Sprintf("--flows: %d is not between 1 and 60000", n)}
			}
		}
		if o.ExternalStart < 0 || o.ExternalAttach < 0 {
			return usageError{"--external-start and --external-attach must be >= 0"}
		}
		if o.CompareBinary != "" {
			bin, err := exec.LookPath(o.CompareBinary)
			if err != nil {
				return usageError{fmt.Sprintf("--compare-bin: %q is not an executable file (give the path of another rttscope build)", o.CompareBinary)}
			}
			o.CompareBinary = bin
			if len(o.Modes) == 0 {
				return usageError{"--compare-bin needs at least one of --modes"}
			}
		}
		if len(o.Flows) == 0 && !o.UDP {
			return usageError{"no traffic case: --tcp=false and --udp=false"}
		}
		if maxPayload := bench.MaxUDPPayload(o.UDPIPv6); o.WriteSize < 1 || o.UDPPayload < 1 || o.UDPPayload > maxPayload || o.UDPSenders < 1 {
			return usageError{fmt.Sprintf("--write-size must be >= 1, --udp-payload 1-%d, --udp-senders >= 1", maxPayload)}
		}
		if trate != "unlimited" && trate != "0" {
			r, err := lab.ParseRate(trate)
			if err != nil {
				return usageError{fmt.Sprintf("invalid --tcp-rate %q: %v", trate, err)}
			}
			o.TCPRate = r / 8
		}
		names := map[string]bool{}
		for _, e := range externals {
			x, err := bench.ParseExternal(e)
			if err != nil {
				return usageError{"--external: " + err.Error()}
			}
			if names[x.Name] || x.Name == bench.ProgNone || x.Name == bench.ProgEmpty || x.Name == bench.ToolTcpdump || slices.Contains(bench.MonitorModes, x.Name) ||
				strings.HasPrefix(x.Name, bench.ProgRttscope+"-") { // rttscope's own configurations
				return usageError{fmt.Sprintf("--external: name %q is taken", x.Name)}
			}
			names[x.Name] = true
			o.Externals = append(o.Externals, x)
		}
		o.Progress = cmd.ErrOrStderr()
		return runStudy(cmd, mf.out, bench.PrintStudy, func(ctx context.Context) (*bench.Result, error) { return bench.RunMonitor(ctx, o) })
	}
	return cmd
}
