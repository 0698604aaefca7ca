// Command rttscope measures per-flow round-trip times passively with eBPF.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:   "rttscope",
		Short: "Passive per-flow round-trip times with eBPF",
		Long: `rttscope measures the round-trip times of the traffic passing a host or
router, per flow, without sending anything: it matches TCP timestamps and
ICMP echo identifiers in eBPF programs attached to tc/TCX and XDP hooks.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{err.Error() + " (see --help)"}
	})
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "rttscope:", err)
		os.Exit(exitCode(err))
	}
}

// subcommands is filled by the init functions of the files that define
// each subcommand, so every command lives in a file of its own.
var subcommands []func() *cobra.Command

// usageError marks errors caused by bad flags or arguments (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	return 1
}
