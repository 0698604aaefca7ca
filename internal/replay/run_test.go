package replay_test

// Tests of replay.Open/Run: the loop around the engine (cleanup by capture
// time, parallel workers, filters, errors, summary), on generated captures.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/replay"
	"github.com/rttscope/rttscope/internal/replay/replaytest"
	"github.com/rttscope/rttscope/internal/testutil"
)

// runConfig is the configuration of replaytest.Args.
func runConfig() loader.Config {
	c := loader.DefaultConfig()
	c.TrackICMP = true
	c.RateLimit = 0
	c.IncludeSYN = true
	c.TCPFlowTimeout = 20 * time.Second
	c.FlowMapSize = 4096
	c.TimestampMapSize = 8192
	c.RingbufSize = 1 << 20
	return c
}

// replayFile replays path with opts (Path set here) into the named format.
func replayFile(t *testing.T, path, fmtName string, opts replay.Options) ([]byte, replay.Summary, error) {
	t.Helper()
	opts.Path = path
	r, err := replay.Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	var buf bytes.Buffer
	w, err := format.New(fmtName, &buf, format.Options{Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Run(context.Background(), w)
	if cerr := w.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	return buf.Bytes(), sum, err
}

func writeScenario(t *testing.T, lt uint16, withDirection bool) string {
	t.Helper()
	fr, err := replaytest.Frames(replaytest.Steps(), lt, withDirection)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.pcapng")
	if err := capture.WritePcapng(path, []uint16{lt}, fr); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunSummary: the scenario's packets are all read and fed, their
// directions come from the rule expected, and the cleanup ran at every
// whole second up to the last packet while something could still expire.
func TestRunSummary(t *testing.T) {
	testutil.RequireRoot(t)
	steps := replaytest.Steps()
	for _, c := range []struct {
		name string
		dir  bool
		opts replay.Options
		by   replay.DirectionSource
	}{
		{"capture", true, replay.Options{}, replay.DirFromCapture},
		{"local", false, replay.Options{Direction: replay.DirectionRules{LocalNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}, replay.DirFromLocal},
		{"flow", false, replay.Options{}, replay.DirFromFlow},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeScenario(t, capture.LinkTypeEthernet, c.dir)
			c.opts.BPF = runConfig()
			_, sum, err := replayFile(t, path, "json", c.opts)
			if err != nil {
				t.Fatal(err)
			}
			n := uint64(len(steps))
			if sum.Packets != n || sum.Fed != n || sum.Short != 0 || sum.Filtered != 0 || sum.DecidedBy[c.by] != n {
				t.Errorf("summary %+v: want %d packets read and fed, all decided by %v", sum, n, c.by)
			}
			if sum.First != replaytest.T0 || sum.Last != replaytest.T0+steps[len(steps)-1].At {
				t.Errorf("first/last %d/%d", sum.First, sum.Last)
			}
			// Whole seconds T0+1 .. T0+31: after 30 s (the longest
			// timeout) + 1 s of silence after the packet at T0+0.8 s,
			// nothing is left to expire until the packet at T0+45 s.
			if sum.Expiries != 31 {
				t.Errorf("%d cleanups, want 31", sum.Expiries)
			}
			var rtts, flows uint64
			for _, e := range replaytest.Expected() {
				if e.FlowEvent == "" {
					rtts++
				} else {
					flows++
				}
			}
			if sum.RTTs != rtts || sum.Flows != flows {
				t.Errorf("%d RTT and %d flow events, want %d and %d", sum.RTTs, sum.Flows, rtts, flows)
			}
		})
	}
}

// TestRunCleanupInterval: flows time out at the first multiple of the
// cleanup interval (capture time, since the epoch) after their timeout.
func TestRunCleanupInterval(t *testing.T) {
	testutil.RequireRoot(t)
	path := writeScenario(t, capture.LinkTypeEthernet, true)
	out, sum, err := replayFile(t, path, "json", replay.Options{BPF: runConfig(), CleanupInterval: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := replaytest.ParseJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	const epochMultiple = 7 * int64(time.Second)
	var closings []int64
	for _, e := range got {
		if e.Reason == "flow timeout" {
			closings = append(closings, e.Time)
		}
	}
	// TCP idle since T0+0.37/0.71 s + 20 s -> first multiple of 7 s after
	// T0+20.71 s (flow E: both directions); ICMP since T0+0.43/0.57 s +
	// 30 s -> after T0+30.57 s (flow F never opened: no event).
	first := func(after int64) int64 { return after - after%epochMultiple + epochMultiple }
	tcpAt := first(replaytest.T0 + 20710300000)
	icmpAt := first(replaytest.T0 + 30565432000)
	want := []int64{tcpAt, tcpAt, tcpAt, icmpAt, icmpAt}
	if fmt.Sprint(closings) != fmt.Sprint(want) {
		t.Errorf("timeouts at %v, want %v", closings, want)
	}
	// Multiples of 7 s at T0+0.88, 7.88, ... 35.88 s; the one at 42.88 s
	// is skipped: 30 s + 7 s after the last packet before the silence
	// (T0+0.8 s) nothing can expire any more.
	if sum.Expiries != 6 {
		t.Errorf("%d cleanups, want 6", sum.Expiries)
	}
}

// multiFlow is a capture of many interleaved flows with distinct,
// increasing timestamps: TCP (IPv4 and IPv6) and ICMP, some of which stop
// early and time out in the middle of the capture.
func multiFlow(t testing.TB) []capture.TimedFrame {
	const start = int64(1_750_000_000_000_000_000)
	var evs []timedPacket
	for f := range 40 {
		rtt := int64(3+f) * int64(time.Millisecond)
		period := int64(5+f%7) * int64(time.Millisecond)
		n := 300
		if f%5 == 0 {
			n = 40 // stops after ~0.2-0.5 s and times out
		}
		var cli, srv netip.Addr
		if f%3 == 1 {
			cli, srv = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 1, 15: byte(f)}), netip.MustParseAddr("2001:db8:2::1")
		} else {
			cli, srv = netip.AddrFrom4([4]byte{10, 0, 1, byte(f)}), netip.MustParseAddr("192.0.2.1")
		}
		for k := range n {
			at := start + int64(f)*997_000 + int64(k)*period
			if f%4 == 3 {
				req := pktcraft.Packet{Src: cli, Dst: srv, ICMPEcho: &pktcraft.ICMPEcho{ID: uint16(f), Seq: uint16(k)}}
				rep := pktcraft.Packet{Src: srv, Dst: cli, ICMPEcho: &pktcraft.ICMPEcho{Reply: true, ID: uint16(f), Seq: uint16(k)}}
				evs = append(evs, timedPacket{at, req, true}, timedPacket{at + rtt, rep, false})
				continue
			}
			tsv := uint32(at/int64(time.Millisecond)) + uint32(f)*1000
			data := pktcraft.Packet{Src: cli, Dst: srv, TCP: &pktcraft.TCP{SrcPort: uint16(30000 + f), DstPort: 443, ACK: true, PSH: true, Seq: uint32(k * 100), TSval: tsv, TSecr: tsv - 7, Payload: make([]byte, 100)}}
			ack := pktcraft.Packet{Src: srv, Dst: cli, TCP: &pktcraft.TCP{SrcPort: 443, DstPort: uint16(30000 + f), ACK: true, Ack: uint32(k*100 + 100), TSval: tsv - 7 + uint32(k), TSecr: tsv}}
			evs = append(evs, timedPacket{at, data, true}, timedPacket{at + rtt, ack, false})
		}
	}
	return timedFrames(evs)
}

// timedPacket is a packet of a test capture at its time, out for egress.
type timedPacket struct {
	at  int64
	pkt pktcraft.Packet
	out bool
}

// timedFrames orders packets by time and gives equal times distinct ones
// (one order of the records), with their directions.
func timedFrames(evs []timedPacket) []capture.TimedFrame {
	slices.SortStableFunc(evs, func(a, b timedPacket) int { return cmp.Compare(a.at, b.at) })
	out := make([]capture.TimedFrame, len(evs))
	last := int64(0)
	for i, e := range evs {
		at := max(e.at, last+1)
		last = at
		dir := capture.DirInbound
		if e.out {
			dir = capture.DirOutbound
		}
		out[i] = capture.TimedFrame{Timestamp: at, Data: e.pkt.MustBytes(), Direction: dir}
	}
	return out
}

// TestRunParallelMatchesSequential: with distinct timestamps, parallel
// replays give byte for byte the output of the sequential one, whatever
// the number of workers and the batch size (a 4 KiB ring buffer forces
// batches of 16 packets).
func TestRunParallelMatchesSequential(t *testing.T) {
	testutil.RequireRoot(t)
	fr := multiFlow(t)
	path := filepath.Join(t.TempDir(), "multi.pcapng")
	if err := capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet}, fr); err != nil {
		t.Fatal(err)
	}
	cfg := runConfig()
	cfg.TCPFlowTimeout, cfg.OtherFlowTimeout = time.Second, time.Second
	seq, sum, err := replayFile(t, path, "jsonl", replay.Options{BPF: cfg, Workers: 1, Stats: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.RTTs < 5000 || sum.Flows < 50 || !bytes.Contains(seq, []byte("flow timeout")) {
		t.Fatalf("sequential replay: %d RTTs, %d flow events; want thousands of samples and mid-capture timeouts", sum.RTTs, sum.Flows)
	}
	small := cfg
	small.RingbufSize = 4096
	for _, c := range []struct {
		name    string
		workers int
		cfg     loader.Config
	}{{"2", 2, cfg}, {"3", 3, cfg}, {"2-smallbatch", 2, small}, {"5-smallbatch", 5, small}} {
		t.Run(c.name, func(t *testing.T) {
			par, _, err := replayFile(t, path, "jsonl", replay.Options{BPF: c.cfg, Workers: c.workers, Stats: true})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(seq, par) {
				a, b := strings.Split(string(seq), "\n"), strings.Split(string(par), "\n")
				for i := 0; i < min(len(a), len(b)); i++ {
					if a[i] != b[i] {
						t.Fatalf("output differs from the sequential replay at line %d of %d/%d:\nsequential %s\nparallel   %s", i+1, len(a), len(b), a[i], b[i])
					}
				}
				t.Fatalf("output differs: %d lines vs %d", len(a), len(b))
			}
		})
	}
}

// TestRunReadErrorKeepsEvents: a capture cut in the middle of a record
// fails with the file and packet index, after the events of the packets
// before it have been written, sequential or parallel.
func TestRunReadErrorKeepsEvents(t *testing.T) {
	testutil.RequireRoot(t)
	fr, err := replaytest.Frames(replaytest.Steps(), capture.LinkTypeEthernet, true)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := capture.EncodePcapng(&buf, capture.NgOptions{Interfaces: []capture.NgInterface{{LinkType: capture.LinkTypeEthernet}}}, fr); err != nil {
		t.Fatal(err)
	}
	// Cut 10 bytes into the record of the packet at T0+420 ms (index 26).
	const cutIndex = 26
	if fr[cutIndex].Timestamp != replaytest.T0+420_000_000 {
		t.Fatalf("packet %d is at %d", cutIndex, fr[cutIndex].Timestamp-replaytest.T0)
	}
	ng := buf.Bytes()
	off := 0
	for i := 0; i < 2+cutIndex; i++ { // SHB, IDB, then EPBs
		off += int(uint32(ng[off+4]) | uint32(ng[off+5])<<8 | uint32(ng[off+6])<<16 | uint32(ng[off+7])<<24)
	}
	path := filepath.Join(t.TempDir(), "cut.pcapng")
	if err := os.WriteFile(path, ng[:off+10], 0o644); err != nil {
		t.Fatal(err)
	}
	var want int
	for _, e := range replaytest.Expected() {
		if e.Time < fr[cutIndex].Timestamp {
			want++
		}
	}
	for _, workers := range []int{1, 2} {
		out, sum, err := replayFile(t, path, "json", replay.Options{BPF: runConfig(), Workers: workers})
		var ce *capture.Error
		if !errors.As(err, &ce) || ce.Packet != cutIndex || !errors.Is(err, capture.ErrTruncated) || !strings.Contains(err.Error(), path) {
			t.Errorf("workers=%d: error %v, want a truncation of packet %d of %s", workers, err, cutIndex, path)
		}
		got, _, perr := replaytest.ParseJSON(out)
		if perr != nil || len(got) != want || sum.Fed != cutIndex {
			t.Errorf("workers=%d: %d events (%v), %d packets fed; want the %d events of the %d packets before", workers, len(got), perr, sum.Fed, want, cutIndex)
		}
	}
}

// TestRunInterrupted: cancelling the context stops the replay with an
// error; what was computed is written.
func TestRunInterrupted(t *testing.T) {
	testutil.RequireRoot(t)
	path := writeScenario(t, capture.LinkTypeEthernet, true)
	r, err := replay.Open(replay.Options{Path: path, BPF: runConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var buf bytes.Buffer
	w, _ := format.New("json", &buf, format.Options{})
	_, err = r.Run(ctx, w)
	_ = w.Close() // the interruption is the error under test; the output is checked below
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("error %v, want an interruption", err)
	}
	if _, _, err := replaytest.ParseJSON(buf.Bytes()); err != nil {
		t.Error(err)
	}
}

// TestRunLargeFrames: packets larger than BPF_PROG_TEST_RUN accepts (GRO/TSO
// aggregates of up to 64 KiB, as captured on hosts) are cut to fit; byte
// counts (payload) still come from the IP header, and IPv4/IPv6 frames too
// short for BPF_PROG_TEST_RUN are skipped.
func TestRunLargeFrames(t *testing.T) {
	testutil.RequireRoot(t)
	c4, s4 := replaytest.Client4, replaytest.Server4
	big := pktcraft.Packet{Src: c4, Dst: s4, TCP: &pktcraft.TCP{SrcPort: 1, DstPort: 2, ACK: true, TSval: 10, TSecr: 1, Payload: make([]byte, 64000)}}.MustBytes()
	ack := pktcraft.Packet{Src: s4, Dst: c4, TCP: &pktcraft.TCP{SrcPort: 2, DstPort: 1, ACK: true, TSval: 2, TSecr: 10}}.MustBytes()
	t0 := replaytest.T0
	path := filepath.Join(t.TempDir(), "gro.pcap")
	err := capture.WritePcap(path, capture.LinkTypeEthernet, true, []capture.TimedFrame{
		{Timestamp: t0, Data: big},
		{Timestamp: t0 + 1, Data: big[:30]},        // IPv4 EtherType, IP header incomplete
		{Timestamp: t0 + 2, Data: []byte{1, 2, 3}}, // no Ethernet header
		{Timestamp: t0 + 31_415_926, Data: ack},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2} {
		cfg := runConfig()
		cfg.SampleFirstTSval = true // the big packet is the flow's first
		out, sum, err := replayFile(t, path, "json", replay.Options{BPF: cfg, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Short != 2 || sum.Fed != 2 {
			t.Errorf("summary %+v: want 2 fed, 2 short", sum)
		}
		if !bytes.Contains(out, []byte(`"rtt":31415926,"min_rtt":31415926,"sent_packets":1,"sent_bytes":64000,`)) {
			t.Errorf("want one 31.415926 ms sample after 64000 payload bytes sent, got\n%s", out)
		}
	}
}

// TestRunInterfaceFilter: packets of other pcapng interfaces are counted
// and skipped.
func TestRunInterfaceFilter(t *testing.T) {
	testutil.RequireRoot(t)
	fr, err := replaytest.Frames(replaytest.Steps(), capture.LinkTypeEthernet, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fr {
		fr[i].Interface = i % 2
	}
	path := filepath.Join(t.TempDir(), "two.pcapng")
	if err := capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet, capture.LinkTypeEthernet}, fr); err != nil {
		t.Fatal(err)
	}
	_, sum, err := replayFile(t, path, "json", replay.Options{BPF: runConfig(), Interfaces: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Packets != uint64(len(fr)) || sum.Fed != uint64(len(fr)/2) || sum.Filtered != uint64(len(fr)-len(fr)/2) {
		t.Errorf("summary %+v", sum)
	}
}

// TestOpenErrors: Open reports a missing file and a non-capture before
// loading anything.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.pcap")
	if _, err := replay.Open(replay.Options{Path: missing, BPF: runConfig()}); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("hello, world, this is text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Open(replay.Options{Path: text, BPF: runConfig()}); !errors.Is(err, capture.ErrNotCapture) {
		t.Errorf("text file: %v", err)
	}
}
