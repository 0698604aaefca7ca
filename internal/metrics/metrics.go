// Package metrics is the Prometheus sink (--metrics-addr, docs/sinks.md):
// a format.Writer that takes aggregated records and stats records and
// serves them on /metrics. Aggregated records become per-prefix RTT
// histograms (rttscope_rtt_seconds, native and classic buckets, from the
// kernel's histograms) and packet and byte counters; stats records become
// the self-telemetry (map occupancy, refusals, evictions, lost events,
// CPU, memory, BPF run time per packet, the sinks' counters). Prefixes
// arrive as the privacy options left them, so labels carry no address
// that the records would not.
package metrics

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

// Options configure the metrics sink.
type Options struct {
	// Addr is the HTTP listen address, as ":9464" or "127.0.0.1:9464".
	Addr string
	// MaxPrefixes bounds the prefixes with series of their own; records
	// of further prefixes are added to the series of prefix="overflow".
	MaxPrefixes int
}

// DefaultMaxPrefixes is the default of --metrics-max-prefixes.
const DefaultMaxPrefixes = 1000

// OverflowPrefix is the prefix label of the series that count the
// prefixes beyond MaxPrefixes.
const OverflowPrefix = "overflow"

// Sink is the metrics sink. Its writes come from one goroutine (a
// sink.Fanout's queue), scrapes from others.
type Sink struct {
	opts    Options
	started time.Time
	ln      net.Listener
	srv     *http.Server
	served  chan error

	mu       sync.Mutex
	prefixes map[string]*prefixState
	overflow *prefixState
	// overflowRecords counts aggregated records added to the overflow
	// series.
	overflowRecords uint64
	stats           *events.Stats // the latest stats record (a copy)
	closed          bool
}

// prefixState is what the series of one prefix expose.
type prefixState struct {
	rtt      *rttHistogram
	rx, tx   events.Traffic
	bySource [events.NumSources]uint64 // samples per RTT source
}

// New listens on opts.Addr (so that a taken port is an error before the
// run starts) and serves /metrics until Close.
func New(opts Options) (*Sink, error) {
	if opts.MaxPrefixes < 1 {
		return nil, errors.New("--metrics-max-prefixes must be at least 1")
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	s := &Sink{opts: opts, started: time.Now(), ln: ln, prefixes: map[string]*prefixState{}, served: make(chan error, 1)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{s})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the address the sink listens on.
func (s *Sink) Addr() net.Addr { return s.ln.Addr() }

// WriteAggregate implements format.Writer: the record's samples and
// traffic are added to its prefix's series.
func (s *Sink) WriteAggregate(a *events.Aggregate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.prefix(prefixLabel(a))
	p.rtt.add(a, DefaultBuckets)
	addTraffic(&p.rx, &a.RX)
	addTraffic(&p.tx, &a.TX)
	for i, n := range a.BySource {
		p.bySource[i] += n
	}
	return nil
}

// prefix returns the state of the prefix labelled l, or the overflow
// state when MaxPrefixes prefixes have series already.
func (s *Sink) prefix(l string) *prefixState {
	if p := s.prefixes[l]; p != nil {
		return p
	}
	if len(s.prefixes) < s.opts.MaxPrefixes {
		p := &prefixState{rtt: newRTTHistogram(len(DefaultBuckets))}
		s.prefixes[l] = p
		return p
	}
	s.overflowRecords++
	if s.overflow == nil {
		s.overflow = &prefixState{rtt: newRTTHistogram(len(DefaultBuckets))}
	}
	return s.overflow
}

// prefixLabel is the prefix as the formats print it: "10.1.2.0/24", or
// "#N" when --anonymize drop numbers the prefixes.
func prefixLabel(a *events.Aggregate) string {
	if !a.Prefix.IsValid() {
		return "#" + strconv.FormatUint(a.PrefixID, 10)
	}
	return a.Prefix.String()
}

func addTraffic(to, t *events.Traffic) {
	for i := range t.Packets {
		to.Packets[i] += t.Packets[i]
		to.Bytes[i] += t.Bytes[i]
	}
	for i := range t.ECN {
		to.ECN[i] += t.ECN[i]
	}
}

// WriteStats implements format.Writer: the record is what the
// self-telemetry series show until the next one.
func (s *Sink) WriteStats(st *events.Stats) error {
	c := st.Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = c
	return nil
}

// The records the metrics sink does not use.

// WriteRTT implements format.Writer: samples are not metrics.
func (s *Sink) WriteRTT(*events.RTT) error { return nil }

// WriteFlow implements format.Writer: flow events are not metrics.
func (s *Sink) WriteFlow(*events.FlowEvent) error { return nil }

// WriteFlowSummary implements format.Writer: not metrics.
func (s *Sink) WriteFlowSummary(*events.FlowSummary) error { return nil }

// WriteAnonKey implements format.Writer: not metrics.
func (s *Sink) WriteAnonKey(*events.AnonKey) error { return nil }

// WritePDM implements format.Writer: not metrics (yet).
func (s *Sink) WritePDM(*events.PDM) error { return nil }

// WritePDMInterval implements format.Writer: not metrics (yet).
func (s *Sink) WritePDMInterval(*events.PDMInterval) error { return nil }

// Flush implements format.Writer: every record is visible at once.
func (s *Sink) Flush() error { return nil }

// Restart implements format.Writer.
func (s *Sink) Restart(reopen func() error) error { return reopen() }

// Capabilities implements format.Writer: aggregated records (the stats
// record is taken by every writer).
func (s *Sink) Capabilities() format.Capability { return format.Aggregates }

// Close implements format.Writer: it stops serving.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.srv.Close()
	if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

var _ io.Closer = (*Sink)(nil)
