package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/bench"
)

const benchHooksLong = `Measure what a BPF tracing program costs per event, by program type
(the question of seed 003). Small UDP datagrams flow through a namespace
lab (client, forwarding middlebox, server; each datagram is received twice)
while one program of bpf/hooks.c sits on the receive path of every packet:

  tracepoint    net:netif_receive_skb (perf-event tracepoint)
  raw_tp        the same tracepoint as a raw tracepoint
  tp_btf        the same tracepoint, BTF-typed
  kprobe        the kernel function __netif_receive_skb
  kprobe.multi  the same through fprobe
  fentry        the same through a BPF trampoline

each empty (returns 0) and counting (one per-CPU counter update), each with
bpf_stats off and on (--stats), against a baseline without any program.
Types the kernel refuses are reported with the errno and its likely cause.

Configurations run interleaved, --reps times after --warmup-rounds
discarded rounds. Per configuration: datagrams/s, busy CPU ns per datagram,
program runs per datagram, bpf_stats ns/run; the ratio to the baseline
with its 95 % bootstrap interval and a verdict (faster, slower or "no
difference at this noise"); the cost per event = difference of CPU ns per
datagram to the baseline / runs per datagram, with its interval. By default
the whole packet path is pinned to the last CPU (--cpus), so the other CPU
takes the rest of the machine's load. Results: OUT/NAME-<time>.json, .csv,
.html (report with box plots and per-repetition series) and -figures/.`

func init() { benchSubcommands = append(benchSubcommands, newBenchHooksCmd) }

func newBenchHooksCmd() *cobra.Command {
	o := bench.DefaultHooksOptions()
	var types []string
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "Cost per event of BPF tracing program types (tracepoint, raw_tp, tp_btf, kprobe, kprobe.multi, fentry)",
		Long:  benchHooksLong,
		Example: `  sudo rttscope bench hooks
  sudo rttscope bench hooks --types tracepoint,raw_tp,tp_btf --reps 20 --duration 3s`,
		Args: noArgs("hooks"),
	}
	mf := addMethodFlags(cmd.Flags(), &o.Method, &o.Name, "last")
	cmd.Flags().StringSliceVar(&types, "types", bench.HookTypes, "program types to compare")
	cmd.Flags().BoolVar(&o.Stats, "stats", o.Stats, "also run every program with bpf_stats on")
	cmd.Flags().IntVar(&o.UDPPayload, "udp-payload", o.UDPPayload, "UDP payload bytes per datagram")
	cmd.Flags().IntVar(&o.Senders, "udp-senders", o.Senders, "UDP sending sockets")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := mf.check(); err != nil {
			return err
		}
		for _, t := range types {
			if !slices.Contains(bench.HookTypes, t) {
				return usageError{fmt.Sprintf("--types: unknown type %q (want some of %v)", t, bench.HookTypes)}
			}
		}
		if o.UDPPayload < 1 || o.UDPPayload > bench.MaxUDPPayload(false) || o.Senders < 1 {
			return usageError{"--udp-payload must be 1-1472 and --udp-senders >= 1"}
		}
		o.Types = types
		o.Progress = cmd.ErrOrStderr()
		return runStudy(cmd, mf.out, bench.PrintStudy, func(ctx context.Context) (*bench.Result, error) { return bench.RunHooks(ctx, o) })
	}
	return cmd
}
