// Command rttscope measures per-flow round-trip times passively with eBPF.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/flagval"
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
	root.SetFlagErrorFunc(flagError)
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	usageArgs(root)
	if err := root.Execute(); err != nil {
		if stdoutGone(err) {
			// The reader of the output went away (`| head`) and the
			// command stopped in order (ignoreSIGPIPE): quiet, with the
			// status of a process that SIGPIPE ended.
			os.Exit(128 + int(syscall.SIGPIPE))
		}
		fmt.Fprintln(os.Stderr, "rttscope:", oneLine(err))
		os.Exit(exitCode(err))
	}
}

// stdoutGone reports whether err is a write to stdout or stderr that met
// a closed pipe; EPIPE from anything else (a socket) is an error to show.
func stdoutGone(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && errors.Is(pe.Err, syscall.EPIPE) &&
		(pe.Path == os.Stdout.Name() || pe.Path == os.Stderr.Name())
}

// usageArgs makes positional-argument errors of every subcommand usage
// errors (exit 2), like flag errors.
func usageArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		if check := sub.Args; check != nil {
			sub.Args = func(cmd *cobra.Command, args []string) error {
				err := check(cmd, args)
				if err == nil || errors.As(err, new(usageError)) {
					return err
				}
				return usageError{err.Error() + " (see --help)"}
			}
		}
		usageArgs(sub)
	}
}

// oneLine joins the lines of a message (errors.Join, wrapped multi-line
// errors) so that every error is a single line on stderr.
func oneLine(err error) string {
	lines := strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// subcommands is filled by the init functions of the files that define
// each subcommand, so every command lives in a file of its own.
var subcommands []func() *cobra.Command

// flagError makes a flag that cobra could not parse a usage error (exit 2):
// a value one of our flags refused says what the flag wants, anything else
// keeps pflag's words and points at --help.
func flagError(_ *cobra.Command, err error) error {
	if msg, ok := flagval.Message(err); ok {
		return usageError{msg}
	}
	return usageError{err.Error() + " (see --help)"}
}

// usageError marks errors caused by bad flags or arguments (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	if errors.As(err, new(usageError)) {
		return 2
	}
	// cobra's own error for an unknown subcommand.
	if strings.HasPrefix(err.Error(), "unknown command ") {
		return 2
	}
	return 1
}
