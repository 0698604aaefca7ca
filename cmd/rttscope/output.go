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
	"github.com/rttscope/rttscope/internal/privacy"
)

// outputFlags choose the format and destination (monitor and replay) and
// what the privacy options change on the way (docs/privacy.md).
type outputFlags struct {
	format  string
	write   string
	privacy privacy.Options
	// anonymizer is the privacy writer in front of the format writer,
	// nil when the privacy options change nothing.
	anonymizer *privacy.Writer
}

func (o *outputFlags) register(cmd *cobra.Command) {
	cmd.Flags().VarP(formatFlag(&o.format), "format", "F", "output format: "+strings.Join(format.Names(), ", ")+" (see README: compatible with ePPing)")
	cmd.Flags().StringVarP(&o.write, "write", "w", "", "append output to FILE instead of stdout; SIGHUP reopens it (log rotation)")
	o.privacy.AddFlags(cmd.Flags())
}

// setTimeOrigin sets the time --relative-time counts from (Unix ns).
func (o *outputFlags) setTimeOrigin(ns int64) { o.anonymizer.SetOrigin(ns) }

// formatFlag is a --format flag setting *p, which it starts at the default
// format.
func formatFlag(p *string) pflag.Value {
	names := format.Names()
	*p = names[0]
	return flagval.OneOf(p, names...)
}

// open returns the writer and a function that finishes the output.
// validate checks the privacy flags, so that a command can refuse them
// before it does any work.
func (o *outputFlags) validate() error {
	if err := o.privacy.Validate(); err != nil {
		return usageError{err.Error()}
	}
	return nil
}

// Privacy errors (a bad mode, a key file others can read) are reported
// before the output file is created.
func (o *outputFlags) open() (format.Writer, func() error, error) {
	if err := o.validate(); err != nil {
		return nil, nil, err
	}
	if o.privacy.Minimal && o.privacy.KeepsAddresses() {
		fmt.Fprintln(os.Stderr, "rttscope: --minimal keeps the real addresses: add --anonymize to change them")
	}
	pw, err := privacy.New(o.privacy)
	if err != nil {
		return nil, nil, err
	}
	o.anonymizer = pw
	var fo format.Options
	o.privacy.FormatOptions(&fo)
	f, err := output.Open(o.write)
	if err != nil {
		return nil, nil, err
	}
	ff, err := format.New(o.format, f, fo)
	if err != nil {
		_ = f.Close() // nothing written yet; the format error is the one to report
		return nil, nil, usageError{err.Error()}
	}
	f.SetRestarter(ff)
	w := pw.Wrap(ff)
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
