package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/sampling"
)

// Options configure a replay.
type Options struct {
	// Path is the capture file (pcap or pcapng, optionally gzip
	// compressed); "-" is standard input.
	Path string
	// BPF is the program configuration, as for the live monitor.
	BPF loader.Config
	// Report holds the length of an aggregation interval (in capture
	// time) when BPF.Aggregate is set. Flow summaries are written when
	// flows end only: FlowSummaryInterval is not used.
	Report sampling.Report
	// AggregateOffset shifts the aggregation intervals: they start at
	// multiples of the interval since the Unix epoch plus this offset
	// (to line them up with the intervals of a live recording).
	AggregateOffset time.Duration
	// Direction chooses which packets are egress (see DirectionRules).
	Direction DirectionRules
	// Interfaces, when not empty, keeps only the packets of these pcapng
	// interface IDs (0-based, as tshark's frame.interface_id).
	Interfaces []int
	// CleanupInterval is how often, in capture time, idle flows and
	// unanswered timestamps are expired (default 1 s). The expiry runs at
	// every multiple of it since the Unix epoch that falls between two
	// packets.
	CleanupInterval time.Duration
	// Stats writes a record of the kernel counters after the last packet,
	// timed at the last packet's capture time.
	Stats bool
	// Workers is how many threads run packets through the programs at
	// once (see parallel.go); 0 means DefaultWorkers, 1 a sequential
	// replay that writes events strictly in capture order.
	Workers int
	// Progress, when set, receives a self-overwriting progress line for
	// replays that take longer than a second (give it a terminal only).
	Progress io.Writer
	// FirstPacket, when set, is called with the capture time (Unix ns) of
	// the first packet run through the programs, before any record of the
	// replay is written (the origin of --relative-time).
	FirstPacket func(ns int64)
}

// Summary describes a finished (or failed) replay.
type Summary struct {
	Packets  uint64 // records read from the file
	Fed      uint64 // packets run through the programs
	Filtered uint64 // packets of other interfaces (Options.Interfaces)
	// Short counts packets too short for BPF_PROG_TEST_RUN: without a
	// complete Ethernet header, or of EtherType IPv4/IPv6 without a
	// complete IP header. The programs would ignore them anyway.
	Short uint64
	// DecidedBy counts the packets whose direction each rule decided.
	DecidedBy [numDirSources]uint64
	RTTs      uint64 // RTT events written
	Flows     uint64 // flow events written
	// First and Last are the smallest and largest capture times (Unix ns).
	First, Last int64
	// Expiries is how many times the cleanup iterators ran.
	Expiries uint64
	// Elapsed is the wall-clock time the replay took (after loading).
	Elapsed time.Duration
}

// DefaultCleanupInterval is the capture-time cleanup interval.
const DefaultCleanupInterval = time.Second

// writerSink hands events to a format writer and counts them.
type writerSink struct {
	w           format.EventWriter
	rtts, flows uint64
}

func (s *writerSink) RTT(e *events.RTT) error {
	s.rtts++
	if err := s.w.WriteRTT(e); err != nil {
		return &outputError{err}
	}
	return nil
}

func (s *writerSink) Flow(e *events.FlowEvent) error {
	s.flows++
	if err := s.w.WriteFlow(e); err != nil {
		return &outputError{err}
	}
	return nil
}

// outputError marks a failure to write the output (not the input's fault).
type outputError struct{ err error }

func (e *outputError) Error() string { return "write output: " + e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// ExpireAt runs the cleanup iterators as if the time were now (Unix ns),
// then delivers the events they produced, ordered by flow (the kernel walks
// its hash maps in an order that changes from run to run). The next packet
// fed sets the programs' notion of the time again.
func (e *Engine) ExpireAt(now int64) error {
	if err := e.objs.ReplayNow.Set(uint64(now)); err != nil {
		return fmt.Errorf("set replay time: %w", err)
	}
	if err := e.cleaner.Run(); err != nil {
		return err
	}
	if e.rb.AvailableBytes() == 0 {
		return nil
	}
	sink := e.sink
	var coll collectSink
	e.sink = &coll
	err := e.Drain()
	e.sink = sink
	if err != nil {
		return err
	}
	slices.SortStableFunc(coll.ev, func(a, b collected) int { return compareFlows(a.flowOf(), b.flowOf()) })
	return coll.deliver(sink)
}

// compareFlows orders flows by protocol, then source, then destination.
func compareFlows(a, b *events.Flow) int {
	if c := cmp.Compare(a.Proto, b.Proto); c != 0 {
		return c
	}
	if c := a.Src.IP.Compare(b.Src.IP); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Src.Port, b.Src.Port); c != 0 {
		return c
	}
	if c := a.Dst.IP.Compare(b.Dst.IP); c != 0 {
		return c
	}
	return cmp.Compare(a.Dst.Port, b.Dst.Port)
}

// Replay is a capture file opened for replay, with the programs loaded.
type Replay struct {
	opts Options
	rd   *capture.Reader
	eng  *Engine
	sink writerSink
}

// Open opens the capture and loads the programs, so that a missing file, a
// file that is not a capture, or missing privileges are reported before
// any output is started.
func Open(opts Options) (*Replay, error) {
	if err := opts.Report.Check(opts.BPF); err != nil {
		return nil, err
	}
	if opts.CleanupInterval <= 0 {
		opts.CleanupInterval = DefaultCleanupInterval
	}
	// The file first: a missing or unreadable file is reported as such,
	// even without the privileges to load BPF programs.
	rd, err := capture.Open(opts.Path)
	if err != nil {
		return nil, err
	}
	if err := kernel.CheckRequired(); err != nil {
		rd.Close()
		return nil, err
	}
	r := &Replay{opts: opts, rd: rd}
	if r.eng, err = NewEngine(opts.BPF, &r.sink); err != nil {
		rd.Close()
		return nil, err
	}
	return r, nil
}

// Variant says which variant of each optional part the kernel led to
// (loader.Variant), and why.
func (r *Replay) Variant() loader.Variant { return r.eng.objs.Variant }

// Close releases the file and the programs.
func (r *Replay) Close() error {
	return errors.Join(r.eng.Close(), r.rd.Close())
}

// Run replays the capture through the programs and writes every event to
// out, in capture order. Events computed before a read error are written
// (and out flushed, but not closed) before Run returns the error, which
// names the file and packet index. Aggregated mode and flow summaries need
// a format.Writer with those capabilities (format.New's have all), which
// Run checks before the first packet. Run can be called once.
func (r *Replay) Run(ctx context.Context, w format.EventWriter) (sum Summary, err error) {
	opts := r.opts
	out := format.Extend(w)
	if err := format.Require(out, sampling.Needs(opts.BPF)); err != nil {
		return sum, err
	}
	r.sink.w = out
	l := &replayer{
		eng:      r.eng,
		dir:      newDirector(opts.Direction, opts.BPF.TCPFlowTimeout, opts.BPF.OtherFlowTimeout),
		interval: int64(opts.CleanupInterval),
		horizon:  int64(max(opts.BPF.TCPFlowTimeout, opts.BPF.OtherFlowTimeout, opts.BPF.TimestampTimeout) + opts.CleanupInterval),

		firstPacket: opts.FirstPacket,
	}
	if opts.BPF.Aggregate || opts.BPF.FlowSummary {
		l.sw = out
		if opts.BPF.Aggregate {
			// Interval boundaries in capture time; the programs have
			// returned when Collect runs (after a flush), so no grace.
			l.agg = r.eng.Objects().NewAggregator(false)
			l.agg.Timeout = opts.Report.AggregateTimeout
			every := int64(opts.Report.AggregateInterval)
			l.aggIv = capture.Intervals{Every: every, Offset: int64(opts.AggregateOffset) % every}
			l.aggMeta = *sampling.AggregateMeta(opts.BPF, opts.Report)
		}
		if opts.BPF.FlowSummary {
			if l.sums, err = r.eng.Objects().NewSummaries(0); err != nil {
				return sum, err
			}
			defer l.sums.Close()
		}
	}
	if len(opts.Interfaces) > 0 {
		l.keep = make(map[int]bool, len(opts.Interfaces))
		for _, i := range opts.Interfaces {
			l.keep[i] = true
		}
	}
	// Only an explicit --workers 1 is strictly sequential; otherwise even
	// one worker goes through the batched path, many packets per call.
	sequential := opts.Workers == 1
	if opts.Workers == 0 {
		opts.Workers = DefaultWorkers()
	}
	if !sequential {
		l.par = newParallel(r.eng, r.rd.Name(), opts.Workers)
		defer l.par.close()
	}
	start := time.Now()
	var prog *progress
	if opts.Progress != nil {
		prog = newProgress(opts.Progress, r.rd.Name(), r.rd.Size(), start)
	}

	err = l.loop(ctx, r.rd, &sum, prog)
	// Write what the packets read so far gave, also after a read error.
	if ferr := l.flush(); err == nil {
		err = ferr
	}
	if start, last, ok := l.aggIv.Finish(); l.agg != nil && ok {
		// The last interval ends with the last packet.
		if aerr := l.agg.Collect(start, last, l.sw.WriteAggregate); err == nil {
			err = aerr
		}
	}
	if derr := l.drainSummaries(); err == nil {
		err = derr
	}
	if err == nil && opts.Stats {
		err = writeStats(r.eng, out, sum.Last)
	}
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write output: %w", ferr)
	}
	now := time.Now()
	prog.done(now, sum.Packets)
	sum.Elapsed = now.Sub(start)
	sum.DecidedBy = l.dir.counts
	sum.RTTs, sum.Flows = r.sink.rtts, r.sink.flows
	sum.Expiries = l.expiries
	return sum, err
}

func writeStats(eng *Engine, out format.EventWriter, t int64) error {
	var s events.Stats
	if err := eng.Stats(&s); err != nil {
		return err
	}
	s.Time = t
	s.Variant = eng.objs.Variant.String()
	return out.WriteStats(&s)
}

// replayer is the state of one replay loop.
type replayer struct {
	eng      *Engine
	dir      *director
	keep     map[int]bool
	interval int64 // cleanup interval, ns of capture time
	horizon  int64 // after this long without packets nothing more can expire
	next     int64 // next cleanup time; 0 before the first packet
	quiet    int64 // no cleanup can have an effect after this time
	expiries uint64
	par      *parallel // nil: sequential
	// Aggregated mode and flow summaries (docs/aggregation.md).
	sw          format.Writer
	agg         *loader.Aggregator
	aggIv       capture.Intervals    // of aggregated mode, in capture time
	aggMeta     events.AggregateMeta // the first record
	sums        *loader.Summaries
	firstPacket func(ns int64) // Options.FirstPacket
}

// drainSummaries writes the summaries of flows that ended.
func (r *replayer) drainSummaries() error {
	if r.sums == nil {
		return nil
	}
	return r.sums.Drain(r.sw.WriteFlowSummary)
}

// aggregate closes the aggregation interval if ts is past its end.
func (r *replayer) aggregate(ts int64) error {
	if r.agg == nil {
		return nil
	}
	start, end, ended := r.aggIv.Advance(ts)
	if !ended {
		return nil
	}
	if err := r.flush(); err != nil {
		return err
	}
	return r.agg.Collect(start, end, r.sw.WriteAggregate)
}

// flush runs the packets queued for parallel replay.
func (r *replayer) flush() error {
	if r.par == nil {
		return nil
	}
	return r.par.flush()
}

// checkEvery is how many packets pass between checks of the context and
// updates of the progress line.
const checkEvery = 4096

// summaryEvery is how many packets pass between two reads of the flow
// summary ring buffer (1 MiB: about 1000 summaries).
const summaryEvery = 512

func (r *replayer) loop(ctx context.Context, rd *capture.Reader, sum *Summary, prog *progress) error {
	var last int64
	for {
		if sum.Packets%summaryEvery == 0 {
			// Flows ending between two drains must fit the ring.
			if err := r.drainSummaries(); err != nil {
				return err
			}
		}
		if sum.Packets%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%s: interrupted after %d packets: %w", rd.Name(), sum.Packets, err)
			}
			if prog != nil {
				prog.update(time.Now(), sum.Packets, rd.BytesRead())
			}
		}
		p, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		sum.Packets++
		if r.keep != nil && !r.keep[p.Interface] {
			sum.Filtered++
			continue
		}
		ts := p.Timestamp
		if ts == 0 {
			// pcapng simple packet blocks carry no time: take the
			// previous packet's.
			ts = last
		}
		last = ts
		if len(p.Data) < minTestRunData(p.Data) {
			sum.Short++
			continue
		}
		if sum.Fed == 0 {
			sum.First, sum.Last = ts, ts
			r.next = ts - ts%r.interval + r.interval
			if r.firstPacket != nil {
				r.firstPacket(ts)
			}
			if r.agg != nil {
				if err := r.sw.WriteAggregate(&events.Aggregate{Time: ts, Meta: &r.aggMeta}); err != nil {
					return err
				}
			}
		}
		sum.First, sum.Last = min(sum.First, ts), max(sum.Last, ts)
		if err := r.aggregate(ts); err != nil {
			return err
		}
		if ts >= r.next {
			if err := r.flush(); err != nil {
				return err
			}
			if err := r.expire(ts); err != nil {
				return err
			}
		}
		r.quiet = max(r.quiet, ts+r.horizon)
		egress := r.dir.egress(p, ts)
		if r.par != nil {
			if err := r.par.add(p, ts, egress); err != nil {
				return err
			}
		} else if err := r.eng.Feed(p.Data, ts, egress); err != nil {
			var oe *outputError
			if errors.As(err, &oe) {
				return oe
			}
			return fmt.Errorf("%s: packet %d: %w", rd.Name(), p.Index, err)
		}
		sum.Fed++
	}
}

// expire runs the cleanup at every interval boundary up to ts, except at
// boundaries after a quiet time, when nothing fed so far can still expire.
func (r *replayer) expire(ts int64) error {
	for r.next <= ts {
		if r.next > r.quiet {
			r.next = ts - ts%r.interval + r.interval
			return nil
		}
		if err := r.eng.ExpireAt(r.next); err != nil {
			return err
		}
		r.expiries++
		r.next += r.interval
	}
	return nil
}
