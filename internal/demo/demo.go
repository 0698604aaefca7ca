// Package demo runs rttscope end to end on a throw-away lab: it builds a
// client/middlebox/server lab (internal/lab) with paths of different RTT,
// runs the live monitor inside the middlebox namespace on every
// server-facing interface, sends pings (IPv4 and IPv6) and a paced TCP bulk
// transfer from the client to each server, and summarises per path what
// the monitor measured next to the configured RTT and the client's own
// ping times. Everything it builds is torn down before Run returns, also
// on error and when the context is cancelled (Ctrl-C).
//
// The delay of a path sits between the middlebox and that server, so the
// monitor on the middlebox's server-facing interface sees (request leaving
// → reply arriving) the RTT of the path: what the client's ping measures
// minus the short client-middlebox leg.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/monitor"
	"github.com/rttscope/rttscope/internal/sampling"
	"github.com/rttscope/rttscope/internal/stats"
	"github.com/rttscope/rttscope/internal/traffic"
)

// Defaults.
const (
	DefaultDuration     = 15 * time.Second
	DefaultPingInterval = 200 * time.Millisecond
	DefaultBulkRate     = 20_000_000 // bit/s
	DefaultPrefix       = "rttdemo"
	// MinDuration is the shortest traffic phase Run accepts.
	MinDuration = time.Second

	bulkPort = 5201
)

// DefaultPaths are two paths of 10 ms and 40 ms round trip.
func DefaultPaths() []lab.PathSpec {
	return []lab.PathSpec{
		{DelayToServer: 5 * time.Millisecond, DelayToClient: 5 * time.Millisecond},
		{DelayToServer: 20 * time.Millisecond, DelayToClient: 20 * time.Millisecond},
	}
}

// ErrNotRoot is returned when the process lacks the privileges to build a
// lab and load BPF programs.
var ErrNotRoot = errors.New("demo needs root (it creates network namespaces and loads BPF programs): run it with sudo")

// Config describes a demo run. Zero values mean the defaults.
type Config struct {
	// Paths are the server paths (default DefaultPaths).
	Paths []lab.PathSpec
	// Duration is the traffic phase: pings for the first half, the bulk
	// transfers for the second.
	Duration time.Duration
	// Sampling is the monitor's (zero: sampling.Default()), as on the
	// command line; the demo always tracks TCP and ICMP.
	Sampling sampling.Options
	// PingInterval is the time between two echo requests of one pinger.
	PingInterval time.Duration
	// BulkRate is the pacing rate of each TCP bulk transfer in bit/s.
	BulkRate uint64
	// Prefix names the lab's namespaces (PREFIX-XXXXXX-ROLE).
	Prefix string
	// Output receives the monitor's events live (nil: none). Run flushes
	// it but does not close it.
	Output format.EventWriter
	// Progress receives progress lines and the monitor's log (nil: none).
	Progress io.Writer
}

// PathResult is what the demo measured on one path.
type PathResult struct {
	Index            int
	Spec             lab.PathSpec
	Interface        string // the middlebox interface the monitor watched
	Server4, Server6 netip.Addr
	// Configured is the round trip the lab adds (both one-way delays).
	Configured time.Duration
	// PingMedian is the median RTT the client's pinger measured (IPv4
	// and IPv6 together), over PingReplies of PingSent echoes.
	PingMedian            time.Duration
	PingReplies, PingSent int
	// ICMPMedian and TCPMedian are the medians of the monitor's samples
	// completed by this server's replies (echo replies; ACKs of the bulk
	// transfer's data).
	ICMPMedian, TCPMedian   time.Duration
	ICMPSamples, TCPSamples int
	// ClientLegMedian is the median of the TCP samples the other way round
	// (server ACK → client data, matched as the data leaves the middlebox):
	// the middlebox-client-middlebox leg, tiny in this lab.
	ClientLegMedian  time.Duration
	ClientLegSamples int
	// BulkBytes is what the server acknowledged of the bulk transfer.
	BulkBytes uint64
}

// Result is the outcome of a demo run.
type Result struct {
	Paths       []PathResult
	DelayMethod string   // how the lab delayed packets (netem or userspace)
	Namespaces  []string // the lab's namespaces (all removed by the time Run returns)
	// Interrupted is set when the context ended the run early; the
	// figures then cover what was measured until then.
	Interrupted bool
}

func (c *Config) fill() error {
	if len(c.Paths) == 0 {
		c.Paths = DefaultPaths()
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Duration < MinDuration {
		return fmt.Errorf("duration %v too short: at least %v", c.Duration, MinDuration)
	}
	if c.Sampling == (sampling.Options{}) {
		c.Sampling = sampling.Default()
	}
	c.Sampling.BPF.TrackTCP, c.Sampling.BPF.TrackICMP = true, true
	if c.PingInterval <= 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.BulkRate == 0 {
		c.BulkRate = DefaultBulkRate
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return nil
}

// Run performs the demo. It returns the per-path figures, also when the
// context is cancelled during the traffic phase (Result.Interrupted).
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, format+"\n", args...) }

	if removed, err := lab.CleanupStale(); len(removed) > 0 {
		progress("removed namespaces of labs whose process died: %s", strings.Join(removed, " "))
	} else if err != nil {
		progress("warning: cleaning up stale labs: %v", err)
	}
	specs := make([]string, len(cfg.Paths))
	for i, p := range cfg.Paths {
		specs[i] = fmt.Sprintf("%v/%v = %v RTT", p.DelayToServer, p.DelayToClient, p.DelayToServer+p.DelayToClient)
		if p.RateBitsPerSec > 0 {
			specs[i] += " at " + lab.FormatRate(p.RateBitsPerSec)
		}
	}
	plural := "s"
	if len(cfg.Paths) == 1 {
		plural = ""
	}
	progress("building lab: client — middlebox — %d path%s (%s)…", len(cfg.Paths), plural, strings.Join(specs, ", "))
	l, err := lab.New(ctx, lab.Config{Prefix: cfg.Prefix, Paths: cfg.Paths})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted while building the lab: %w", err)
		}
		return nil, err
	}
	res = &Result{DelayMethod: l.DelayMethod}
	for _, n := range l.Nodes() {
		res.Namespaces = append(res.Namespaces, n.Name)
	}
	defer func() {
		progress("tearing the lab down…")
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("tear down lab: %w", cerr))
		}
	}()
	for i := range l.Servers {
		res.Paths = append(res.Paths, PathResult{
			Index:      i,
			Spec:       l.Paths[i],
			Interface:  l.MiddleboxServerIf[i],
			Server4:    l.ServerAddr4[i],
			Server6:    l.ServerAddr6[i],
			Configured: l.Paths[i].DelayToServer + l.Paths[i].DelayToClient,
		})
	}

	for i, s := range l.Servers {
		sink, err := traffic.NewSink(s, l.ServerAddr4[i], bulkPort)
		if err != nil {
			return res, err
		}
		defer sink.Close()
	}

	// The monitor, in the middlebox namespace, on every server-facing
	// interface.
	rec := &recorder{live: cfg.Output}
	monCtx, stopMonitor := context.WithCancel(context.Background())
	defer stopMonitor()
	attached := make(chan struct{})
	monDone := make(chan error, 1)
	progress("starting the monitor in %s on %s (TCP and ICMP, rate limit %v)…", l.Middlebox.Name, strings.Join(l.MiddleboxServerIf, ", "), cfg.Sampling.BPF.RateLimit)
	go func() {
		monDone <- monitor.Run(monCtx, monitor.Options{
			Interfaces:      l.MiddleboxServerIf,
			Netns:           l.Middlebox.Name,
			BPF:             cfg.Sampling.BPF,
			Report:          cfg.Sampling.Report,
			CleanupInterval: time.Second,
			Output:          rec,
			Log:             cfg.Progress,
			OnAttached:      func() { close(attached) },
		})
	}()
	select {
	case <-attached:
	case err := <-monDone:
		if err == nil {
			err = errors.New("monitor ended before attaching")
		}
		return res, fmt.Errorf("monitor: %w", err)
	case <-ctx.Done():
		stopMonitor()
		_ = <-monDone // interrupted: no error to report
		res.Interrupted = true
		return res, nil
	}

	trafficErr := runTraffic(ctx, l, cfg, res, progress)

	// Stop the monitor; it drains the ring buffer before returning.
	stopMonitor()
	monErr := <-monDone
	if ctx.Err() != nil {
		res.Interrupted = true
		trafficErr = nil
	}
	res.summarise(rec.samples())
	if monErr != nil {
		return res, fmt.Errorf("monitor: %w", monErr)
	}
	return res, trafficErr
}

// runTraffic pings every server (IPv4 and IPv6) for the first half of the
// duration, then runs one paced TCP bulk transfer per path for the second.
func runTraffic(ctx context.Context, l *lab.Lab, cfg Config, res *Result, progress func(string, ...any)) error {
	half := cfg.Duration / 2
	count := max(1, int(half/cfg.PingInterval))
	progress("pinging every server from the client (IPv4 and IPv6, %d echoes each, every %v)…", count, cfg.PingInterval)
	type pingRun struct {
		path    int
		dst     netip.Addr
		replies []traffic.PingReply
		err     error
	}
	var runs []*pingRun
	for i := range l.Servers {
		runs = append(runs, &pingRun{path: i, dst: l.ServerAddr4[i]}, &pingRun{path: i, dst: l.ServerAddr6[i]})
	}
	var wg sync.WaitGroup
	for k, r := range runs {
		wg.Go(func() {
			r.replies, r.err = traffic.PingWith(ctx, l.Client, r.dst, traffic.PingOptions{
				Count: count, Interval: cfg.PingInterval, ID: traffic.EchoID + uint16(k),
			})
		})
	}
	wg.Wait()
	var errs []error
	rtts := make([][]time.Duration, len(l.Servers))
	for _, r := range runs {
		p := &res.Paths[r.path]
		if ctx.Err() == nil {
			p.PingSent += count
		} else {
			// Interrupted: how many went out is unknown; count the answered.
			p.PingSent += len(r.replies)
		}
		p.PingReplies += len(r.replies)
		for _, rep := range r.replies {
			rtts[r.path] = append(rtts[r.path], rep.RTT)
		}
		if r.err != nil && ctx.Err() == nil {
			errs = append(errs, r.err)
		}
	}
	for i := range rtts {
		res.Paths[i].PingMedian = stats.Median(rtts[i])
	}
	if err := errors.Join(errs...); err != nil || ctx.Err() != nil {
		return err
	}

	progress("TCP bulk transfer to every server (IPv4, paced at %s, %v)…", lab.FormatRate(cfg.BulkRate), half)
	bulkErrs := make([]error, len(l.Servers))
	for i := range l.Servers {
		wg.Go(func() {
			dst := netip.AddrPortFrom(l.ServerAddr4[i], bulkPort)
			r, err := traffic.BulkStats(ctx, l.Client, dst, half, cfg.BulkRate)
			res.Paths[i].BulkBytes = r.Bytes
			if err != nil && ctx.Err() == nil {
				bulkErrs[i] = err
			}
		})
	}
	wg.Wait()
	return errors.Join(bulkErrs...)
}

// summarise files the monitor's samples under the paths. A sample belongs
// to path i when the packet that completed it came from (for the path's
// own RTT) or went to (client leg) one of server i's addresses.
func (r *Result) summarise(samples []events.RTT) {
	for i := range r.Paths {
		p := &r.Paths[i]
		var icmp, tcp, leg []time.Duration
		for _, s := range samples {
			fromServer := s.Flow.Src.IP == p.Server4 || s.Flow.Src.IP == p.Server6
			toServer := s.Flow.Dst.IP == p.Server4 || s.Flow.Dst.IP == p.Server6
			switch {
			case fromServer && (s.Flow.Proto == events.ProtoICMP || s.Flow.Proto == events.ProtoICMPv6):
				icmp = append(icmp, s.RTT)
			case fromServer && s.Flow.Proto == events.ProtoTCP:
				tcp = append(tcp, s.RTT)
			case toServer && s.Flow.Proto == events.ProtoTCP:
				leg = append(leg, s.RTT)
			}
		}
		p.ICMPMedian, p.ICMPSamples = stats.Median(icmp), len(icmp)
		p.TCPMedian, p.TCPSamples = stats.Median(tcp), len(tcp)
		p.ClientLegMedian, p.ClientLegSamples = stats.Median(leg), len(leg)
	}
}

// WriteSummary prints one line per path: configured RTT, the client's ping
// median, and the monitor's ICMP and TCP medians with sample counts.
func (r *Result) WriteSummary(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSERVER\tMIDDLEBOX IF\tCONFIGURED RTT\tCLIENT PING\tRTTSCOPE ICMP\tRTTSCOPE TCP")
	for _, p := range r.Paths {
		fmt.Fprintf(tw, "%d\t%s, %s\t%s\t%s\t%s (%d/%d)\t%s (%d)\t%s (%d)\n",
			p.Index, p.Server4, p.Server6, p.Interface, fmtMs(p.Configured),
			fmtMs(p.PingMedian), p.PingReplies, p.PingSent,
			fmtMs(p.ICMPMedian), p.ICMPSamples, fmtMs(p.TCPMedian), p.TCPSamples)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "(medians; counts in parentheses. CLIENT PING is the client's own view, which adds the short client-middlebox leg; RTTSCOPE columns are the monitor's samples on the middlebox, completed by each server's echo replies and TCP ACKs)")
	return err
}

func fmtMs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/1e6)
}

// recorder is the monitor's output: it keeps the RTT samples for the
// summary and passes every event on to the live writer.
type recorder struct {
	live format.EventWriter
	mu   sync.Mutex
	rtts []events.RTT
}

func (r *recorder) WriteRTT(e *events.RTT) error {
	r.mu.Lock()
	r.rtts = append(r.rtts, *e)
	r.mu.Unlock()
	if r.live != nil {
		return r.live.WriteRTT(e)
	}
	return nil
}

func (r *recorder) WriteFlow(e *events.FlowEvent) error {
	if r.live != nil {
		return r.live.WriteFlow(e)
	}
	return nil
}

func (r *recorder) WriteStats(s *events.Stats) error {
	if r.live != nil {
		return r.live.WriteStats(s)
	}
	return nil
}

func (r *recorder) Flush() error {
	if r.live != nil {
		return r.live.Flush()
	}
	return nil
}

// Close does not close the live writer: its owner does.
func (r *recorder) Close() error { return r.Flush() }

func (r *recorder) samples() []events.RTT {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rtts)
}
