package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/bpfprof"
)

const benchProfileLong = `Show where the BPF programs spend their time, by source line, on the
traffic running now. perf samples every CPU (cpu-clock, which works in VMs
without a performance-monitoring unit); each sample that lands in a
program's JIT image is mapped, through the program's JIT line info, to the
bpf/ source line it was executing. Programs are listed every 100 ms while
perf runs, so programs loaded meanwhile count too, e.g. those of a
'rttscope bench monitor' run in another terminal, which loads them once
per window: loads with the same JIT image (same program, same settings)
add up.

Per program: its samples and their share of all samples (every CPU, idle
included), the share of each source file, and the --top lines.

Reading it: a sample lands after the instruction that was retiring, so
the cost of a slow load (a cache miss) shows on the line after it, and
the program's first line carries its entry (the JIT prologue, the first
touch of its code). So a line's share says where the program waits, not
what removing that line would save: the wait moves to the next first
touch (measure a change with 'bench monitor --compare-bin'). Counts of a
few dozen samples are noise. Method and findings: docs/performance.md,
"Round 12".

Needs root, perf (Debian's linux-perf; scripts/setup.sh installs it) and
the BPF JIT (net.core.bpf_jit_enable=1).`

func init() { benchSubcommands = append(benchSubcommands, newBenchProfileCmd) }

func newBenchProfileCmd() *cobra.Command {
	o := bpfprof.DefaultOptions()
	var top int
	var jsonOut string
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Where rttscope's BPF programs spend their time, by source line (perf sampling, live traffic)",
		Long:  benchProfileLong,
		Example: `  sudo rttscope bench profile --duration 20s
  sudo rttscope bench monitor --modes aggregated --flows 10000 --reps 3 &
  sudo rttscope bench profile --duration 2m --top 40 --json profile.json`,
		Args: noArgs("profile"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Duration < 100*time.Millisecond || o.Freq < 1 || o.Freq > 100000 || top < 0 {
				return usageError{"--duration must be >= 100ms, --freq 1-100000, --top >= 0"}
			}
			if o.Perf != "" {
				if _, err := exec.LookPath(o.Perf); err != nil {
					return usageError{fmt.Sprintf("--perf %s: not an executable (%v)", o.Perf, err)}
				}
			}
			o.Progress = cmd.ErrOrStderr()
			// Ctrl-C ends the sampling early: what was sampled is shown.
			ctx, stop := stopContext(cmd.Context(), true)
			defer stop()
			prof, err := bpfprof.Run(ctx, o)
			if err != nil {
				return err
			}
			if jsonOut != "" {
				b, err := json.MarshalIndent(prof, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("write --json: %w", err)
				}
			}
			bpfprof.Print(cmd.OutOrStdout(), prof, top)
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", o.Duration, "sampling time")
	f.IntVar(&o.Freq, "freq", o.Freq, "samples per second per CPU")
	f.StringVar(&o.Prefix, "prog-prefix", o.Prefix, "profile the programs whose name starts with this (\"\" = every program)")
	f.StringVar(&o.Perf, "perf", "", "the perf binary (default: perf on PATH)")
	f.IntVar(&top, "top", 25, "source lines shown per program (0 = all)")
	f.StringVar(&jsonOut, "json", "", "also write the whole profile (every line) as JSON to this file")
	return cmd
}
