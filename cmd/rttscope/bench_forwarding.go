package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/bench"
)

const benchForwardingLong = `Compare router modes (the question of seed 002) in a namespace lab:
client ─veth─ router ─veth─ server, every veth without GRO/TSO (MTU-sized
frames). Router modes (--modes, the first is the baseline):

  kernel     the kernel's IP forwarding
  tc-bpf     a tc BPF forwarder on TCX ingress (bpf_fib_lookup, then
             bpf_redirect, or bpf_redirect_neigh for unresolved neighbours)
  xdp        an XDP forwarder (bpf_fib_lookup, bpf_redirect_map into a
             devmap), with XDP_PASS programs on the veth peers (a veth only
             receives redirected frames when its peer runs XDP)
  flowtable  nftables flowtable software offload

A mode the kernel or machine lacks is a row "not available on this kernel:
<reason>" from a real probe (apply and remove once), never skipped silently.

Cases: one TCP flow, --tcp-flows TCP flows, small UDP datagrams. Per window:
goodput, packets/s forwarded, CPU (softirq, system, busy), latency under
load (ping from the client, and the RTT rttscope monitor measures on the
client's interface). Method, verdicts and files: see rttscope bench hooks
--help and docs/experiments.md.`

func init() { benchSubcommands = append(benchSubcommands, newBenchForwardingCmd) }

func newBenchForwardingCmd() *cobra.Command {
	o := bench.DefaultForwardingOptions()
	cmd := &cobra.Command{
		Use:   "forwarding",
		Short: "Compare router modes: kernel forwarding, tc BPF, XDP, nftables flowtable",
		Long:  benchForwardingLong,
		Example: `  sudo rttscope bench forwarding
  sudo rttscope bench forwarding --modes kernel,xdp --tcp-flows 16 --reps 20`,
		Args: noArgs("forwarding"),
	}
	mf := addMethodFlags(cmd.Flags(), &o.Method, &o.Name, "last")
	f := cmd.Flags()
	f.StringSliceVar(&o.Modes, "modes", bench.ForwardModes, "router modes, the first is the baseline")
	f.IntVar(&o.TCPFlows, "tcp-flows", o.TCPFlows, "flows of the many-flow TCP case (0 = no such case)")
	f.BoolVar(&o.SingleTCP, "tcp-single", o.SingleTCP, "run the one-flow TCP case")
	f.BoolVar(&o.UDP, "udp", o.UDP, "run the small-datagram UDP case")
	f.IntVar(&o.UDPPayload, "udp-payload", o.UDPPayload, "UDP payload bytes per datagram")
	f.IntVar(&o.UDPSenders, "udp-senders", o.UDPSenders, "UDP sending sockets")
	f.DurationVar(&o.PingInterval, "ping-interval", o.PingInterval, "interval of the latency pings (0 = no ping)")
	f.BoolVar(&o.RttscopeRTT, "rttscope-rtt", o.RttscopeRTT, "measure RTT under load with rttscope monitor on the client")
	f.StringVar(&o.MonitorBinary, "monitor-bin", "", "rttscope binary for --rttscope-rtt (default: this executable)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := mf.check(); err != nil {
			return err
		}
		for _, m := range o.Modes {
			if !slices.Contains(bench.ForwardModes, m) {
				return usageError{fmt.Sprintf("--modes: unknown mode %q (want some of %v)", m, bench.ForwardModes)}
			}
		}
		switch {
		case len(o.Modes) == 0:
			return usageError{"--modes: need at least one mode"}
		case o.TCPFlows < 0:
			return usageError{"--tcp-flows must be >= 0"}
		case !o.SingleTCP && o.TCPFlows == 0 && !o.UDP:
			return usageError{"no traffic case: enable --tcp-single, --tcp-flows or --udp"}
		case o.UDP && (o.UDPPayload < 1 || o.UDPPayload > bench.MaxUDPPayload(false) || o.UDPSenders < 1):
			return usageError{"--udp-payload must be 1-1472 and --udp-senders >= 1"}
		case o.PingInterval < 0:
			return usageError{"--ping-interval must be >= 0"}
		}
		o.Progress = cmd.ErrOrStderr()
		return runStudy(cmd, mf.out, bench.PrintStudy, func(ctx context.Context) (*bench.Result, error) { return bench.RunForwarding(ctx, o) })
	}
	return cmd
}
