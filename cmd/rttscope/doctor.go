package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/doctor"
)

func init() { subcommands = append(subcommands, doctorCmd) }

func doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Show which kernel features rttscope can use here, and the fallbacks in use",
		Long: `doctor probes every BPF feature rttscope relies on with a tiny program of
its own, then loads rttscope's programs as monitor and replay would (nothing
is attached) and prints, for each feature, whether the kernel has it
(present), lacks it (missing: too old or not built), forbids it (refused:
EPERM as root means a security policy such as lockdown or an LSM), or it was
switched off with RTTSCOPE_DISABLE (disabled); what rttscope uses instead;
and what is lost. Exit status 1 when rttscope cannot run here.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return doctor.Check().Write(os.Stdout)
		},
	}
}
