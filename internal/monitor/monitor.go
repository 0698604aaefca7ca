// Package monitor runs rttscope live: it loads the BPF programs, attaches
// them to interfaces, and turns ring buffer records into formatted output.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/nsrun"
	"github.com/rttscope/rttscope/internal/sampling"
	"github.com/rttscope/rttscope/internal/telemetry"
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
func (o *Options) Validate() error {
	if err := (sampling.Options{BPF: o.BPF, Report: o.Report}).Validate(); err != nil {
		return err
	}
	if err := o.Attach.Validate(); err != nil {
		return err
	}
	if len(o.Interfaces) == 0 {
		return errors.New("no interface given: use -i IFNAME (repeatable)")
	}
	if o.CleanupInterval <= 0 || o.StatsInterval < 0 || o.Duration < 0 {
		return errors.New("--cleanup-interval must be > 0; --stats-interval and --duration must be >= 0")
	}
	if o.Output != nil {
		return format.Require(format.Extend(o.Output), sampling.Needs(o.BPF))
	}
	return nil
}

// Run monitors until ctx is cancelled, Duration passes, or every interface
// has gone. Everything it attached is detached before it returns.
func Run(ctx context.Context, opts Options) (err error) {
	if opts.Output == nil {
		return errors.New("monitor: no output writer")
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	out := format.Extend(opts.Output)
	if err := kernel.CheckRequired(); err != nil {
		return err
	}

	ifaces, err := inspect(opts)
	if err != nil {
		return err
	}
	cfg := opts.BPF
	for _, ifc := range ifaces {
		cfg.HaveL3Ifaces = cfg.HaveL3Ifaces || ifc.L3Only
	}
	objs, err := loader.Load(cfg)
	if err != nil {
		return err
	}
	defer objs.Close()
	for _, ifc := range ifaces {
		if ifc.L3Only {
			if err := objs.MarkL3Interface(uint32(ifc.Index)); err != nil {
				return fmt.Errorf("mark %s as L3-only: %w", ifc.Name, err)
			}
		}
	}

	rd, err := ringbuf.NewReader(objs.Events)
	if err != nil {
		return fmt.Errorf("open ring buffer: %w", err)
	}
	defer rd.Close()
	cleaner, err := objs.NewCleaner()
	if err != nil {
		return err
	}
	defer cleaner.Close()

	var agg *aggregation
	if cfg.Aggregate || cfg.FlowSummary {
		agg = &aggregation{out: out, start: time.Now().UnixNano()}
	}
	if cfg.Aggregate {
		agg.a = objs.NewAggregator(true)
	}
	if cfg.FlowSummary {
		s, serr := objs.NewSummaries(clockOffset())
		if serr != nil {
			return serr
		}
		defer s.Close()
		agg.sums = s
	}
	// Accounting goes on before the hooks, so it sees the first packet,
	// and off (the deferred Close) after they are gone.
	if opts.BPFStats {
		c, err := telemetry.EnableBPFStats()
		if err != nil {
			return fmt.Errorf("--bpf-stats: %w", err)
		}
		defer c.Close()
	}
	atts, err := attachAll(objs, ifaces, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, atts.closeAll()) }()
	for _, a := range atts.list() {
		fmt.Fprintf(opts.Log, "rttscope: watching %s (%v)\n", a.Iface.Name, a.Modes)
	}
	for _, n := range objs.Variant.Notes {
		fmt.Fprintf(opts.Log, "rttscope: fallback: %s\n", n)
	}
	fmt.Fprintf(opts.Log, "rttscope: variant %s\n", objs.Variant)
	if ms, err := objs.MemoryUsage(); err == nil {
		fmt.Fprintf(opts.Log, "rttscope: %s\n", loader.MemorySummary(ms))
	}
	if opts.BPFStats {
		fmt.Fprintln(opts.Log, "rttscope: BPF run time statistics enabled for this run (costs every BPF program on the host about 20-80 ns per run)")
	}
	st := &statsWriter{objs: objs, out: out, log: opts.Log,
		tel: telemetry.NewSampler(objs.HookPrograms(opts.Attach.IngressHook), opts.BPFStats)}
	if opts.OnAttached != nil {
		opts.OnAttached()
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, opts.Duration)
		defer cancel()
	}
	gone := watchLinks(runCtx, opts.Netns, atts, opts.Log)

	r := &reader{rd: rd, out: out}
	r.dec.ClockOffset = clockOffset()
	var wg sync.WaitGroup
	readErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		readErr <- r.loop()
	}()

	err = housekeeping(runCtx, opts, st, cleaner, r, gone, readErr, agg)

	// Detach first so nothing new arrives, then drain what is left.
	// Flush (not SetDeadline, which waits for the lock a blocked ReadInto
	// holds, so it hangs while the ring stays empty) wakes the reader,
	// which returns after the records already in the ring.
	err = errors.Join(err, atts.closeAll())
	flushErr := rd.Flush()
	if flushErr != nil {
		rd.Close() // the loop then ends with ErrClosed; nothing to drain
	}
	wg.Wait()
	select {
	case rerr := <-readErr:
		err = errors.Join(err, rerr)
	default:
	}
	if flushErr == nil {
		err = errors.Join(err, r.drain())
	}
	if agg != nil {
		err = errors.Join(err, agg.collect(), agg.drain())
	}
	err = errors.Join(err, st.write())
	return errors.Join(err, opts.Output.Flush())
}

func inspect(opts Options) ([]loader.Interface, error) {
	var ifaces []loader.Interface
	seen := map[string]bool{}
	err := nsrun.Named(opts.Netns, func() error {
		for _, name := range opts.Interfaces {
			if seen[name] {
				return fmt.Errorf("interface %q given twice", name)
			}
			seen[name] = true
			ifc, err := loader.Inspect(name)
			if err != nil {
				return err
			}
			ifaces = append(ifaces, ifc)
		}
		return nil
	})
	return ifaces, err
}

// housekeeping runs the periodic work until the run ends and returns why.
func housekeeping(ctx context.Context, opts Options, st *statsWriter, cleaner *loader.Cleaner,
	r *reader, gone <-chan struct{}, readErr <-chan error, agg *aggregation) error {
	cleanup := time.NewTicker(opts.CleanupInterval)
	defer cleanup.Stop()
	var statsC <-chan time.Time
	if opts.StatsInterval > 0 {
		t := time.NewTicker(opts.StatsInterval)
		defer t.Stop()
		statsC = t.C
	}
	var aggC, sumC <-chan time.Time
	if opts.BPF.Aggregate {
		t := time.NewTicker(opts.Report.AggregateInterval)
		defer t.Stop()
		aggC = t.C
	}
	if opts.BPF.FlowSummary && opts.Report.FlowSummaryInterval > 0 {
		t := time.NewTicker(opts.Report.FlowSummaryInterval)
		defer t.Stop()
		sumC = t.C
	}
	flush := time.NewTicker(200 * time.Millisecond)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-gone:
			return errors.New("every monitored interface has disappeared")
		case err := <-readErr:
			return fmt.Errorf("reading events: %w", err)
		case <-cleanup.C:
			if err := cleaner.Run(); err != nil {
				return err
			}
			r.setClockOffset(clockOffset())
			if agg != nil && agg.sums != nil {
				agg.sums.SetClockOffset(r.offset.Load())
			}
		case <-aggC:
			if err := agg.collect(); err != nil {
				return err
			}
		case <-sumC:
			if err := agg.snapshot(); err != nil {
				return err
			}
		case <-statsC:
			if err := st.write(); err != nil {
				return err
			}
		case <-flush.C:
			if err := agg.drain(); err != nil {
				return err
			}
			if err := opts.Output.Flush(); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		}
	}
}

// statsWriter writes the stats records: kernel counters and
// self-telemetry (process resources, BPF program run time).
type statsWriter struct {
	objs *loader.Objects
	tel  *telemetry.Sampler
	out  format.Writer
	log  io.Writer
	// warned is set once a telemetry problem has been logged.
	warned bool
}

// write writes one record. Failing to read the kernel counters ends the
// run; a telemetry part that cannot be read is left out of the record and
// logged once.
func (w *statsWriter) write() error {
	var s events.Stats
	if err := w.objs.Stats(&s); err != nil {
		return err
	}
	if err := w.tel.Fill(&s); err != nil && !w.warned {
		w.warned = true
		fmt.Fprintf(w.log, "rttscope: warning: self-telemetry incomplete: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	s.Time = time.Now().UnixNano()
	s.Variant = w.objs.Variant.String()
	return w.out.WriteStats(&s)
}

// aggregation ends the intervals of aggregated mode and delivers per-flow
// summaries; either part may be absent (nil a or sums).
type aggregation struct {
	a     *loader.Aggregator
	sums  *loader.Summaries
	out   format.Writer
	start int64
}

// drain writes the summaries of flows that ended.
func (g *aggregation) drain() error {
	if g == nil || g.sums == nil {
		return nil
	}
	return g.sums.Drain(g.out.WriteFlowSummary)
}

// snapshot writes the summaries of every live flow.
func (g *aggregation) snapshot() error {
	if err := g.drain(); err != nil {
		return err
	}
	return g.sums.Snapshot(g.out.WriteFlowSummary)
}

// collect writes the records of the interval that ends now.
func (g *aggregation) collect() error {
	if g == nil || g.a == nil {
		return nil
	}
	end := time.Now().UnixNano()
	err := g.a.Collect(g.start, end, g.out.WriteAggregate)
	g.start = end
	return err
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
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1)
		unix.ClockGettime(unix.CLOCK_REALTIME, &wall)
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &m2)
		if gap := m2.Nano() - m1.Nano(); gap < best {
			best = gap
			off = wall.Nano() - (m1.Nano() + gap/2)
		}
	}
	return off
}
