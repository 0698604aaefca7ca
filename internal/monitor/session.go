package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/sampling"
	"github.com/rttscope/rttscope/internal/telemetry"
)

// session is one monitor run, in three steps:
//
//   - open checks every option, the output writer's capabilities included,
//     before it touches anything; then it loads the programs, opens the
//     readers (ring buffer, cleaner, aggregator, flow summaries) and
//     attaches the hooks. If a step fails it releases what the earlier
//     ones took, so nothing stays loaded or attached.
//   - loop does the periodic work (expiry, aggregation intervals, flow
//     summaries, stats records, output flushes) while a goroutine moves
//     events from the ring buffer to the output (in aggregated mode the
//     loop drains the ring itself), until the context ends,
//     Duration passes, every interface has gone, or something fails.
//   - close detaches first, so nothing new arrives, then drains the ring
//     buffer, writes the last interval, the summaries of flows that ended
//     and a final stats record, flushes the output, and releases
//     everything; its error joins the loop's with whatever went wrong.
//
// Everything open takes goes on undo, which release runs newest first.
type session struct {
	opts    Options
	out     format.Writer
	objs    *loader.Objects
	ring    *ringbuf.Reader
	reader  *reader
	cleaner *loader.Cleaner
	// agg ends the intervals of aggregated mode (nil without it); the
	// open interval started at aggStart (Unix ns).
	agg      *loader.Aggregator
	aggStart int64
	// sums delivers per-flow summaries (nil without them).
	sums  *loader.Summaries
	atts  *attachments
	stats *statsWriter
	undo  []func() error
	// The reader goroutine (loop starts it): readErr gets its result.
	readers sync.WaitGroup
	readErr chan error
}

// flushEvery is how often buffered output is written out.
const flushEvery = 200 * time.Millisecond

// drainEvery is how often the loop drains the ring in aggregated mode,
// where the programs send no events at all (samples go into the kernel's
// histograms; flow openings, closings and timeouts are not reported) and
// no reader goroutine runs. A goroutine blocked in the ring's epoll_wait
// keeps an OS thread in a system call, and the Go runtime's monitor
// thread then wakes every few milliseconds to look at it: on an idle
// interface that, the reader's polls and the output flushes every 200 ms
// were most of the process's CPU (docs/performance.md, "Round 7").
const drainEvery = time.Second

// quiet reports whether the loop itself drains the ring and flushes the
// output after its own writes (aggregated mode), instead of a reader
// goroutine and a flush ticker.
func (s *session) quiet() bool { return s.opts.BPF.Aggregate }

func open(opts Options) (_ *session, err error) {
	if opts.Output == nil {
		return nil, errors.New("monitor: no output writer")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if err := kernel.CheckRequired(); err != nil {
		return nil, err
	}
	ifaces, err := inspect(opts)
	if err != nil {
		return nil, err
	}
	s := &session{opts: opts, out: format.Extend(opts.Output), readErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			if rerr := s.release(); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	if err := s.load(ifaces); err != nil {
		return nil, err
	}
	if err := s.openReaders(); err != nil {
		return nil, err
	}
	// Accounting goes on before the hooks, so it sees the first packet,
	// and off (release) after they are gone.
	if opts.BPFStats {
		c, err := telemetry.EnableBPFStats()
		if err != nil {
			return nil, fmt.Errorf("--bpf-stats: %w", err)
		}
		s.undo = append(s.undo, c.Close)
	}
	if s.atts, err = attachAll(s.objs, ifaces, opts); err != nil {
		return nil, err
	}
	s.undo = append(s.undo, s.atts.closeAll)
	s.announce()
	s.stats = &statsWriter{objs: s.objs, out: s.out, log: opts.Log,
		tel: telemetry.NewSampler(s.objs.HookPrograms(opts.Attach.IngressHook), opts.BPFStats)}
	if opts.OnAttached != nil {
		opts.OnAttached()
	}
	return s, nil
}

// load loads the programs, told whether (and on which interfaces) packets
// come without an Ethernet header.
func (s *session) load(ifaces []loader.Interface) error {
	cfg := s.opts.BPF
	// The reader polls (reader.loop): events wake it only when the ring
	// is an eighth full.
	cfg.EventWakeupBytes = cfg.RingbufSize / 8
	for _, ifc := range ifaces {
		cfg.HaveL3Ifaces = cfg.HaveL3Ifaces || ifc.L3Only
	}
	objs, err := loader.Load(cfg)
	if err != nil {
		return err
	}
	s.objs = objs
	s.undo = append(s.undo, objs.Close)
	for _, ifc := range ifaces {
		if ifc.L3Only {
			if err := objs.MarkL3Interface(uint32(ifc.Index)); err != nil {
				return fmt.Errorf("mark %s as L3-only: %w", ifc.Name, err)
			}
		}
	}
	return nil
}

// openReaders opens what reads the programs' results: the event ring
// buffer, the cleaner, and with their modes the aggregator and the flow
// summaries.
func (s *session) openReaders() error {
	rd, err := ringbuf.NewReader(s.objs.Events)
	if err != nil {
		return fmt.Errorf("open ring buffer: %w", err)
	}
	s.ring = rd
	s.undo = append(s.undo, rd.Close)
	s.reader = &reader{rd: rd, out: s.out}
	if s.cleaner, err = s.objs.NewCleaner(); err != nil {
		return err
	}
	s.undo = append(s.undo, s.cleaner.Close)
	if s.opts.BPF.Aggregate {
		s.agg, s.aggStart = s.objs.NewAggregator(true), time.Now().UnixNano()
		s.agg.Timeout = s.opts.Report.AggregateTimeout
		if err := s.out.WriteAggregate(&events.Aggregate{Time: s.aggStart, Meta: sampling.AggregateMeta(s.opts.BPF, s.opts.Report)}); err != nil {
			return err
		}
	}
	if s.opts.BPF.FlowSummary {
		if s.sums, err = s.objs.NewSummaries(clockOffset()); err != nil {
			return err
		}
		s.undo = append(s.undo, s.sums.Close)
	}
	return nil
}

// announce logs what the run does: the hooks per interface, the fallbacks
// and variant the kernel led to, kernel memory, BPF run time accounting.
func (s *session) announce() {
	log := s.opts.Log
	for _, a := range s.atts.list() {
		fmt.Fprintf(log, "rttscope: watching %s (%v)\n", a.Iface.Name, a.Modes)
	}
	for _, n := range s.objs.Variant.Notes {
		fmt.Fprintf(log, "rttscope: fallback: %s\n", n)
	}
	fmt.Fprintf(log, "rttscope: variant %s\n", s.objs.Variant)
	if ms, err := s.objs.MemoryUsage(); err == nil {
		fmt.Fprintf(log, "rttscope: %s\n", loader.MemorySummary(ms))
	}
	if s.opts.BPFStats {
		fmt.Fprintln(log, "rttscope: BPF run time statistics enabled for this run (costs every BPF program on the host about 20-80 ns per run)")
	}
}

// loop runs until the run ends and returns why: nil when ctx ends or
// Duration passes.
func (s *session) loop(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.opts.Duration > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, s.opts.Duration)
		defer cancelTimeout()
	}
	gone := watchLinks(ctx, s.opts.Netns, s.atts, s.opts.Log)
	s.startReader()

	var aggEvery, sumEvery time.Duration
	if s.agg != nil {
		aggEvery = s.opts.Report.AggregateInterval
	}
	if s.sums != nil {
		sumEvery = s.opts.Report.FlowSummaryInterval
	}
	// Quiet: the process has no thread waiting in a system call and
	// wakes only for its own work.
	quiet := s.quiet()
	var drainC, flushC <-chan time.Time
	if quiet {
		c, stop := every(drainEvery)
		defer stop()
		drainC = c
	} else {
		c, stop := every(flushEvery)
		defer stop()
		flushC = c
	}
	cleanupC, stop := every(s.opts.CleanupInterval)
	defer stop()
	statsC, stop := every(s.opts.StatsInterval)
	defer stop()
	aggC, stop := every(aggEvery)
	defer stop()
	sumC, stop := every(sumEvery)
	defer stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-gone:
			return errors.New("every monitored interface has disappeared")
		case rerr := <-s.readErr:
			return fmt.Errorf("reading events: %w", rerr)
		case <-cleanupC:
			err = s.expire()
		case <-aggC:
			err = s.collect()
		case <-sumC:
			err = s.snapshot()
		case <-statsC:
			err = s.stats.write()
		case <-flushC:
			err = s.flush()
		case <-drainC:
			err = s.reader.drain()
		}
		if err == nil && quiet {
			err = s.flush()
		}
		if err != nil {
			return err
		}
	}
}

// every returns the channel of a ticker of period d, or nil (never ready)
// for d <= 0, and the function that stops it.
func every(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// startReader starts the goroutine that moves events to the output; its
// result goes to readErr. Quiet there is none: the loop drains the ring
// (drainEvery).
func (s *session) startReader() {
	s.reader.dec.ClockOffset = clockOffset()
	if s.quiet() {
		return
	}
	s.readers.Go(func() { s.readErr <- s.reader.loop() })
}

// expire runs the cleanup in the kernel and refreshes the clock offset.
func (s *session) expire() error {
	if err := s.cleaner.Run(); err != nil {
		return err
	}
	s.reader.setClockOffset(clockOffset())
	if s.sums != nil {
		s.sums.SetClockOffset(s.reader.offset.Load())
	}
	return nil
}

// collect writes the records of the aggregation interval that ends now.
func (s *session) collect() error {
	if s.agg == nil {
		return nil
	}
	end := time.Now().UnixNano()
	err := s.agg.Collect(s.aggStart, end, s.out.WriteAggregate)
	s.aggStart = end
	return err
}

// drainSummaries writes the summaries of flows that ended.
func (s *session) drainSummaries() error {
	if s.sums == nil {
		return nil
	}
	return s.sums.Drain(s.out.WriteFlowSummary)
}

// snapshot writes the summaries of every live flow.
func (s *session) snapshot() error {
	if err := s.drainSummaries(); err != nil {
		return err
	}
	return s.sums.Snapshot(s.out.WriteFlowSummary)
}

// flush writes the summaries of flows that ended and what the output
// buffers.
func (s *session) flush() error {
	if err := s.drainSummaries(); err != nil {
		return err
	}
	if err := s.out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// close ends the run that loop ended with err.
func (s *session) close(err error) error {
	// Detach first so nothing new arrives, then drain what is left.
	// Flush (not SetDeadline, which waits for the lock a blocked ReadInto
	// holds, so it hangs while the ring stays empty) wakes the reader,
	// which returns after the records already in the ring.
	err = errors.Join(err, s.atts.closeAll())
	flushErr := s.ring.Flush()
	if flushErr != nil {
		s.ring.Close() // the reader then ends with ErrClosed; nothing to drain
	}
	s.readers.Wait()
	select {
	case rerr := <-s.readErr:
		err = errors.Join(err, rerr)
	default:
	}
	if flushErr == nil {
		err = errors.Join(err, s.reader.drain())
	}
	err = errors.Join(err, s.collect(), s.drainSummaries(), s.stats.writeFinal(), s.out.Flush())
	return errors.Join(err, s.release())
}

// release closes what open took, newest first.
func (s *session) release() error {
	var errs []error
	for i := len(s.undo) - 1; i >= 0; i-- {
		errs = append(errs, s.undo[i]())
	}
	s.undo = nil
	return errors.Join(errs...)
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

// write writes one periodic record (its fast-path packet counts lag:
// loader.Objects.Stats). Failing to read the kernel counters ends the
// run; a telemetry part that cannot be read is left out of the record and
// logged once.
func (w *statsWriter) write() error { return w.writeWith(w.objs.Stats) }

// writeFinal writes the run's last record, its counts exact.
func (w *statsWriter) writeFinal() error { return w.writeWith(w.objs.StatsExact) }

func (w *statsWriter) writeWith(read func(*events.Stats) error) error {
	var s events.Stats
	if err := read(&s); err != nil {
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
