package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/bench"
	"github.com/rttscope/rttscope/internal/lab"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

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

Configurations run interleaved inside the run, --reps times each; the
summary gives median, quartiles and the difference and ratio to the empty
program. Results go to OUT/NAME-<UTC time>.json and .csv with the machine,
kernel and commit; a table goes to stdout, progress to stderr. Needs root.
See bench/README.md.`

func newBenchCmd() *cobra.Command {
	def := bench.DefaultOptions()
	var (
		o      = def
		out    string
		path   string
		pacing string
		only   string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Record the per-packet cost of the BPF programs (TEST_RUN and live traffic)",
		Long:  benchLong,
		Example: `  sudo rttscope bench                       # about 1.5 minutes, results in bench/results/
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
			switch only {
			case "", "all":
			case "test_run", "testrun":
				o.Live = false
			case "live":
				o.TestRun = false
			default:
				return usageError{fmt.Sprintf("invalid --only %q (want test_run, live or all)", only)}
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
	f := cmd.Flags()
	f.IntVar(&o.Reps, "reps", def.Reps, "repetitions of every configuration (interleaved)")
	f.DurationVar(&o.Duration, "duration", def.Duration, "live: measured time per window")
	f.DurationVar(&o.Warmup, "warmup", def.Warmup, "live: traffic before each window's first reading")
	f.IntVar(&o.Repeat, "repeat", def.Repeat, "test_run: runs per BPF_PROG_TEST_RUN call")
	f.IntVar(&o.Pairs, "pairs", def.Pairs, "test_run: data/ACK pairs per rep, each frame run once (0 = skip)")
	f.StringVar(&path, "path", def.Path.String(), "live: lab path DELAY[/RETURN_DELAY][@RATE] between middlebox and server")
	f.StringVar(&pacing, "pacing", lab.FormatRate(def.Pacing), "live: pace the bulk transfer to this rate (e.g. 200mbit); 0 or unlimited = as fast as TCP goes (saturates the lab's delay line: loss)")
	f.BoolVar(&o.NoLiveBaseline, "no-baseline", false, "live: skip the windows with no program attached")
	f.StringVar(&only, "only", "all", "run only one phase: test_run or live")
	f.StringVarP(&out, "out", "o", "bench/results", "directory for the result files")
	f.StringVar(&o.Name, "name", def.Name, "result file name prefix")
	return cmd
}

func runBench(cmd *cobra.Command, o bench.Options, out string) error {
	if os.Geteuid() != 0 {
		return errors.New("bench: must run as root (loads BPF programs, creates network namespaces)")
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.Progress = cmd.ErrOrStderr()
	res, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	jsonPath, csvPath, err := bench.WriteFiles(out, res)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := bench.PrintSummary(cmd.OutOrStdout(), res); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "\nresults: %s\n         %s\n", jsonPath, csvPath)
	return nil
}
