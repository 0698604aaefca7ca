package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/flagval"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/output"
)

// outputFlags choose the format and destination (monitor and replay).
type outputFlags struct {
	format string
	write  string
}

func (o *outputFlags) register(cmd *cobra.Command) {
	cmd.Flags().VarP(formatFlag(&o.format), "format", "F", "output format: "+strings.Join(format.Names(), ", ")+" (see README: compatible with ePPing)")
	cmd.Flags().StringVarP(&o.write, "write", "w", "", "append output to FILE instead of stdout; SIGHUP reopens it (log rotation)")
}

// formatFlag is a --format flag setting *p, which it starts at the default
// format.
func formatFlag(p *string) pflag.Value {
	names := format.Names()
	*p = names[0]
	return flagval.OneOf(p, names...)
}

// open returns the writer and a function that finishes the output.
func (o *outputFlags) open() (format.Writer, func() error, error) {
	f, err := output.Open(o.write)
	if err != nil {
		return nil, nil, err
	}
	w, err := format.New(o.format, f, format.Options{})
	if err != nil {
		_ = f.Close() // nothing written yet; the format error is the one to report
		return nil, nil, usageError{err.Error()}
	}
	f.SetRestarter(w)
	stop := output.NotifyReopen(f, func(err error) { fmt.Fprintln(os.Stderr, "rttscope: reopen output:", err) })
	return w, func() error {
		stop()
		werr := w.Close()
		if ferr := f.Close(); werr == nil {
			werr = ferr
		}
		return werr
	}, nil
}
