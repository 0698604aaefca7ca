package replay_test

// tshark as the oracle of the TCP sequence and handshake sources: a lab
// transfer without TCP timestamps, through a bottleneck that drops, is
// captured on the middlebox and replayed; tshark's tcp.analysis.ack_rtt
// and tcp.analysis.initial_rtt of the same capture must agree with the
// replay's samples, and every sample only one of them has must be
// explained by a stated rule.

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/replay"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// tsFrame is one TCP frame as tshark decodes it.
type tsFrame struct {
	num        int
	time       int64 // capture time, Unix ns
	src, dst   netip.AddrPort
	seq, next  uint32 // absolute; next = seq + length (+SYN/FIN), 0 when it took no sequence space
	ack        uint32
	syn, ackOn bool
	rst        bool
	retrans    bool  // tshark: retransmission, fast or spurious retransmission, out of order
	ackRTT     int64 // tcp.analysis.ack_rtt in ns, -1 when absent
	acksFrame  int
	initialRTT int64 // tcp.analysis.initial_rtt in ns, -1 when absent
}

// tsharkFrames decodes every TCP frame of path with absolute sequence
// numbers.
func tsharkFrames(t *testing.T, path string) []tsFrame {
	t.Helper()
	fields := []string{"frame.number", "frame.time_epoch", "ip.src", "ipv6.src", "tcp.srcport", "ip.dst", "ipv6.dst", "tcp.dstport",
		"tcp.seq", "tcp.nxtseq", "tcp.ack", "tcp.flags.syn", "tcp.flags.ack", "tcp.analysis.retransmission",
		"tcp.analysis.fast_retransmission", "tcp.analysis.spurious_retransmission", "tcp.analysis.out_of_order",
		"tcp.analysis.ack_rtt", "tcp.analysis.acks_frame", "tcp.analysis.initial_rtt", "tcp.flags.reset"}
	args := []string{"-r", path, "-n", "-Y", "tcp", "-o", "tcp.relative_sequence_numbers:FALSE", "-T", "fields", "-E", "separator=\t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	var frames []tsFrame
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != len(fields) {
			t.Fatalf("tshark line %q: %d fields, want %d", line, len(f), len(fields))
		}
		num := func(s string) uint64 {
			if s == "" {
				return 0
			}
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("tshark number %q in %q: %v", s, line, err)
			}
			return v
		}
		secs := func(s string) int64 {
			if s == "" {
				return -1
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("tshark seconds %q: %v", s, err)
			}
			return int64(math.Round(v * 1e9))
		}
		ts, err := parseEpoch(f[1])
		if err != nil {
			t.Fatalf("tshark time %q: %v", f[1], err)
		}
		addr := func(a, b, port string) netip.AddrPort {
			ip, err := netip.ParseAddr(a + b)
			if err != nil {
				t.Fatalf("tshark address %q%q: %v", a, b, err)
			}
			return netip.AddrPortFrom(ip, uint16(num(port)))
		}
		fr := tsFrame{num: int(num(f[0])), time: ts, src: addr(f[2], f[3], f[4]), dst: addr(f[5], f[6], f[7]),
			seq: uint32(num(f[8])), next: uint32(num(f[9])), ack: uint32(num(f[10])),
			syn: f[11] == "1", ackOn: f[12] == "1", retrans: f[13]+f[14]+f[15]+f[16] != "",
			ackRTT: secs(f[17]), acksFrame: int(num(f[18])), initialRTT: secs(f[19]), rst: f[20] == "1"}
		frames = append(frames, fr)
	}
	return frames
}

// TestTsharkSeqOracle: a client with TCP timestamps off sends through a
// 20 Mbit/s bottleneck with a short queue (drops, so retransmissions) over
// a 20 ms path; a tcpdump on the middlebox captures it, and the replay of
// that capture (rate limit 0, handshake on) is compared with tshark's
// analysis of the same file:
//
//   - tcp_seq and tcp_syn samples: at each ACK where both report a sample
//     for the same segment (tshark's acks_frame is the replay's timed
//     segment, the frame sent RTT before the ACK), the RTTs are equal to
//     the microsecond. A replay sample whose ACK covers more than the timed
//     segment is measured from the timed one (the first covered), where
//     tshark names the last one: rule "cumulative".
//   - every tshark sample the replay lacks is explained: its ACK comes
//     after a RST of the connection, which ends the flow ("after RST": the
//     client resets the connection at the end of its transfer, while data
//     is still in flight beyond the capture point; the replay has no
//     sample there), or its segment was sent while the replay was timing
//     an earlier range in that direction ("one range at a time"), or a
//     retransmission was seen in that direction between its sending and
//     its ACK, or it is one ("Karn"). "While" and "between" are in capture
//     order, the order the replay reads packets in: a capture's timestamps
//     can go backwards by a few microseconds (the two directions are
//     stamped on different CPUs), so an ACK that ends a timing may be
//     stamped before a segment captured ahead of it.
//   - tcp.analysis.initial_rtt of each connection equals the sum of its two
//     handshake samples.
func TestTsharkSeqOracle(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTools(t, "tcpdump", "tshark")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := labFor(ctx, t, "rtt-sq", lab.PathSpec{DelayToServer: 10 * time.Millisecond, DelayToClient: 10 * time.Millisecond,
		RateBitsPerSec: 20_000_000, QueuePackets: 40})
	if err := l.Client.SetSysctl("net.ipv4.tcp_timestamps", "0"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pcap := filepath.Join(dir, "seq.pcap")
	stop := startCapture(t, l.Middlebox, "-i", l.MiddleboxServerIf[0], "-w", pcap, "tcp")
	sinks := map[netip.Addr]bool{}
	for _, a := range []netip.Addr{l.ServerAddr4[0], l.ServerAddr6[0]} {
		sk, err := traffic.NewSink(l.Servers[0], a, 5203)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sk.Close() })
		sinks[a] = true
	}
	var wg sync.WaitGroup
	results := make(chan string, 2)
	for a := range sinks {
		wg.Go(func() {
			res, err := traffic.BulkStats(ctx, l.Client, netip.AddrPortFrom(a, 5203), 2*time.Second, 0)
			results <- fmt.Sprintf("%s: %d bytes, %d retransmits, timestamps %v, err %v", a, res.Bytes, res.Retransmits, res.Timestamps, err)
		})
	}
	wg.Wait()
	close(results)
	for r := range results {
		t.Log(r)
	}
	time.Sleep(200 * time.Millisecond)
	if dropped := stop(); dropped > 0 {
		t.Skipf("skipped: the capture lost %d packets (machine loaded); the comparison needs every packet", dropped)
	}

	compareWithTshark(t, tsharkFrames(t, pcap), replaySeq(t, pcap, clientNets(l)))
}

// replaySeq replays a capture of TestTsharkSeqOracle's lab as the oracle
// tests compare it: no rate limit, the handshake timed; clients are the
// packets' local side.
func replaySeq(t *testing.T, pcap string, clients []netip.Prefix) []events.RTT {
	t.Helper()
	cfg := loader.DefaultConfig()
	cfg.RateLimit, cfg.TrackTCPHandshake = 0, true
	rep, _ := replayRTTs(t, replay.Options{Path: pcap, BPF: cfg, Direction: replay.DirectionRules{LocalNets: clients}})
	return rep
}

// TestTsharkSeqOracleBackwardTimestamps holds TestTsharkSeqOracle's rules
// to a capture of that test whose timestamps go backwards: one connection
// (client 10.10.0.2, port 58814) cut to its first 919 packets and 128
// bytes each. An ACK (frame 1330 of the original) is stamped 15 us before
// the data segment captured just ahead of it (1329); the replay, reading in
// capture order, was still timing the range that ACK answers when it read
// the segment, so it did not time the segment. Rules in capture time
// instead of capture order call that a missing sample.
func TestTsharkSeqOracleBackwardTimestamps(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTools(t, "tshark")
	pcap := filepath.Join("testdata", "seq-backwards.pcap")
	frames := tsharkFrames(t, pcap)
	backwards := 0
	for i := 1; i < len(frames); i++ {
		if frames[i].time < frames[i-1].time {
			backwards++
		}
	}
	if backwards == 0 {
		t.Fatalf("%s: no timestamp goes backwards; the capture no longer tests what it is for", pcap)
	}
	compareWithTshark(t, frames, replaySeq(t, pcap, []netip.Prefix{netip.MustParsePrefix("10.10.0.0/24")}))
	t.Logf("%d of %d timestamps go backwards", backwards, len(frames))
}

// compareWithTshark applies the rules of TestTsharkSeqOracle.
func compareWithTshark(t *testing.T, frames []tsFrame, rep []events.RTT) {
	t.Helper()
	type dirKey struct{ src, dst netip.AddrPort }
	at := map[dirKey]map[int64]*tsFrame{} // frames by direction and time
	byNum := map[int]*tsFrame{}
	for i := range frames {
		f := &frames[i]
		k := dirKey{f.src, f.dst}
		if at[k] == nil {
			at[k] = map[int64]*tsFrame{}
		}
		at[k][f.time] = f
		byNum[f.num] = f
	}
	ap := func(e events.Endpoint) netip.AddrPort { return netip.AddrPortFrom(e.IP, e.Port) }
	// The first RST of each connection (either direction) deletes the
	// flow: no sample at an ACK after it.
	firstRST := map[dirKey]int{} // by both directions' keys: frame number
	for i := range frames {
		f := &frames[i]
		if k := (dirKey{f.src, f.dst}); f.rst && firstRST[k] == 0 {
			firstRST[k], firstRST[dirKey{f.dst, f.src}] = f.num, f.num
		}
	}
	afterRST := func(f *tsFrame) bool {
		n := firstRST[dirKey{f.src, f.dst}]
		return n != 0 && f.num > n
	}

	// timing is one range the replay timed and sampled: the frame
	// numbers of its segment and of the ACK that answered it.
	type timing struct{ sent, acked int }
	timings := map[dirKey][]timing{} // by the data's direction
	sampled := map[int]bool{}        // ACK frames the replay sampled
	var agree, cumulative int
	var worst int64
	handshake := map[dirKey]int64{} // client->server: sum of the two handshake samples
	for _, e := range rep {
		if e.Flow.Proto != events.ProtoTCP {
			continue
		}
		if e.Source != events.SourceTCPSeq && e.Source != events.SourceTCPSYN {
			t.Errorf("sample of source %v: the client has no timestamps", e.Source)
			continue
		}
		back := dirKey{ap(e.Flow.Src), ap(e.Flow.Dst)}
		fwd := dirKey{back.dst, back.src}
		ackF, sentF := at[back][e.Time], at[fwd][e.Time-int64(e.RTT)]
		if ackF == nil || sentF == nil {
			t.Errorf("sample %+v: no ACK frame at its time or no segment RTT before it", e)
			continue
		}
		sampled[ackF.num] = true
		if afterRST(ackF) {
			t.Errorf("sample %+v: at frame %d, after the connection's RST (frame %d)", e, ackF.num, firstRST[back])
		}
		timings[fwd] = append(timings[fwd], timing{sentF.num, ackF.num})
		if e.Source == events.SourceTCPSYN {
			if sentF.syn && sentF.ackOn { // SYN-ACK -> ACK: client to server
				handshake[back] += int64(e.RTT)
			} else {
				handshake[fwd] += int64(e.RTT)
			}
		}
		if ackF.ack != sentF.next {
			// Covers more than the timed segment: tshark times the
			// segment that ends at the ACK.
			cumulative++
			continue
		}
		if ackF.ackRTT < 0 || ackF.acksFrame != sentF.num {
			t.Errorf("frame %d acks frame %d exactly (%v after it), tshark: ack_rtt %d ns of frame %d",
				ackF.num, sentF.num, e.RTT, ackF.ackRTT, ackF.acksFrame)
			continue
		}
		d := max(ackF.ackRTT-int64(e.RTT), int64(e.RTT)-ackF.ackRTT)
		worst = max(worst, d)
		if d > 1000 {
			t.Errorf("frame %d: replay %v, tshark %d ns", ackF.num, e.RTT, ackF.ackRTT)
		}
		agree++
	}

	// Retransmissions by direction (frame numbers), for Karn.
	retrans := map[dirKey][]int{}
	for i := range frames {
		if f := &frames[i]; f.retrans {
			k := dirKey{f.src, f.dst}
			retrans[k] = append(retrans[k], f.num)
		}
	}
	var oneAtATime, karn, closed, tsharkOnly int
	for i := range frames {
		f := &frames[i]
		if f.ackRTT < 0 || sampled[f.num] {
			continue
		}
		tsharkOnly++
		if afterRST(f) {
			closed++
			continue
		}
		seg := byNum[f.acksFrame]
		if seg == nil {
			t.Errorf("frame %d: tshark's acks_frame %d is not a TCP frame", f.num, f.acksFrame)
			continue
		}
		data := dirKey{seg.src, seg.dst}
		explained := false
		for _, tm := range timings[data] {
			if seg.num >= tm.sent && seg.num < tm.acked {
				explained = true
				oneAtATime++
				break
			}
		}
		if !explained {
			for _, r := range retrans[data] {
				if r >= seg.num && r <= f.num {
					explained = true
					karn++
					break
				}
			}
		}
		if !explained {
			t.Errorf("tshark: frame %d acks frame %d after %d ns; the replay has no sample and no rule explains it", f.num, seg.num, f.ackRTT)
		}
	}

	// The handshake against initial_rtt.
	var conns int
	seen := map[dirKey]bool{}
	for i := range frames {
		f := &frames[i]
		k := dirKey{f.src, f.dst}
		if f.initialRTT < 0 || seen[k] || seen[dirKey{f.dst, f.src}] {
			continue
		}
		seen[k] = true
		client := k
		if _, ok := handshake[client]; !ok {
			client = dirKey{f.dst, f.src}
		}
		sum, ok := handshake[client]
		if !ok {
			t.Errorf("%v: tshark initial_rtt %d ns, no handshake samples", k, f.initialRTT)
			continue
		}
		conns++
		if d := max(sum-f.initialRTT, f.initialRTT-sum); d > 1000 {
			t.Errorf("%v: handshake samples sum to %d ns, tshark's initial_rtt %d ns", client, sum, f.initialRTT)
		}
	}
	if agree < 10 || conns == 0 {
		t.Errorf("only %d samples compared and %d handshakes: the capture is too small to judge", agree, conns)
	}
	t.Logf("%d replay samples: %d equal to tshark's (worst |difference| %d ns), %d cumulative ACKs; "+
		"%d tshark samples the replay lacks: %d acknowledged after a RST, %d sent while another range was timed, %d by Karn's rule; %d handshakes equal to initial_rtt",
		agree+cumulative, agree, worst, cumulative, tsharkOnly, closed, oneAtATime, karn, conns)
}
