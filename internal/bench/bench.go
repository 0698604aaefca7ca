// Package bench measures what rttscope's BPF programs cost per packet and
// records it; it asserts nothing. Two phases, each comparing the rttscope
// tc programs with an empty tc program (bpf/empty.c) interleaved inside
// one run:
//
//   - test_run: BPF_PROG_TEST_RUN with a large repeat count on crafted
//     packets (the kernel times the loop: ns per run, no traffic, no
//     bpf_stats), plus data/ACK pairs run once each for the paths that a
//     repeated frame cannot take (storing a timestamp, matching one).
//   - live: a TCP bulk transfer through a namespace lab with the programs
//     attached (TCX egress and ingress) to the middlebox's server-facing
//     interface; with bpf_stats on, ns per packet = delta run_time_ns /
//     delta run_cnt per program, besides packets/s and throughput.
//
// See bench/README.md for how to read the results.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/loader"
)

// Options configure a run.
type Options struct {
	Name string // result file name prefix
	Reps int    // repetitions of every configuration
	// Repeat is the BPF_PROG_TEST_RUN repeat count per measurement.
	Repeat int
	// Pairs is the number of data/ACK pairs per repetition (0 = none).
	Pairs int
	// Warmup and Duration of each live window.
	Warmup, Duration time.Duration
	Path             lab.PathSpec // the lab path of the live phase
	Pacing           uint64       // bulk transfer pacing in bit/s; 0 = as fast as TCP goes
	TestRun, Live    bool         // phases to run
	// Steps runs the steps phase (steps.go): the live traffic with the
	// data path cut after each step, or with CompareBinary, the monitor
	// of that binary against this one's.
	Steps         bool
	CompareBinary string
	// CompareMode is the monitor mode of both builds (ModeSampled when
	// empty; ModePerSample, ModeAggregated).
	CompareMode string
	// LiveUDP replaces the live and steps phases' TCP bulk transfer with
	// the load phase's small-datagram UDP flood (UDPPayload, UDPPPS,
	// UDPSenders): the worst case per byte.
	LiveUDP bool
	// NoLiveBaseline skips the live windows without any program.
	NoLiveBaseline bool

	// Load phase: LoadFlows concurrent TCP flows per
	// scenario, plus a small-datagram UDP flood when LoadUDP, each with
	// no monitor and the monitor's three modes, LoadReps times.
	Load                     bool
	LoadReps                 int
	LoadWarmup, LoadDuration time.Duration
	// LoadSettle is how long each scenario's traffic runs before its
	// first window (new connections leave slow start and settle).
	LoadSettle    time.Duration
	LoadFlows     []int
	LoadUDP       bool
	LoadPath      lab.PathSpec
	LoadWriteSize int    // bytes per TCP write
	LoadTCPRate   uint64 // aggregate TCP rate in bytes/s; 0 = as fast as TCP goes
	UDPPayload    int    // UDP payload bytes
	UDPPPS        uint64 // UDP datagrams/s; 0 = as fast as the senders go
	UDPSenders    int
	UDPIPv6       bool // the UDP flood over IPv6 (payload <= 1452)
	// MonitorBinary is the rttscope binary run as `rttscope monitor`
	// (default: this executable).
	MonitorBinary string

	// Events phase: user-space RTT event consumption (Reps repetitions).
	Events         bool
	EventsBurst    int           // records per burst
	EventsDuration time.Duration // concurrent producer/consumer window
	// Progress receives one line per step (nil: discarded).
	Progress io.Writer

	// loadBins are the TCP sink and flows programs of the load phase,
	// built by Run.
	loadBins loadPrograms
}

// DefaultOptions finish in about a minute and a half on a 2-vCPU machine.
// The bulk transfer is paced below what the lab's user-space delay line
// forwards without loss, so every configuration sees the same packet rate.
func DefaultOptions() Options {
	return Options{
		Name:     "rttscope",
		Reps:     5,
		Repeat:   1000000,
		Pairs:    2000,
		Warmup:   time.Second,
		Duration: 3 * time.Second,
		Path:     lab.PathSpec{DelayToServer: time.Millisecond, DelayToClient: time.Millisecond},
		Pacing:   500_000_000,
		TestRun:  true,
		Live:     true,
		Steps:    true,

		Load:          true,
		LoadReps:      3,
		LoadWarmup:    time.Second,
		LoadDuration:  2 * time.Second,
		LoadSettle:    3 * time.Second,
		LoadFlows:     []int{1, 100, 1000, 10000},
		LoadUDP:       true,
		LoadWriteSize: 1448,
		UDPPayload:    64,
		UDPSenders:    1,

		Events:         true,
		EventsBurst:    1_000_000,
		EventsDuration: 2 * time.Second,
	}
}

func (o *Options) validate() error {
	switch {
	case o.Reps < 1:
		return fmt.Errorf("reps must be >= 1, got %d", o.Reps)
	case o.Repeat < 1 || o.Repeat > 100_000_000:
		return fmt.Errorf("repeat must be between 1 and 1e8, got %d", o.Repeat)
	case o.Pairs < 0:
		return fmt.Errorf("pairs must be >= 0, got %d", o.Pairs)
	case (o.Live || o.Steps) && o.Duration < 100*time.Millisecond:
		return fmt.Errorf("duration must be >= 100ms, got %v", o.Duration)
	case (o.Live || o.Steps) && o.Warmup < 0:
		return fmt.Errorf("warm-up must be >= 0, got %v", o.Warmup)
	case o.Load && (o.LoadReps < 1 || o.LoadDuration < 100*time.Millisecond || o.LoadWarmup < 0):
		return fmt.Errorf("load: reps must be >= 1, duration >= 100ms, warm-up >= 0")
	case o.Load && len(o.LoadFlows) == 0 && !o.LoadUDP:
		return errors.New("load: no scenario (no flow count and no UDP)")
	case o.Load && (o.LoadWriteSize < 1 || o.UDPPayload < 1 || o.UDPPayload > MaxUDPPayload(o.UDPIPv6) || o.UDPSenders < 1):
		return fmt.Errorf("load: write size, UDP payload (<= %d) and UDP senders must be >= 1", MaxUDPPayload(o.UDPIPv6))
	case o.Events && (o.EventsBurst < 1000 || o.EventsBurst > 8_000_000 || o.EventsDuration < 100*time.Millisecond):
		return errors.New("events: burst must be between 1000 and 8e6, duration >= 100ms")
	case o.CompareMode != "" && o.CompareMode != ModeSampled && o.CompareMode != ModePerSample && o.CompareMode != ModeAggregated:
		return fmt.Errorf("compare mode must be %s, %s or %s, got %q", ModeSampled, ModePerSample, ModeAggregated, o.CompareMode)
	case !o.TestRun && !o.Live && !o.Steps && !o.Load && !o.Events:
		return errors.New("nothing to run: enable at least one phase (test_run, live, steps, load, events)")
	}
	for _, n := range o.LoadFlows {
		if o.Load && (n < 1 || n > 60000) {
			return fmt.Errorf("load: flow counts must be between 1 and 60000, got %d", n)
		}
	}
	return nil
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "bench: "+format+"\n", args...)
	}
}

// Run measures and returns the result; it writes no files (see
// WriteFiles). It needs root. Everything it creates (lab namespaces, BPF
// programs and links, the bpf_stats switch) is removed or restored before
// it returns, also when ctx is cancelled.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("bench needs root (BPF programs, BPF_PROG_TEST_RUN, network namespaces): run with sudo")
	}
	if err := kernel.CheckRequired(); err != nil {
		return nil, err
	}
	if o.Load && len(o.LoadFlows) > 0 {
		// Before any phase: without go and the source tree, fail now.
		o.progress("load: building the TCP sink and flows (%s, %s)", sinkCmd, flowsCmd)
		bins, cleanup, err := buildLoadPrograms()
		if err != nil {
			return nil, err
		}
		defer cleanup()
		o.loadBins = bins
	}
	start := time.Now()
	res := &Result{
		Schema:  SchemaVersion,
		Name:    o.Name,
		Started: start.UTC(),
		Machine: CollectMachine(start),
		Settings: Settings{
			Reps:          o.Reps,
			Repeat:        o.Repeat,
			Pairs:         o.Pairs,
			Warmup:        o.Warmup.String(),
			Duration:      o.Duration.String(),
			Path:          o.Path.String(),
			Pacing:        lab.FormatRate(o.Pacing),
			Attach:        "TCX egress + TCX ingress",
			BPFConfig:     bpfConfigText(),
			TestRunPhase:  o.TestRun,
			LivePhase:     o.Live,
			LoadPhase:     o.Load,
			StepsPhase:    o.Steps,
			CompareBinary: o.CompareBinary,
			CompareMode:   o.CompareMode,
			EventsPhase:   o.Events,
			Order: "test_run: per rep and packet, the programs in rotated order (empty, egress, ingress; then egress, ingress, empty; ...); " +
				"live and steps: the configurations once per rep, rotated by one every two reps and reversed on every other rep",
		},
		Checks: map[string]uint64{},
	}
	if res.Machine.BPFStatsEnabled == "1" {
		res.Notes = append(res.Notes, "kernel.bpf_stats_enabled was already 1 at the start: the test_run figures include the stats overhead")
	}
	if o.TestRun {
		if err := runTestRun(ctx, &o, res); err != nil {
			return nil, fmt.Errorf("test_run: %w", err)
		}
	}
	if o.Live {
		if err := runLive(ctx, &o, res); err != nil {
			return nil, fmt.Errorf("live: %w", err)
		}
		liveChecks(res)
	}
	if o.Steps {
		if err := runSteps(ctx, &o, res); err != nil {
			return nil, fmt.Errorf("steps: %w", err)
		}
	}
	if o.Events {
		if err := runEvents(ctx, &o, res); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
	}
	if o.Load {
		if err := runLoad(ctx, &o, res); err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		loadChecks(res)
	}
	res.Finished = time.Now().UTC()
	res.Machine.LoadAvgEnd = readTrim("/proc/loadavg")
	res.Finalize()
	res.Targets = evaluateTargets(res)
	if s := res.Lookup(seriesID(GroupTestRun, CaseStatsOn, ProgEmpty, "", MetricNsPerRun)); s != nil && s.Compare != nil && s.Compare.Delta < 5 {
		res.Notes = append(res.Notes, fmt.Sprintf("test_run: switching bpf_stats on added only %.1f ns per run: they were probably on all along (another process), so every test_run figure includes the accounting", s.Compare.Delta))
	}
	return res, nil
}

func bpfConfigText() string {
	t, l := TestRunConfig(), loader.DefaultConfig()
	return fmt.Sprintf("test_run: monitor defaults with ICMP on and rate limit %v (track TCP %v, ICMP %v); "+
		"live: monitor defaults (rate limit %v, track TCP %v, ICMP %v, flow map %d, timestamp map %d, ring buffer %d B)",
		t.RateLimit, t.TrackTCP, t.TrackICMP, l.RateLimit, l.TrackTCP, l.TrackICMP, l.FlowMapSize, l.TimestampMapSize, l.RingbufSize)
}

// liveChecks sums the sanity counters of the live windows and notes what
// looks wrong.
func liveChecks(res *Result) {
	var rtts, misses, drops, retrans uint64
	noTS := 0
	for _, w := range res.Windows {
		rtts += w.RTTEvents
		for _, h := range []*HookCounters{w.Egress, w.Ingress} {
			if h != nil {
				misses += h.Misses
			}
		}
		drops += w.DelayDrops + w.IfDrops
		retrans += uint64(w.BulkRetransmits)
		if !w.BulkTimestamps {
			noTS++
		}
	}
	res.Checks["live_rtt_events"] = rtts
	res.Checks["live_recursion_misses"] = misses
	res.Checks["live_drops"] = drops
	res.Checks["live_retransmits"] = retrans
	if noTS > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("live: %d transfers without TCP timestamps: rttscope had nothing to match", noTS))
	}
	if rtts == 0 {
		res.Notes = append(res.Notes, "live: the monitor reported no RTT sample: the rttscope windows did not exercise the matching path")
	}
}
