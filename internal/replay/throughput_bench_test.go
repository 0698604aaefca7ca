package replay

// BenchmarkReplayThroughput measures how many captured packets per second
// `rttscope replay` gets through, and where the time goes:
//
//	read            capture.Reader alone (pcap from the page cache)
//	testrun-empty   one BPF_PROG_TEST_RUN per packet of a tc program that
//	                returns at once: the kernel's floor for any replay
//	                that runs packets one by one
//	feed-progrun    Engine.Feed's work through cilium/ebpf's Program.Run
//	                (the baseline the allocation-free runner replaced)
//	feed            Engine.Feed on frames already in memory
//	replay-*        Open + Run end to end, jsonl output discarded, with one
//	                worker (sequential) and with DefaultWorkers
//
// each on full MTU-sized frames and on frames cut to 128 bytes (tcpdump -s
// 128), interleaved. It records numbers, it asserts nothing: every run
// appends one JSON line per configuration (with machine, kernel and commit)
// to the file named by $RTTSCOPE_BENCH_OUT, default
// $TMPDIR/rttscope-replay-throughput.jsonl.
//
//	sudo go test ./internal/replay/ -run '^$' -bench ReplayThroughput -benchtime 5x

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
)

// tpPackets is the number of packets in each benchmark capture.
const tpPackets = 200_000

// tpFlows TCP flows send data one way (MTU frames, a new TSval every
// millisecond) and are ACKed every second segment; one packet per µs.
const tpFlows = 64

// tpCaptures writes the two benchmark captures into a temporary directory
// that is removed when the benchmark ends.
func tpCaptures(b *testing.B) (full, snap string) {
	b.Helper()
	dir := b.TempDir()
	frames := tpFrames()
	full = filepath.Join(dir, "full.pcap")
	if err := capture.WritePcap(full, capture.LinkTypeEthernet, true, frames); err != nil {
		b.Fatal(err)
	}
	for i := range frames {
		if len(frames[i].Data) > 128 {
			frames[i].WireLen = len(frames[i].Data)
			frames[i].Data = frames[i].Data[:128]
		}
	}
	snap = filepath.Join(dir, "snap128.pcap")
	if err := capture.WritePcap(snap, capture.LinkTypeEthernet, true, frames); err != nil {
		b.Fatal(err)
	}
	return full, snap
}

func tpFrames() []capture.TimedFrame {
	const start = int64(1_700_000_000_000_000_000)
	client := netip.MustParseAddr("10.1.0.1")
	server := netip.MustParseAddr("10.2.0.1")
	pl := make([]byte, 1448)
	out := make([]capture.TimedFrame, 0, tpPackets)
	seq := make([]uint32, tpFlows)
	for i := 0; len(out) < tpPackets; i++ {
		f := i % tpFlows
		round := i / tpFlows
		t := start + int64(len(out))*1000
		tsval := uint32(t / 1e6)
		sport := uint16(20000 + f)
		data := pktcraft.Packet{Src: client, Dst: server, TCP: &pktcraft.TCP{
			SrcPort: sport, DstPort: 5201, ACK: true, Seq: seq[f], Ack: 1,
			TSval: tsval, TSecr: tsval - 20, Window: 65000, Payload: pl,
		}}.MustBytes()
		seq[f] += uint32(len(pl))
		out = append(out, capture.TimedFrame{Timestamp: t, Data: data, Direction: capture.DirOutbound})
		if round%2 == 1 && len(out) < tpPackets {
			ack := pktcraft.Packet{Src: server, Dst: client, TCP: &pktcraft.TCP{
				SrcPort: 5201, DstPort: sport, ACK: true, Seq: 1, Ack: seq[f],
				TSval: tsval - 10, TSecr: tsval - 20, Window: 65000,
			}}.MustBytes()
			out = append(out, capture.TimedFrame{Timestamp: t + 500, Data: ack})
		}
	}
	return out
}

// tpConfig is one configuration the benchmark measures: run replays the
// capture at path once and returns the packets handled and the time taken.
type tpConfig struct {
	name string
	run  func(b *testing.B, path string) (int, time.Duration)
}

func tpConfigs() []tpConfig {
	w := DefaultWorkers()
	return []tpConfig{
		{"read", tpRead},
		{"testrun-empty", tpEmpty},
		{"feed-progrun", func(b *testing.B, p string) (int, time.Duration) { return tpFeed(b, p, "progrun") }},
		{"feed-tc", func(b *testing.B, p string) (int, time.Duration) { return tpFeed(b, p, "tc") }},
		{"feed", func(b *testing.B, p string) (int, time.Duration) { return tpFeed(b, p, "") }},
		{"replay-1worker", func(b *testing.B, p string) (int, time.Duration) { return tpReplay(b, p, 1) }},
		{fmt.Sprintf("replay-%dworkers", w), func(b *testing.B, p string) (int, time.Duration) { return tpReplay(b, p, w) }},
	}
}

// BenchmarkReplayThroughput runs every configuration once per iteration,
// interleaved (A B C ... A B C ...), on both captures, and reports the
// median packets per second of each over the iterations, with the spread
// (min-max) and the ratio to replay-1worker. Use -benchtime 5x or more.
func BenchmarkReplayThroughput(b *testing.B) {
	testutil.RequireRoot(b)
	full, snap := tpCaptures(b)
	files := []struct{ name, path string }{{"full", full}, {"snap128", snap}}
	cfgs := tpConfigs()
	pps := map[string][]float64{}
	var order []string
	warm := false
	for b.Loop() {
		if !warm { // one untimed round: page cache, BTF, first loads
			for _, f := range files {
				for _, c := range cfgs {
					c.run(b, f.path)
				}
			}
			warm = true
		}
		for _, f := range files {
			for _, c := range cfgs {
				key := c.name + "/" + f.name
				if _, ok := pps[key]; !ok {
					order = append(order, key)
				}
				n, el := c.run(b, f.path)
				pps[key] = append(pps[key], float64(n)/el.Seconds())
			}
		}
	}
	for _, key := range order {
		v := slices.Clone(pps[key])
		slices.Sort(v)
		med := v[len(v)/2]
		if len(v)%2 == 0 {
			med = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		base := pps["replay-1worker/"+key[strings.Index(key, "/")+1:]]
		var ratio float64
		if len(base) > 0 {
			bs := slices.Clone(base)
			slices.Sort(bs)
			ratio = med / bs[len(bs)/2]
		}
		b.ReportMetric(med, "pkts/s:"+key)
		tpRecord(b, map[string]any{
			"config": key, "reps": len(v), "pps_median": med, "pps_min": v[0], "pps_max": v[len(v)-1],
			"ns_per_pkt_median": 1e9 / med, "ratio_to_replay_1worker": ratio, "packets_per_rep": tpPackets,
		})
		b.Logf("%-26s median %8.0f pkts/s (%6.0f ns/pkt), min %8.0f, max %8.0f, x%.2f of replay-1worker, %d reps",
			key, med, 1e9/med, v[0], v[len(v)-1], ratio, len(v))
	}
}

func tpRead(b *testing.B, path string) (int, time.Duration) {
	var n int
	start := time.Now()
	rd, err := capture.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	for {
		_, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	return n, time.Since(start)
}

// tpNullSink counts events.
type tpNullSink struct{ n int }

func (s *tpNullSink) RTT(*events.RTT) error        { s.n++; return nil }
func (s *tpNullSink) Flow(*events.FlowEvent) error { s.n++; return nil }

// tpEmpty runs every packet through a tc program that returns at once
// (bpf/empty.c) with the runner Feed uses: the floor of one
// BPF_PROG_TEST_RUN per packet on this machine.
func tpEmpty(b *testing.B, path string) (int, time.Duration) {
	pkts, err := capture.ReadAll(path)
	if err != nil {
		b.Fatal(err)
	}
	var objs probe.EmptyObjects
	if err := probe.LoadEmptyObjects(&objs, nil); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	r := newTestRunner(objs.EmptyTc, make([]byte, 192))
	start := time.Now()
	for i := range pkts {
		if err := r.run(pkts[i].Data); err != nil {
			b.Fatal(err)
		}
	}
	return len(pkts), time.Since(start)
}

// tpFeed feeds every packet through the engine: with the default runner
// (XDP replay program where the kernel supports it), with the tc runner
// ("tc"), or with cilium/ebpf's Program.Run on the tc programs ("progrun").
func tpFeed(b *testing.B, path string, mode string) (int, time.Duration) {
	pkts, err := capture.ReadAll(path)
	if err != nil {
		b.Fatal(err)
	}
	var sink tpNullSink
	e, err := NewEngine(loader.DefaultConfig(), &sink)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := make([]byte, e.skbSize)
	tc := &tcRunner{ctx: ctx, tsOff: e.tsOff,
		egress: newTestRunner(e.objs.RttscopeTcEgress, ctx), ingress: newTestRunner(e.objs.RttscopeTcIngress, ctx)}
	start := time.Now()
	for i := range pkts {
		p := &pkts[i]
		eg := p.Direction == capture.DirOutbound
		switch mode {
		case "progrun":
			prog := e.objs.RttscopeTcIngress
			if eg {
				prog = e.objs.RttscopeTcEgress
			}
			binary.LittleEndian.PutUint64(ctx[e.tsOff:], uint64(p.Timestamp))
			if _, err := prog.Run(&ebpf.RunOptions{Data: p.Data, Context: ctx}); err != nil {
				b.Fatal(err)
			}
		case "tc":
			if err := tc.feed(p.Data, p.Timestamp, eg); err != nil {
				b.Fatal(err)
			}
		default:
			if err := e.run.feed(p.Data, p.Timestamp, eg); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.Drain(); err != nil {
			b.Fatal(err)
		}
	}
	return len(pkts), time.Since(start)
}

func tpReplay(b *testing.B, path string, workers int) (int, time.Duration) {
	r, err := Open(Options{Path: path, BPF: loader.DefaultConfig(), Workers: workers})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	out, err := format.New("jsonl", io.Discard, format.Options{})
	if err != nil {
		b.Fatal(err)
	}
	sum, err := r.Run(context.Background(), out)
	if err != nil {
		b.Fatal(err)
	}
	return int(sum.Packets), sum.Elapsed
}

// tpRecord appends one result line, with the machine, to the results file.
func tpRecord(b *testing.B, rec map[string]any) {
	rec["benchmark"] = b.Name()
	rec["time"] = time.Now().UTC().Format(time.RFC3339)
	for k, v := range tpMachine() {
		rec[k] = v
	}
	path := os.Getenv("RTTSCOPE_BENCH_OUT")
	if path == "" {
		path = filepath.Join(os.TempDir(), "rttscope-replay-throughput.jsonl")
	}
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Logf("cannot record result: %v", err)
		return
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		b.Logf("cannot record result: %v", err)
	}
	if err := f.Close(); err != nil {
		b.Logf("cannot record result: %v", err)
	}
}

var tpMachineInfo struct {
	once sync.Once
	m    map[string]any
}

func tpMachine() map[string]any {
	tpMachineInfo.once.Do(func() {
		m := map[string]any{"go": runtime.Version(), "cpus": runtime.NumCPU(), "gomaxprocs": runtime.GOMAXPROCS(0)}
		if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
			m["kernel"] = strings.TrimSpace(string(b))
		}
		if h, err := os.Hostname(); err == nil {
			m["host"] = h
		}
		if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "model name") {
					m["cpu"] = strings.TrimSpace(l[strings.Index(l, ":")+1:])
					break
				}
			}
		}
		if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
			m["commit"] = strings.TrimSpace(string(out))
		}
		if out, err := exec.Command("git", "status", "--porcelain", "--", ".").Output(); err == nil {
			m["dirty"] = len(out) > 0
		}
		tpMachineInfo.m = m
	})
	return tpMachineInfo.m
}
