package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/flagval"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/output"
	"github.com/rttscope/rttscope/internal/parquetout"
	"github.com/rttscope/rttscope/internal/privacy"
)

// formatParquet is the format only --write FILE can take (internal/parquetout).
const formatParquet = "parquet"

// outputFlags choose the format and destination (monitor and replay) and
// what the privacy options change on the way (docs/privacy.md).
type outputFlags struct {
	format  string
	write   string
	files   fileFlags
	sinks   sinkFlags
	privacy privacy.Options
	// anonymizer is the privacy writer in front of the format writer,
	// nil when the privacy options change nothing.
	anonymizer *privacy.Writer
}

func (o *outputFlags) register(cmd *cobra.Command) {
	cmd.Flags().VarP(formatFlag(&o.format), "format", "F", "output format: "+strings.Join(formatNames(), ", ")+" (see README: compatible with ePPing; parquet only with --write, docs/files.md)")
	cmd.Flags().StringVarP(&o.write, "write", "w", "", "append output to FILE instead of stdout; SIGHUP reopens it (log rotation). With the file flags below, a .zst or .gz suffix, or -F parquet: a series of files STEM-TIME-SEQ.EXT, each complete once it has that name (docs/files.md)")
	o.files.register(cmd.Flags())
	o.sinks.register(cmd.Flags())
	o.privacy.AddFlags(cmd.Flags())
}

// setTimeOrigin sets the time --relative-time counts from (Unix ns).
func (o *outputFlags) setTimeOrigin(ns int64) { o.anonymizer.SetOrigin(ns) }

// formatFlag is a --format flag setting *p, which it starts at the default
// format.
func formatFlag(p *string) pflag.Value {
	names := formatNames()
	*p = names[0]
	return flagval.OneOf(p, names...)
}

// formatNames are the names of -F: format's and parquet.
func formatNames() []string { return append(format.Names(), formatParquet) }

// fileFlags ask for the rotating, compressing destination of --write
// (output.Rotating, docs/files.md).
type fileFlags struct {
	rotateSize     int64
	rotateInterval time.Duration
	keep           int
	compress       string
	flushInterval  time.Duration
}

func (f *fileFlags) register(fl *pflag.FlagSet) {
	fl.Var(flagval.NewBytes(&f.rotateSize), "rotate-size", "with --write: start a new file after this much output (before compression), e.g. 64M (0 = no limit)")
	fl.DurationVar(&f.rotateInterval, "rotate-interval", 0, "with --write: start a new file this often, e.g. 1h (0 = never)")
	fl.IntVar(&f.keep, "keep", 0, "with --write: keep only the newest N completed files, deleting older ones (0 = keep all)")
	fl.Var(flagval.OneOf(&f.compress, "", output.CompressNone, output.CompressZstd, output.CompressGzip), "compress", "with --write: compress files with zstd or gzip, or none (default: by the suffix of --write, .zst or .gz)")
	fl.DurationVar(&f.flushInterval, "flush-interval", 0, "with --write: make what was written durable this often: jsonl/json are flushed (and compressed blocks ended); parquet completes its file and starts a new one, so kill -9 loses at most this interval (0 = only at rotation and exit)")
}

// wanted reports whether any file flag asks for output.Rotating.
func (f *fileFlags) wanted() bool {
	return f.rotateSize > 0 || f.rotateInterval > 0 || f.keep > 0 || f.compress != "" || f.flushInterval > 0
}

// validateFiles checks the combination of -F, --write and the file flags.
func (o *outputFlags) validateFiles() error {
	toStdout := o.write == "" || o.write == "-"
	if o.format == formatParquet && toStdout {
		return usageError{"-F parquet writes files only: add --write FILE (e.g. -w rtt.parquet)"}
	}
	if toStdout && o.files.wanted() {
		return usageError{"--rotate-size, --rotate-interval, --keep, --compress and --flush-interval need --write FILE"}
	}
	if o.files.keep < 0 || o.files.rotateInterval < 0 || o.files.flushInterval < 0 {
		return usageError{"--keep, --rotate-interval and --flush-interval must not be negative"}
	}
	if o.format == formatParquet {
		if c := output.CompressionFromName(o.write); c != "" || (o.files.compress != "" && o.files.compress != output.CompressNone) {
			return usageError{"-F parquet compresses inside the file (zstd): drop --compress and the .zst/.gz suffix of --write"}
		}
	}
	return nil
}

// validate checks the privacy, file and sink flags, so that a command
// can refuse them before it does any work.
func (o *outputFlags) validate() error {
	if err := o.privacy.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if err := o.validateFiles(); err != nil {
		return err
	}
	return o.sinks.validate()
}

// hupReopens reports whether SIGHUP reopens or rotates the output (a
// --write file); else it is one of the signals that stop a command
// (stopContext).
func (o *outputFlags) hupReopens() bool { return !output.IsStdoutPath(o.write) }

// open returns the writer and a function that finishes the output. The
// privacy writer comes first; behind it the file (or stdout) writer, or,
// with --kafka, --metrics-addr or --sink-policy, a sink.Fanout to every
// sink. Privacy errors (a bad mode, a key file others can read) are
// reported before any output is created.
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
	var files format.Writer
	stop := func() {}
	// --kafka alone replaces stdout; --write keeps the files besides.
	if o.write != "" || o.sinks.kafka == "" {
		if o.format == formatParquet || o.files.wanted() || output.CompressionFromName(o.write) != "" {
			files, stop, err = o.openFiles(fo)
		} else {
			files, stop, err = o.openFile(fo)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	next := files
	if o.sinks.wanted() {
		fan, err := o.sinks.open(files, fo)
		if err != nil {
			stop()
			if files != nil {
				_ = files.Close() // the sink's error is the one to report
			}
			return nil, nil, err
		}
		next = fan
	}
	w := pw.Wrap(next)
	return w, func() error {
		stop()
		return w.Close()
	}, nil
}

// closing is a format writer whose Close also closes its destination.
type closing struct {
	format.Writer
	dst func() error
}

func (c closing) Close() error {
	err := c.Writer.Close()
	if derr := c.dst(); err == nil {
		err = derr
	}
	return err
}

// openFile is the writer of --write FILE (appended to, reopened on SIGHUP)
// or stdout, and the function that stops the reopening.
func (o *outputFlags) openFile(fo format.Options) (format.Writer, func(), error) {
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
	if f.IsStdout() {
		return closing{ff, f.Close}, func() {}, nil // SIGHUP stops the command (stopContext)
	}
	stop := output.NotifyReopen(f, func(err error) { fmt.Fprintln(os.Stderr, "rttscope: reopen output:", err) })
	return closing{ff, f.Close}, stop, nil
}

// openFiles is openFile for the rotating destination: -F parquet, a file
// flag or a compressed --write.
func (o *outputFlags) openFiles(fo format.Options) (format.Writer, func(), error) {
	c := o.files.compress
	r, err := output.OpenRotating(o.write, output.RotateOptions{
		Size: o.files.rotateSize, Interval: o.files.rotateInterval, Keep: o.files.keep, Compress: c,
	})
	if err != nil {
		return nil, nil, err
	}
	var ff format.Writer
	var flush func() error
	if o.format == formatParquet {
		pq, perr := parquetout.New(r, fo)
		ff, err = pq, perr
		flush = func() error {
			if pq.Rows() == 0 {
				return nil
			}
			return r.Rotate()
		}
	} else {
		ff, err = format.New(o.format, r, fo)
		flush = func() error { return errors.Join(ff.Flush(), r.Flush()) }
	}
	if err != nil {
		_ = r.Close()
		return nil, nil, usageError{err.Error()}
	}
	r.SetRestarter(ff)
	report := func(err error) { fmt.Fprintln(os.Stderr, "rttscope: output:", err) }
	stopRot := output.RunRotation(r, 100*time.Millisecond, o.files.flushInterval, flush, report)
	stopHup := output.NotifyRotate(r, report)
	return closing{ff, r.Close}, func() {
		stopHup()
		stopRot()
	}, nil
}
