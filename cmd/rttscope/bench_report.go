package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/bench"
)

func init() { benchSubcommands = append(benchSubcommands, newBenchReportCmd) }

func newBenchReportCmd() *cobra.Command {
	var out string
	var replace bool
	cmd := &cobra.Command{
		Use:   "report RESULT.json...",
		Short: "Write the HTML report (and figures) of result files again",
		Long: `Read result files of rttscope bench (any phase or study, any schema) and
write their HTML reports and figures: NAME-TIME.html and NAME-TIME-figures/
beside each file, or into --out. Summaries, intervals and verdicts are
recomputed from the values, so results of an older schema get them too.
An existing report is left alone unless --replace. Needs no root.`,
		Example: `  rttscope bench report bench/results/forwarding-20261124T092709Z.json
  rttscope bench report --replace bench/results/*.json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{"bench report needs at least one RESULT.json"}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, path := range args {
				r, err := bench.ReadResult(path)
				if err != nil {
					return err
				}
				dir := out
				if dir == "" {
					dir = filepath.Dir(path)
				}
				if replace {
					if err := bench.RemoveReport(dir, r); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return err
					}
				}
				html, err := bench.WriteReport(dir, r)
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), html)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "directory for the reports (default: beside each result file)")
	cmd.Flags().BoolVar(&replace, "replace", false, "replace an existing report of the same result")
	return cmd
}
