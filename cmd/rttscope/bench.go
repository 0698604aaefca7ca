package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/bench"
	"github.com/rttscope/rttscope/internal/lab"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

// benchSubcommands are the studies under `rttscope bench` (bench_*.go).
var benchSubcommands []func() *cobra.Command

const benchLong = `Measure what rttscope's BPF programs cost per packet, beside an empty tc
program, and record the numbers (nothing is asserted):

  test_run  BPF_PROG_TEST_RUN with --repeat runs per call on crafted packets
            (TCP data with timestamps on an established flow, pure ACK, ICMP
            echo, IPv6 with extension headers, ARP), and --pairs data/ACK
            pairs run once each (storing a timestamp, matching it): ns/run.
  live      a TCP bulk transfer through a namespace lab (--path) with, in
            turn, nothing, the empty program and the rttscope monitor
            attached (TCX egress and ingress) to the middlebox's
            server-facing interface; with bpf_stats on: ns/packet =
            delta run_time_ns / delta run_cnt, plus packets/s and Mbit/s.
  steps     the live transfer with the rttscope programs cut after each
            step of the data path (parse, flow, timestamp, local, events,
            counters), interleaved with the empty program: what each step
            adds per packet; with --compare-bin OLD, OLD's monitor against
            this binary's (paired ratio, 95% confidence interval).
  events    how many RTT events user space consumes: per-sample programs
            fed data/ACK pairs with BPF_PROG_TEST_RUN, the monitor's
            reader path (ring buffer read, decode, jsonl) draining them.
  load      --flows concurrent TCP flows (default 1, 100, 1000, 10000)
            and a small-datagram UDP flood through the lab's middlebox,
            each with no monitor and with 'rttscope monitor' (a separate
            process) per-sample, sampled and aggregated: forwarding
            throughput, BPF ns/packet, softirq CPU and the monitor's CPU;
            the summary compares with the performance targets
            (bench/README.md).

Studies (subcommands, each with its own --help): forwarding (router
modes: kernel, tc BPF, XDP, nftables flowtable), monitor (rttscope's modes,
tcpdump and external monitors on a router), hooks (BPF tracing program
types). Each writes an HTML report with plots beside its JSON and CSV.

Configurations run interleaved inside the run, --reps times each; the
summary gives median, quartiles and the difference and ratio to the empty
program. Results go to OUT/NAME-<UTC time>.json, .csv and .html (report
with plots) with the machine, kernel and commit; a table goes to stdout, progress to stderr. Needs root.
The load phase's TCP sink and flows are separate programs that the bench
builds with go build: run the bench from the source tree (make bench).
See bench/README.md.`

func newBenchCmd() *cobra.Command {
	def := bench.DefaultOptions()
	var (
		o      = def
		out    string
		path   string
		pacing string
		only   string
		lpath  string
		trate  string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Record the per-packet cost of the BPF programs (TEST_RUN and live traffic)",
		Long:  benchLong,
		Example: `  sudo rttscope bench                       # about 10 minutes, results in bench/results/
  sudo rttscope bench --only load,events --load-reps 5 --load-duration 5s
  sudo rttscope bench --reps 9 --duration 5s
  sudo rttscope bench --only test_run --repeat 5000000`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Sprintf("bench takes no arguments (got %q)", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := lab.ParsePath(path)
			if err != nil {
				return usageError{fmt.Sprintf("invalid --path %q: %v", path, err)}
			}
			o.Path = p
			if pacing == "unlimited" {
				o.Pacing = 0
			} else if o.Pacing, err = lab.ParseRate(pacing); err != nil {
				return usageError{fmt.Sprintf("invalid --pacing %q: %v", pacing, err)}
			}
			if o.LoadPath, err = lab.ParsePath(lpath); err != nil {
				return usageError{fmt.Sprintf("invalid --load-path %q: %v", lpath, err)}
			}
			if trate == "unlimited" || trate == "0" {
				o.LoadTCPRate = 0
			} else if r, err := lab.ParseRate(trate); err != nil {
				return usageError{fmt.Sprintf("invalid --tcp-rate %q: %v", trate, err)}
			} else {
				o.LoadTCPRate = r / 8
			}
			if only != "" && only != "all" {
				o.TestRun, o.Live, o.Steps, o.Load, o.Events = false, false, false, false, false
				for _, p := range strings.Split(only, ",") {
					switch strings.TrimSpace(p) {
					case "test_run", "testrun":
						o.TestRun = true
					case "live":
						o.Live = true
					case "steps":
						o.Steps = true
					case "load":
						o.Load = true
					case "events":
						o.Events = true
					default:
						return usageError{fmt.Sprintf("invalid --only %q (want all, or a comma-separated list of test_run, live, steps, events, load)", only)}
					}
				}
			}
			for _, n := range o.LoadFlows {
				if n < 1 || n > 60000 {
					return usageError{fmt.Sprintf("--flows: %d is not between 1 and 60000", n)}
				}
			}
			if o.LoadReps < 1 || o.LoadDuration < 100*time.Millisecond || o.LoadWarmup < 0 || o.LoadSettle < 0 || o.EventsBurst < 1000 || o.EventsDuration < 100*time.Millisecond {
				return usageError{"--load-reps must be >= 1, --load-duration and --events-duration >= 100ms, --load-warmup and --load-settle >= 0, --events-burst >= 1000"}
			}
			if o.Reps < 1 || o.Repeat < 1 || o.Pairs < 0 || o.Duration < 100*time.Millisecond || o.Warmup < 0 {
				return usageError{"--reps and --repeat must be >= 1, --pairs >= 0, --duration >= 100ms, --warmup >= 0"}
			}
			if o.Name == "" {
				return usageError{"--name must not be empty"}
			}
			return runBench(cmd, o, out)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	for _, sub := range benchSubcommands {
		c := sub()
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
		cmd.AddCommand(c)
	}
	f := cmd.Flags()
	f.IntVar(&o.Reps, "reps", def.Reps, "repetitions of every configuration (interleaved)")
	f.DurationVar(&o.Duration, "duration", def.Duration, "live: measured time per window")
	f.DurationVar(&o.Warmup, "warmup", def.Warmup, "live: traffic before each window's first reading")
	f.IntVar(&o.Repeat, "repeat", def.Repeat, "test_run: runs per BPF_PROG_TEST_RUN call")
	f.IntVar(&o.Pairs, "pairs", def.Pairs, "test_run: data/ACK pairs per rep, each frame run once (0 = skip)")
	f.StringVar(&path, "path", def.Path.String(), "live: lab path DELAY[/RETURN_DELAY][@RATE] between middlebox and server")
	f.StringVar(&pacing, "pacing", lab.FormatRate(def.Pacing), "live: pace the bulk transfer to this rate (e.g. 200mbit); 0 or unlimited = as fast as TCP goes (saturates the lab's delay line: loss)")
	f.BoolVar(&o.LiveUDP, "live-udp", false, "live, steps: the small-datagram UDP flood of the load phase (--udp-payload, --udp-pps, --udp-senders) instead of the TCP bulk transfer (use with --path 0s: the delay line would bound it)")
	f.BoolVar(&o.NoLiveBaseline, "no-baseline", false, "live: skip the windows with no program attached")
	f.StringVar(&only, "only", "all", "run only these phases: comma-separated test_run, live, steps, events, load")
	f.StringVar(&o.CompareMode, "compare-mode", "", "steps: monitor mode of both builds with --compare-bin: sampled (default), per-sample or aggregated")
	f.StringVar(&o.CompareBinary, "compare-bin", "", "steps: instead of cutting the data path, compare the monitor of this rttscope binary (an earlier build) with this one's, interleaved")
	f.IntVar(&o.LoadReps, "load-reps", def.LoadReps, "load: repetitions of every mode per scenario (interleaved)")
	f.DurationVar(&o.LoadDuration, "load-duration", def.LoadDuration, "load: measured time per window")
	f.DurationVar(&o.LoadWarmup, "load-warmup", def.LoadWarmup, "load: time between the monitor attaching and the window's first reading")
	f.DurationVar(&o.LoadSettle, "load-settle", def.LoadSettle, "load: traffic before each scenario's first window")
	f.IntSliceVar(&o.LoadFlows, "flows", def.LoadFlows, "load: concurrent TCP flow counts, one scenario each")
	f.BoolVar(&o.LoadUDP, "udp", def.LoadUDP, "load: also run the small-datagram UDP scenario")
	f.StringVar(&lpath, "load-path", def.LoadPath.String(), "load: lab path DELAY[/RETURN_DELAY][@RATE] between middlebox and server")
	f.IntVar(&o.LoadWriteSize, "write-size", def.LoadWriteSize, "load: bytes per TCP write")
	f.StringVar(&trate, "tcp-rate", "unlimited", "load: aggregate TCP rate of all flows (e.g. 200mbit); unlimited = as fast as TCP goes")
	f.IntVar(&o.UDPPayload, "udp-payload", def.UDPPayload, "load: UDP payload bytes per datagram")
	f.Uint64Var(&o.UDPPPS, "udp-pps", def.UDPPPS, "load: UDP datagrams per second (0 = as fast as the senders go)")
	f.IntVar(&o.UDPSenders, "udp-senders", def.UDPSenders, "load: UDP sending sockets (one goroutine each)")
	f.BoolVar(&o.UDPIPv6, "udp-ipv6", false, "load, --live-udp: send the UDP flood over IPv6 instead of IPv4 (--udp-payload up to 1452)")
	f.StringVar(&o.MonitorBinary, "monitor-bin", "", "load: rttscope binary to run as the monitor (default: this executable)")
	f.IntVar(&o.EventsBurst, "events-burst", def.EventsBurst, "events: records produced before each drain")
	f.DurationVar(&o.EventsDuration, "events-duration", def.EventsDuration, "events: length of the concurrent producer/consumer run")
	f.StringVarP(&out, "out", "o", "bench/results", "directory for the result files")
	f.StringVar(&o.Name, "name", def.Name, "result file name prefix")
	return cmd
}

func runBench(cmd *cobra.Command, o bench.Options, out string) error {
	return runStudy(cmd, out, bench.PrintSummary, func(ctx context.Context) (*bench.Result, error) {
		o.Progress = cmd.ErrOrStderr()
		return bench.Run(ctx, o)
	})
}
