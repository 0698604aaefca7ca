package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/bench"
)

// Flags and output shared by the studies `rttscope bench forwarding`,
// `monitor` and `hooks`.

// methodFlags are the method flags of a study.
type methodFlags struct {
	m    *bench.Method
	cpus string
	out  string
	name *string
}

func addMethodFlags(f *pflag.FlagSet, m *bench.Method, name *string, defCPUs string) *methodFlags {
	mf := &methodFlags{m: m, name: name}
	f.IntVar(&m.Reps, "reps", m.Reps, "measured repetitions of every configuration (interleaved)")
	f.IntVar(&m.WarmupRounds, "warmup-rounds", m.WarmupRounds, "rounds of every configuration run first and discarded")
	f.DurationVar(&m.Warmup, "warmup", m.Warmup, "traffic after a configuration is set up, before its window's first reading")
	f.DurationVar(&m.Duration, "duration", m.Duration, "measured time per window")
	f.DurationVar(&m.Settle, "settle", m.Settle, "traffic before each case's first round")
	f.StringVar(&mf.cpus, "cpus", defCPUs, "pin the bench (traffic, sinks, lab) and the processes it starts to these CPUs (e.g. 1, 0-1, last; none = no pinning); CPU figures then count these CPUs")
	f.StringVarP(&mf.out, "out", "o", "bench/results", "directory for the result files (JSON, CSV, HTML report, figures)")
	f.StringVar(name, "name", *name, "result file name prefix")
	return mf
}

// check validates the method flags (usage errors).
func (mf *methodFlags) check() error {
	cpus, err := bench.ParseCPUs(mf.cpus)
	if err != nil {
		return usageError{fmt.Sprintf("--cpus: %v", err)}
	}
	mf.m.CPUs = cpus
	switch {
	case mf.m.Reps < 1:
		return usageError{"--reps must be >= 1"}
	case mf.m.WarmupRounds < 0:
		return usageError{"--warmup-rounds must be >= 0"}
	case mf.m.Duration < 100*time.Millisecond:
		return usageError{"--duration must be >= 100ms"}
	case mf.m.Warmup < 0 || mf.m.Settle < 0:
		return usageError{"--warmup and --settle must be >= 0"}
	case *mf.name == "":
		return usageError{"--name must not be empty"}
	}
	return nil
}

func noArgs(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Sprintf("bench %s takes no arguments (got %q)", name, args)}
		}
		return nil
	}
}

// runStudy runs a study (or the phases of `rttscope bench`) with SIGINT,
// SIGTERM or SIGHUP cancelling it (stopContext), writes its files
// (JSON, CSV, HTML report) and prints its summary with print.
func runStudy(cmd *cobra.Command, out string, print func(io.Writer, *bench.Result) error, run func(ctx context.Context) (*bench.Result, error)) error {
	ctx, stop := stopContext(cmd.Context(), true)
	defer stop()
	res, runErr := run(ctx)
	if res == nil {
		return runErr
	}
	// A study that ended early still has its files written: what was
	// measured is kept, the error follows.
	jsonPath, csvPath, err := bench.WriteFiles(out, res)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	htmlPath, err := bench.WriteReport(out, res)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := print(cmd.OutOrStdout(), res); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "\nresults: %s\n         %s\n         %s\n", jsonPath, csvPath, htmlPath)
	return runErr
}
