package pdm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/bench"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/probe"
)

// BenchResult is what `rttscope pdm bench` records: per case the kernel's
// run time of one program run (BPF_PROG_TEST_RUN, repeat 1: each run gets
// a fresh copy of the packet, which egress insertion needs), the median of
// each round's mean, rounds interleaved with an empty program as the
// baseline. The figures include the test-run clock reads that the empty
// program's figure shows; the /bpf_stats figures are the kernel's own run
// time accounting of the same runs, the /repeat ones runs of one packet
// repeated inside the kernel (cases that leave the packet unchanged).
type BenchResult struct {
	Schema  string                   `json:"schema"`
	Machine bench.Machine            `json:"machine"`
	Rounds  int                      `json:"rounds"`
	Runs    int                      `json:"runs_per_round"`
	Cases   map[string]bench.Summary `json:"ns_per_run"`
	// OverEmpty is each case's median minus the empty program's.
	OverEmpty map[string]float64 `json:"ns_over_empty"`
	Targets   map[string]string  `json:"targets"`
	// Reader: the user-space cost per record, the baseline, packet and
	// interval mode alternating, three rounds each.
	Reader []ReaderResult `json:"reader"`
	// Throughput: TCP bulk transfers with PDM off and on (when asked for).
	Throughput *ThroughputResult `json:"throughput,omitempty"`
}

// BenchOptions say what `rttscope pdm bench` runs.
type BenchOptions struct {
	Dir    string // directory of the JSON result ("" = none)
	Rounds int    // interleaved rounds of every per-packet case
	Runs   int    // program runs per case and round
	// ThroughputRounds of PDM off and on bulk transfers of
	// ThroughputDuration each (0 = no throughput part).
	ThroughputRounds   int
	ThroughputDuration time.Duration
}

type benchCase struct {
	name string
	prog *ebpf.Program
	pkt  []byte
	// repeatable: the program leaves the packet as it was, so a run with
	// repeat > 1 measures the same work every time (not egress insertion:
	// the second run would see the inserted header and skip).
	repeatable bool
}

// Bench measures the per-packet cost of the PDM programs, then (when
// asked for) the throughput with PDM off and on, and writes the result as
// JSON under o.Dir (when not empty) and a summary to log.
func Bench(ctx context.Context, o BenchOptions, log io.Writer) (*BenchResult, error) {
	dir, rounds, runs := o.Dir, o.Rounds, o.Runs
	start := time.Now()
	objs, err := Load(Config{MapSize: DefaultMapSize, Lifetime: DefaultLifetime})
	if err != nil {
		return nil, err
	}
	defer func() { _ = objs.Close() }()
	var empty probe.EmptyObjects
	if err := probe.LoadEmptyObjects(&empty, nil); err != nil {
		return nil, fmt.Errorf("load empty program: %w", err)
	}
	defer empty.Close()
	rb, err := ringbuf.NewReader(objs.PdmEvents)
	if err != nil {
		return nil, err
	}
	defer rb.Close()
	// drain empties the ring buffer, so that the ingress case measures
	// events sent, not a full buffer refusing them.
	var rec ringbuf.Record
	drain := func() { _ = drainRing(rb, &rec, func([]byte) error { return nil }) }

	a := netip.MustParseAddr("2001:db8::a")
	b := netip.MustParseAddr("2001:db8::b")
	req := pktcraft.Packet{Src: a, Dst: b, UDP: &pktcraft.UDP{SrcPort: 5353, DstPort: 53, Payload: make([]byte, 64)}}
	rep := pktcraft.Packet{Src: b, Dst: a, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353, Payload: make([]byte, 64)}}
	withOpt := rep
	withOpt.IPv6ExtHeaders = []pktcraft.ExtHeader{pktcraft.DestOpts(pktcraft.PDMOption(20, 30, 1, 2, 0x8000, 0x9000)...)}
	big := pktcraft.Packet{Src: a, Dst: b, UDP: &pktcraft.UDP{SrcPort: 5354, DstPort: 53, Payload: make([]byte, 1400-48)}}
	tcp := pktcraft.Packet{Src: a, Dst: b, TCP: &pktcraft.TCP{SrcPort: 40000, DstPort: 443, ACK: true, Payload: make([]byte, 64)}}
	v4 := pktcraft.Packet{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"), UDP: &pktcraft.UDP{SrcPort: 1, DstPort: 2}}
	cases := []benchCase{
		{"empty", empty.EmptyTc, req.MustBytes(), true},
		{"egress_insert_udp", objs.PdmTcEgress, req.MustBytes(), false},
		{"egress_insert_tcp", objs.PdmTcEgress, tcp.MustBytes(), false},
		{"egress_insert_udp_1400", objs.PdmTcEgress, big.MustBytes(), false},
		{"egress_skip_ipv4", objs.PdmTcEgress, v4.MustBytes(), true},
		{"ingress_pdm_udp", objs.PdmTcIngress, withOpt.MustBytes(), true},
		{"ingress_no_pdm_udp", objs.PdmTcIngress, rep.MustBytes(), true},
	}
	// Warm-up: state exists, caches are hot.
	for _, c := range cases {
		for range 100 {
			if _, _, err := c.prog.Benchmark(c.pkt, 1, nil); err != nil {
				return nil, fmt.Errorf("BPF_PROG_TEST_RUN %s: %w", c.name, err)
			}
		}
		drain()
	}
	// kernel.bpf_stats_enabled for the run: the kernel's own run time
	// per program, without the test-run timer (but with the ~20 ns the
	// accounting adds).
	var stats io.Closer
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		stats = st
		defer func() { _ = st.Close() }()
	} else {
		fmt.Fprintln(log, "bpf_stats unavailable:", err)
	}
	perRound := map[string][]float64{}
	for range rounds {
		for _, c := range cases { // interleaved: A B C ... A B C ...
			var sum time.Duration
			before, statsOK := progStats(c.prog, stats)
			for range runs {
				_, d, err := c.prog.Benchmark(c.pkt, 1, nil)
				if err != nil {
					return nil, fmt.Errorf("BPF_PROG_TEST_RUN %s: %w", c.name, err)
				}
				sum += d
			}
			perRound[c.name] = append(perRound[c.name], float64(sum)/float64(runs))
			if after, ok := progStats(c.prog, stats); ok && statsOK && after.RunCount > before.RunCount {
				perRound[c.name+"/bpf_stats"] = append(perRound[c.name+"/bpf_stats"],
					float64(after.Runtime-before.Runtime)/float64(after.RunCount-before.RunCount))
			}
			drain()
			if !c.repeatable {
				continue
			}
			// The same packet run again and again inside the kernel:
			// no per-run set-up in the figure.
			_, d, err := c.prog.Benchmark(c.pkt, runs, nil)
			if err != nil {
				return nil, fmt.Errorf("BPF_PROG_TEST_RUN %s: %w", c.name, err)
			}
			perRound[c.name+"/repeat"] = append(perRound[c.name+"/repeat"], float64(d))
			drain()
		}
	}
	r := &BenchResult{
		Schema: "rttscope-pdm-bench/1", Machine: bench.CollectMachine(start), Rounds: rounds, Runs: runs,
		Cases: map[string]bench.Summary{}, OverEmpty: map[string]float64{},
		Targets: map[string]string{"egress": "<= 300 ns per packet", "ingress": "<= 200 ns per packet"},
	}
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
		if len(perRound[c.name+"/bpf_stats"]) > 0 {
			names = append(names, c.name+"/bpf_stats")
		}
		if c.repeatable {
			names = append(names, c.name+"/repeat")
		}
	}
	for _, n := range names {
		r.Cases[n] = bench.Summarize(perRound[n])
	}
	for _, n := range names {
		base := "empty"
		if i := strings.IndexByte(n, '/'); i >= 0 {
			base += n[i:]
		}
		r.OverEmpty[n] = r.Cases[n].Median - r.Cases[base].Median
	}
	for _, n := range names {
		s := r.Cases[n]
		fmt.Fprintf(log, "%-34s median %6.1f ns/run (IQR %5.1f, min %6.1f, max %6.1f), %+6.1f ns over empty\n",
			n, s.Median, s.IQR, s.Min, s.Max, r.OverEmpty[n])
	}
	for range 3 {
		for i, every := range []time.Duration{0, 0, 100 * time.Millisecond} {
			var base *ebpf.Program
			if i == 0 {
				base = empty.EmptyTc
			}
			rr, err := benchReader(objs, every, time.Second, base)
			if err != nil {
				return r, err
			}
			r.Reader = append(r.Reader, rr)
			fmt.Fprintf(log, "reader, %-8s %6d records: %5.2f µs of CPU and %.3f context switches per record\n",
				rr.Mode, rr.Records, rr.CPUMicrosPerRecord, rr.CtxSwitchesPerRecord)
		}
	}
	if o.ThroughputRounds > 0 {
		if r.Throughput, err = BenchThroughput(ctx, o.ThroughputRounds, o.ThroughputDuration, log); err != nil {
			return r, err
		}
	}
	if dir != "" {
		path := filepath.Join(dir, bench.FileBase("pdm", start)+".json")
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return r, err
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			return r, fmt.Errorf("write bench result: %w", err)
		}
		fmt.Fprintln(log, "wrote", path)
	}
	return r, nil
}

// progStats reads a program's run time statistics while they are enabled.
func progStats(p *ebpf.Program, enabled io.Closer) (*ebpf.ProgramStats, bool) {
	if enabled == nil {
		return nil, false
	}
	st, err := p.Stats()
	return st, err == nil
}
