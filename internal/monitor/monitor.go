// Package monitor runs rttscope live: it loads the BPF programs, attaches
// them to interfaces, and turns ring buffer records into formatted output.
// Run is one session (session.go): open, loop, close.
package monitor

import (
	"context"
	"errors"
	"io"
	"math"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/sampling"
)

// Options configure a monitor run.
type Options struct {
	Interfaces []string
	// Netns, when set, is the named network namespace the interfaces
	// live in (as in `ip netns`).
	Netns  string
	Attach loader.AttachOptions
	// BPF is what the programs see, Report how often the records of
	// aggregated mode and flow summaries are written
	// (sampling.Options holds both).
	BPF    loader.Config
	Report sampling.Report
	// CleanupInterval is how often idle flows and timestamps are expired.
	CleanupInterval time.Duration
	// StatsInterval is how often a stats record is written (0 = only at exit).
	StatsInterval time.Duration
	// BPFStats turns on the kernel's run time accounting of BPF programs
	// for the run (BPF_ENABLE_STATS), so the stats records carry each
	// attached program's run time per packet. It costs every BPF program
	// on the host about 20-80 ns per run while rttscope runs.
	BPFStats bool
	// Duration stops the run after this long (0 = until ctx is done).
	Duration time.Duration
	// Output receives the records. Aggregated mode and flow summaries
	// need a format.Writer with those capabilities (format.New's have
	// all), which Run checks before it loads anything.
	Output format.EventWriter
	// Log receives human-readable progress and warnings.
	Log io.Writer
	// OnAttached, if set, is called once every hook is in place.
	OnAttached func()
}

// Validate reports the first option that cannot work, in the words of the
// command line, before anything is loaded or attached. Output may still be
// nil (the command line validates before it opens its output); when set,
// it must be able to write what BPF produces.
func (o Options) Validate() error {
	if err := (sampling.Options{BPF: o.BPF, Report: o.Report}).Validate(); err != nil {
		return err
	}
	if err := o.Attach.Validate(); err != nil {
		return err
	}
	if len(o.Interfaces) == 0 {
		return errors.New("no interface given: use -i IFNAME (repeatable)")
	}
	if o.CleanupInterval < 0 || o.StatsInterval < 0 || o.Duration < 0 {
		return errors.New("--cleanup-interval, --stats-interval and --duration must be >= 0")
	}
	if o.Output != nil {
		return format.Require(format.Extend(o.Output), sampling.Needs(o.BPF))
	}
	return nil
}

// Run monitors until ctx is cancelled, Duration passes, or every interface
// has gone. Nothing is loaded or attached unless every option is valid, and
// everything it attached is detached before it returns.
func Run(ctx context.Context, opts Options) error {
	s, err := open(opts)
	if err != nil {
		return err
	}
	return s.close(s.loop(ctx))
}

// clockOffset maps CLOCK_MONOTONIC (bpf_ktime_get_ns) to Unix time. The
// wall clock is read between two monotonic readings, a few times, and the
// tightest bracket wins: a single pair of readings is off by however long
// the thread was preempted between them (0.6 ms seen on a busy 2-CPU host),
// which shifted every event's timestamp by that much until the next update.
func clockOffset() int64 {
	var off int64
	best := int64(math.MaxInt64)
	for range 5 {
		var m1, wall, m2 unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1) // cannot fail for these clocks
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &wall)
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m2)
		if gap := m2.Nano() - m1.Nano(); gap < best {
			best = gap
			off = wall.Nano() - (m1.Nano() + gap/2)
		}
	}
	return off
}
