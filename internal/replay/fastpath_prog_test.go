package replay_test

import (
	"encoding/json"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/replay"
	"github.com/rttscope/rttscope/internal/sampling"
	"github.com/rttscope/rttscope/internal/testutil"
)

// TestFastPathSameOutput: the fast path (bpf/fastpath.h) changes nothing
// but the cost. A seeded random mix of TCP flows (IPv4 and IPv6, VLAN
// tags, IP options, ECN marks, other option layouts, handshakes, mid-stream starts,
// untracked datagrams between the flows' hosts,
// duplicate, old and wrapped TSvals, reordered and stale echoes, FIN, RST
// and data after them, a flow to itself) is replayed in several
// configurations with the fast path on and off: every record, the stats
// record's counters included, must be the same but for the fast path's
// own counter, which must be above zero with it and zero without. The
// replay runs the tc programs, the live ones (the batched XDP replay has
// no fast path: bpf/rttscope.c, handle_packet).
func TestFastPathSameOutput(t *testing.T) {
	testutil.RequireRoot(t)
	t.Setenv(kernel.DisableEnv, "xdp_test_run_meta")
	frames := fastPathMix(rand.New(rand.NewPCG(15, 2026)))
	path := filepath.Join(t.TempDir(), "mix.pcapng")
	if err := capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet}, frames); err != nil {
		t.Fatal(err)
	}
	defaults := loader.DefaultConfig()
	defaults.FlowMapSize, defaults.TimestampMapSize = 4096, 8192
	first := defaults
	first.RateLimit, first.SampleFirstTSval, first.TCPMode = 0, true, loader.TCPTimestamps
	// More than two timestamps in flight: the ACK filter's oldest case.
	short := defaults
	short.RateLimit = 2 * time.Millisecond
	rttRate := defaults
	rttRate.RTTRate = 0.5
	summary := runConfig()
	summary.FlowSummary = true
	agg := defaults
	agg.Aggregate = true
	// A table of 4 buckets: flows evicted and created on the fast path's
	// heels.
	tiny := runConfig()
	tiny.FlowMapSize = 8
	aggTiny := agg
	aggTiny.FlowMapSize = 8
	aggReport := sampling.Report{AggregateInterval: 200 * time.Millisecond}
	// ICMP echo, DNS and QUIC read: only the other untracked packets
	// take the untracked fast path.
	sources := defaults
	sources.TrackICMP, sources.TrackDNS, sources.TrackQUIC = true, true, true
	aggICMP := agg
	aggICMP.TrackICMP = true
	cases := []struct {
		name   string
		cfg    loader.Config
		report sampling.Report
		// disable: more features switched off (kernel.DisableEnv)
		disable string
		// fold: the fast path's packets are folded (agg_folded_packets
		// above zero with it, zero without)
		fold bool
	}{
		{"defaults", defaults, sampling.Report{}, "", false},
		{"every-tsval", runConfig(), sampling.Report{}, "", false},
		{"first-tsval-ts-mode", first, sampling.Report{}, "", false},
		{"short-rate-limit", short, sampling.Report{}, "", false},
		{"rtt-rate", rttRate, sampling.Report{}, "", false},
		{"summaries", summary, sampling.Report{}, "", false},
		// The fast path's counts folded from the flows at each
		// interval's end (bpf/agg_fold.h), flushed by flows that
		// close, and by flows evicted from a tiny table; and without
		// the fold, counted in the prefix slots.
		{"aggregated", agg, aggReport, "", true},
		{"aggregated-tiny-flow-table", aggTiny, aggReport, "", true},
		{"aggregated-slots", agg, aggReport, "for_each_map_elem", false},
		{"tiny-flow-table", tiny, sampling.Report{}, "", false},
		{"sources", sources, sampling.Report{}, "", false},
		{"aggregated-icmp", aggICMP, aggReport, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.disable != "" {
				t.Setenv(kernel.DisableEnv, "xdp_test_run_meta,"+c.disable)
			}
			out, fast := replayBothPaths(t, path, c.cfg, c.report)
			if fast[0].fast == 0 || fast[1].fast != 0 {
				t.Errorf("fast_path_packets: %d with the fast path, %d without (want > 0 and 0)", fast[0].fast, fast[1].fast)
			}
			if folded := fast[0].folded > 0; folded != c.fold || fast[1].folded != 0 {
				t.Errorf("agg_folded_packets: %d with the fast path, %d without (want folded %v and 0)", fast[0].folded, fast[1].folded, c.fold)
			}
			if !strings.Contains(out[1], `"rtt":`) && !strings.Contains(out[1], `"count_rtt":`) {
				t.Fatalf("the general path reported no RTT: nothing compared\n%s", out[1])
			}
			if out[0] != out[1] {
				t.Errorf("records differ with the fast path (-) and without (+):\n%s", lineDiff(out[0], out[1]))
			}
			t.Logf("%d of %d packets took the fast path, %d folded", fast[0].fast, len(frames), fast[0].folded)
		})
	}
}

// TestFastPathUntracked: the untracked fast path takes exactly the IPv4
// and IPv6 packets the general path would only count (not a later
// fragment, nor an IPv6 packet with extension headers, nor what a source
// in the configuration reads, nor the tracked TCP segments between them),
// with the general path's records, in default and aggregated mode.
func TestFastPathUntracked(t *testing.T) {
	testutil.RequireRoot(t)
	t.Setenv(kernel.DisableEnv, "xdp_test_run_meta")
	const start, ms = int64(1_760_000_000_000_000_000), int64(time.Millisecond)
	r := rand.New(rand.NewPCG(3, 2026))
	var pkts []timedPacket
	kinds := map[string]int{} // packets by what reads them
	for i := range 600 {
		cli := netip.AddrFrom4([4]byte{10, 0, byte(i % 3), byte(1 + i%50)})
		srv := netip.AddrFrom4([4]byte{198, 51, 100, byte(i % 4)})
		if i%3 == 1 {
			// A third in IPv6: clients in 64 /48s that differ in the
			// key's second word only, so that some share a prefix
			// slot (256 a CPU) and a key compare that missed a word
			// would count them in another prefix; servers in four.
			cli = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i % 64), 15: byte(1 + i%50)})
			srv = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb9, 0, byte(i % 4), 15: 1})
		}
		var vlans []uint16
		if i%5 == 0 {
			vlans = []uint16{42}
		}
		d := untrackedPacket(r, cli, srv, vlans, nil)
		switch {
		case d.FragOffset > 0:
			kinds["later-fragment"]++
		case len(d.IPv6ExtHeaders) > 0: // the general path walks them
			kinds["ipv6-extension"]++
		case d.ICMPEcho != nil:
			kinds["icmp"]++
		case d.UDP != nil && (d.UDP.DstPort == 53 || d.UDP.DstPort == 443):
			kinds["dns-quic-port"]++
		case d.UDP != nil:
			kinds["udp"]++
		default:
			kinds["other"]++
		}
		pkts = append(pkts, timedPacket{start + int64(i)*ms, d, i%2 == 0})
		if i%6 <= 1 {
			// Tracked segments from every other client prefix (the
			// odd /48s, 10.0.0.0/24): in aggregated mode those
			// prefixes have entries and slots in every interval, which
			// the untracked packets of the others must not find.
			seg := pktcraft.Packet{Src: cli, Dst: srv, TCP: &pktcraft.TCP{SrcPort: 40000 + uint16(i%64), DstPort: 443,
				ACK: true, TSval: uint32(1000 + i), TSecr: 1, Payload: make([]byte, 100)}}
			pkts = append(pkts, timedPacket{start + int64(i)*ms + ms/2, seg, true})
			kinds["tcp"]++
		}
	}
	path := filepath.Join(t.TempDir(), "untracked.pcapng")
	if err := capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet}, timedFrames(pkts)); err != nil {
		t.Fatal(err)
	}
	defaults := loader.DefaultConfig()
	icmp := defaults
	icmp.TrackICMP = true
	dns := defaults
	dns.TrackDNS = true
	agg := defaults
	agg.Aggregate = true
	aggICMP := agg
	aggICMP.TrackICMP = true
	aggReport := sampling.Report{AggregateInterval: 100 * time.Millisecond}
	all := kinds["udp"] + kinds["dns-quic-port"] + kinds["icmp"] + kinds["other"]
	for _, c := range []struct {
		name   string
		cfg    loader.Config
		report sampling.Report
		want   int // packets the untracked fast path takes
	}{
		{"defaults", defaults, sampling.Report{}, all},
		{"icmp", icmp, sampling.Report{}, all - kinds["icmp"]},
		{"dns", dns, sampling.Report{}, kinds["icmp"] + kinds["other"]},
		{"aggregated", agg, aggReport, all},
		{"aggregated-icmp", aggICMP, aggReport, all - kinds["icmp"]},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, fast := replayBothPaths(t, path, c.cfg, c.report)
			if fast[0].fast != uint64(c.want) || fast[1].fast != 0 {
				t.Errorf("fast_path_packets: %d with the fast path, %d without; want %d (packets %v) and 0",
					fast[0].fast, fast[1].fast, c.want, kinds)
			}
			if c.cfg.Aggregate && !strings.Contains(out[1], `"ip_prefix"`) {
				t.Fatalf("no prefix records: nothing compared\n%s", out[1])
			}
			if out[0] != out[1] {
				t.Errorf("records differ with the fast path (-) and without (+):\n%s", lineDiff(out[0], out[1]))
			}
		})
	}
}

// replayBothPaths replays path through the tc programs one packet at a
// time with cfg and report, with the fast paths on ([0]) and off ([1]),
// and returns each run's records and counts (withoutFastPathCount).
func replayBothPaths(t *testing.T, path string, cfg loader.Config, report sampling.Report) (out [2]string, fast [2]fastCounts) {
	t.Helper()
	for i, general := range []bool{false, true} {
		cfg.GeneralPathOnly = general
		b, _, err := replayFile(t, path, "jsonl", replay.Options{BPF: cfg, Report: report, Workers: 1, Stats: true})
		if err != nil {
			t.Fatalf("general path only %v: %v", general, err)
		}
		out[i], fast[i] = withoutFastPathCount(t, string(b))
		if !strings.Contains(out[i], "replay=tc") {
			t.Fatalf("the replay did not run the tc programs:\n%s", out[i])
		}
	}
	return out, fast
}

var fastPathCounts = regexp.MustCompile(`,"(fast_path|agg_folded)_packets":[0-9]+`)

// fastCounts are the stats record's counts of the fast path's own work.
type fastCounts struct {
	fast   uint64 // fast_path_packets
	folded uint64 // agg_folded_packets
}

// withoutFastPathCount returns the replay's records, sorted (records of
// the same time may come in either order), with the stats record's
// fast_path_packets and agg_folded_packets taken out, and those counts.
func withoutFastPathCount(t *testing.T, out string) (string, fastCounts) {
	t.Helper()
	var n fastCounts
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, l := range lines {
		if !strings.Contains(l, `"type":"stats"`) {
			continue
		}
		var rec struct {
			FastPath *uint64 `json:"fast_path_packets"`
			Folded   *uint64 `json:"agg_folded_packets"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.FastPath == nil || rec.Folded == nil {
			t.Fatalf("stats record without fast_path_packets or agg_folded_packets (%v): %s", err, l)
		}
		n = fastCounts{*rec.FastPath, *rec.Folded}
		lines[i] = fastPathCounts.ReplaceAllString(l, "")
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), n
}

// lineDiff lists the lines of a that b lacks (-) and of b that a lacks
// (+), at most 20 of each.
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var minus, plus []string
	for l, n := range count {
		for ; n > 0 && len(minus) < 20; n-- {
			minus = append(minus, "- "+l)
		}
		for ; n < 0 && len(plus) < 20; n++ {
			plus = append(plus, "+ "+l)
		}
	}
	slices.Sort(minus)
	slices.Sort(plus)
	return strings.Join(append(minus, plus...), "\n")
}

// fastPathMix is the test's capture: 40 TCP flows over about 3 s of
// capture time, each a random exchange of data and ACKs with the echoes a
// real path gives (the peer's newest TSval one one-way delay ago), and
// the irregular cases the fast path must leave to the general path or
// handle as it does.
func fastPathMix(r *rand.Rand) []capture.TimedFrame {
	const start = int64(1_760_000_000_000_000_000)
	const ms = int64(time.Millisecond)
	var pkts []timedPacket
	server4 := netip.MustParseAddr("198.51.100.7")
	server6 := netip.MustParseAddr("2001:db8:2::7")
	for f := range 40 {
		cli, srv := netip.AddrFrom4([4]byte{10, 0, 2, byte(1 + f)}), server4
		switch {
		case f%6 == 5:
			cli, srv = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 1, 15: byte(f)}), server6
		case f == 7: // the same address both ends: ordered by port
			srv = cli
		}
		cport, sport := uint16(20000+f), uint16(443)
		if f == 13 { // a flow to itself: the general path's
			srv, sport = cli, cport
		}
		owd := int64(1+r.IntN(40)) * ms / 2
		t0 := start + int64(f)*37*ms + int64(r.IntN(1000))*1000
		// TSval clocks in ms, one near the wrap.
		tsc, tss := r.Uint32(), r.Uint32()
		if f%8 == 4 {
			tsc = 0xffffffff - 300
		}
		type sent struct {
			at    int64
			tsval uint32
		}
		var hist [2][]sent // what each side sent: [0] client, [1] server
		echo := func(side int, at int64) uint32 {
			// The peer's newest TSval that has arrived by at.
			h := hist[1-side]
			for i := len(h) - 1; i >= 0; i-- {
				if h[i].at+owd <= at {
					if k := 2 + r.IntN(12); r.IntN(20) == 0 && i >= k {
						return h[i-k].tsval // a stale echo (reordered ACK)
					}
					return h[i].tsval
				}
			}
			return 0
		}
		var vlans []uint16
		if f%5 == 1 {
			vlans = []uint16{100 + uint16(f)}
		}
		var ipOpts, tcpOpts []byte
		if f%7 == 2 {
			ipOpts = pktcraft.IPv4OptRouterAlert()
		}
		if f%9 == 3 { // the timestamp option after others: the option walk
			tcpOpts = []byte{pktcraft.OptNOP, pktcraft.OptNOP, pktcraft.OptNOP, pktcraft.OptNOP}
		}
		send := func(side int, at int64, t pktcraft.TCP) {
			clock := tsc
			if side == 1 {
				clock = tss
			}
			t.TSval = clock + uint32((at-t0)/ms)
			if r.IntN(30) == 0 && len(hist[side]) > 3 { // a retransmission's old TSval
				t.TSval = hist[side][len(hist[side])-3].tsval
			}
			t.TSecr = echo(side, at)
			t.ExtraOptions = tcpOpts
			t.Window = 65000
			p := pktcraft.Packet{Src: cli, Dst: srv, VLANs: vlans, IPv4Options: ipOpts, TCP: &t}
			t.SrcPort, t.DstPort = cport, sport
			if side == 1 {
				p.Src, p.Dst = srv, cli
				t.SrcPort, t.DstPort = sport, cport
			}
			if !cli.Is4() {
				p.IPv4Options = nil
			}
			if f%10 == 6 { // ECN: ECT(0), every seventh packet CE
				p.TOS = 2
				if len(hist[side])%7 == 0 {
					p.TOS = 3
				}
			}
			hist[side] = append(hist[side], sent{at, t.TSval})
			pkts = append(pkts, timedPacket{at, p, side == 0})
		}
		at := t0
		if f%3 == 0 { // a handshake; the others are picked up mid-stream
			send(0, at, pktcraft.TCP{SYN: true})
			send(1, at+2*owd, pktcraft.TCP{SYN: true, ACK: true})
			at += 2*owd + owd/2
			send(0, at, pktcraft.TCP{ACK: true})
		}
		n := 40 + r.IntN(120)
		for range n {
			at += int64(r.IntN(4000)) * 1000 // 0-4 ms: several per TSval tick
			side := 0
			if r.IntN(3) == 0 {
				side = 1
			}
			payload := 0
			if r.IntN(4) != 0 {
				payload = 1 + r.IntN(1400)
			}
			send(side, at, pktcraft.TCP{ACK: true, PSH: payload > 0, Payload: make([]byte, payload)})
		}
		if f%4 == 0 {
			// Untracked datagrams between the same hosts, from the
			// flow's start on: in aggregated mode they count in a
			// prefix's entry only once a tracked packet made it,
			// which the fold must not change (AGG_FOLD_READY).
			for u := t0; u < at; u += int64(5+r.IntN(40)) * ms {
				d := untrackedPacket(r, cli, srv, vlans, ipOpts)
				if r.IntN(2) == 0 {
					d.Src, d.Dst = srv, cli
				}
				pkts = append(pkts, timedPacket{u, d, d.Src == cli})
			}
		}
		switch f % 4 {
		case 1: // a reset, then a stray segment
			send(r.IntN(2), at+ms, pktcraft.TCP{RST: true, ACK: true})
			send(0, at+5*ms, pktcraft.TCP{ACK: true, Payload: make([]byte, 10)})
		case 2: // FIN both ways, data and ACKs around them
			send(0, at+ms, pktcraft.TCP{FIN: true, ACK: true})
			send(1, at+ms+2*owd, pktcraft.TCP{ACK: true, Payload: make([]byte, 100)})
			send(0, at+ms+3*owd, pktcraft.TCP{ACK: true})
			send(1, at+2*ms+4*owd, pktcraft.TCP{FIN: true, ACK: true})
			send(0, at+2*ms+5*owd, pktcraft.TCP{ACK: true})
		}
	}
	pkts = append(pkts, loneClientFlow(start+450*ms)...)
	return timedFrames(pkts)
}

// untrackedPacket is a packet between cli and srv (either family) that no
// RTT source reads with the default settings, of one of the kinds the
// untracked fast path takes or must leave to the general path: UDP (to
// the DNS and QUIC ports too, which --dns and --quic read), ICMP or
// ICMPv6 echo (-C reads it), another protocol, the first and a later
// fragment of a datagram (in IPv6 behind a fragment header), in IPv6 a
// datagram behind a hop-by-hop header, with the flow's VLAN tags and IPv4
// options and an ECN codepoint at times.
func untrackedPacket(r *rand.Rand, cli, srv netip.Addr, vlans []uint16, ipOpts []byte) pktcraft.Packet {
	d := pktcraft.Packet{Src: cli, Dst: srv, VLANs: vlans, TOS: uint8(r.IntN(4))}
	v6 := cli.Is6()
	if !v6 {
		d.IPv4Options = ipOpts
	}
	switch r.IntN(9) {
	case 0:
		d.UDP = &pktcraft.UDP{SrcPort: 5353, DstPort: 53, Payload: make([]byte, 30)}
	case 1:
		d.UDP = &pktcraft.UDP{SrcPort: 50000, DstPort: 443, Payload: make([]byte, 1200)}
	case 2:
		d.ICMPEcho = &pktcraft.ICMPEcho{ID: 7, Seq: uint16(r.IntN(1000)), Payload: make([]byte, 16)}
	case 3:
		d.Raw = &pktcraft.Raw{Proto: 47, Data: make([]byte, 24)} // GRE
	case 4: // the first fragment: counted as a datagram
		d.UDP = &pktcraft.UDP{SrcPort: 5000, DstPort: 5001, Payload: make([]byte, 64)}
		if v6 {
			d.IPv6ExtHeaders = []pktcraft.ExtHeader{pktcraft.FragmentHeader(0, true, r.Uint32())}
		} else {
			d.MF, d.IPID = true, uint16(r.IntN(1<<16))
		}
	case 5: // a later fragment: no transport header (not IP to ePPing)
		d.Raw = &pktcraft.Raw{Proto: 17, Data: make([]byte, 40)}
		if v6 {
			d.IPv6ExtHeaders = []pktcraft.ExtHeader{pktcraft.FragmentHeader(9, false, r.Uint32())}
		} else {
			d.FragOffset, d.IPID = 9, uint16(r.IntN(1<<16))
		}
	case 6: // in IPv6, behind a hop-by-hop header
		d.UDP = &pktcraft.UDP{SrcPort: 5000, DstPort: 5001, Payload: make([]byte, 20)}
		if v6 {
			d.IPv6ExtHeaders = []pktcraft.ExtHeader{pktcraft.HopByHop()}
		}
	default:
		d.UDP = &pktcraft.UDP{SrcPort: 5000, DstPort: 5001, Payload: make([]byte, 20)}
	}
	return d
}

// loneClientFlow is a steady TCP flow of a client alone in its prefix
// (10.0.9.0/24), 1 s long from t0, with untracked datagrams from the same
// client every 3 ms. In aggregated mode the client's prefix gets its entry
// in each of the two interval maps from its first tracked packet there;
// until then its datagrams count in the backup entry. Its second interval
// opens on segments the fast path could take, which must not count in the
// flow before a tracked packet has made the entry (AGG_FOLD_READY).
func loneClientFlow(t0 int64) []timedPacket {
	const ms = int64(time.Millisecond)
	const owd = 2 * ms
	cli, srv := netip.MustParseAddr("10.0.9.1"), netip.MustParseAddr("198.51.100.7")
	var pkts []timedPacket
	for k := range 1000 {
		at := t0 + int64(k)*ms
		data := pktcraft.Packet{Src: cli, Dst: srv, TCP: &pktcraft.TCP{SrcPort: 33000, DstPort: 443, ACK: true,
			TSval: 7000 + uint32(k), TSecr: 300 + uint32(k/2), Payload: make([]byte, 1200)}}
		pkts = append(pkts, timedPacket{at, data, true})
		if k%2 == 1 {
			ack := pktcraft.Packet{Src: srv, Dst: cli, TCP: &pktcraft.TCP{SrcPort: 443, DstPort: 33000, ACK: true,
				TSval: 300 + uint32(k/2), TSecr: 7000 + uint32(k) - uint32(owd/ms)}}
			pkts = append(pkts, timedPacket{at + owd, ack, false})
		}
		if k%3 == 0 {
			d := pktcraft.Packet{Src: cli, Dst: srv, UDP: &pktcraft.UDP{SrcPort: 6000, DstPort: 6001, Payload: make([]byte, 30)}}
			pkts = append(pkts, timedPacket{at + ms/2, d, true})
		}
	}
	return pkts
}

// TestFastPathTakesSteadyFlows: in mid-stream IPv4 TCP flows (either end's
// address and port the lower, VLAN-tagged, with IP options, with ECN)
// nearly every segment takes the fast path at the monitor's defaults: all
// but each flow's first packets, its timestamped segments (one per
// direction and rate-limit interval) and the ACKs that match them. In
// aggregated mode every packet the fast path takes is folded (each
// direction sends packets of one kind: bpf/agg_fold.h). On the tc
// programs, as TestFastPathSameOutput.
func TestFastPathTakesSteadyFlows(t *testing.T) {
	testutil.RequireRoot(t)
	t.Setenv(kernel.DisableEnv, "xdp_test_run_meta")
	const start = int64(1_770_000_000_000_000_000)
	const ms = int64(time.Millisecond)
	flows := []struct {
		cli, srv     string
		cport, sport uint16
		vlan         bool
		ipOpts       bool
		ecn          bool // data ECT(0), ACKs Not-ECT (RFC 3168, 6.1.4)
	}{
		{"10.0.3.1", "198.51.100.9", 40000, 443, false, false, false},
		{"10.0.3.2", "198.51.100.9", 80, 40001, false, false, true},
		{"203.0.113.5", "10.0.3.3", 40002, 443, false, false, false},
		{"203.0.113.6", "10.0.3.4", 22, 40003, true, false, true},
		{"10.0.3.5", "10.0.3.5", 40004, 40005, false, true, false},
	}
	var pkts []timedPacket
	for f, fl := range flows {
		cli, srv := netip.MustParseAddr(fl.cli), netip.MustParseAddr(fl.srv)
		var vlans []uint16
		if fl.vlan {
			vlans = []uint16{7}
		}
		var opts []byte
		if fl.ipOpts {
			opts = pktcraft.IPv4OptRouterAlert()
		}
		for k := range 200 {
			at := start + int64(f)*ms/3 + int64(k)*2*ms
			tsv := 5000 + uint32(k*2)
			data := pktcraft.Packet{Src: cli, Dst: srv, VLANs: vlans, IPv4Options: opts, TCP: &pktcraft.TCP{
				SrcPort: fl.cport, DstPort: fl.sport, ACK: true, Seq: uint32(k * 1000), TSval: tsv, TSecr: 900 + uint32(k), Payload: make([]byte, 1000)}}
			if fl.ecn {
				data.TOS = 2
			}
			pkts = append(pkts, timedPacket{at, data, true})
			if k%2 == 1 {
				ack := pktcraft.Packet{Src: srv, Dst: cli, VLANs: vlans, IPv4Options: opts, TCP: &pktcraft.TCP{
					SrcPort: fl.sport, DstPort: fl.cport, ACK: true, Ack: uint32(k*1000 + 1000), TSval: 901 + uint32(k), TSecr: tsv}}
				pkts = append(pkts, timedPacket{at + 5*ms, ack, false})
			}
		}
	}
	path := filepath.Join(t.TempDir(), "steady.pcapng")
	if err := capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet}, timedFrames(pkts)); err != nil {
		t.Fatal(err)
	}
	cfg := loader.DefaultConfig()
	cfg.FlowMapSize, cfg.TimestampMapSize = 4096, 8192
	b, _, err := replayFile(t, path, "jsonl", replay.Options{BPF: cfg, Workers: 1, Stats: true})
	if err != nil {
		t.Fatal(err)
	}
	out, n := withoutFastPathCount(t, string(b))
	if samples := strings.Count(out, `"rtt":`); samples < 3*len(flows) {
		t.Errorf("%d samples from %d flows, want a few per flow:\n%s", samples, len(flows), out)
	}
	if n.fast < uint64(len(pkts))*9/10 {
		t.Errorf("%d of %d packets took the fast path, want at least 90 %%", n.fast, len(pkts))
	}
	t.Logf("%d of %d packets took the fast path", n.fast, len(pkts))

	cfg.Aggregate = true
	b, _, err = replayFile(t, path, "jsonl", replay.Options{BPF: cfg, Workers: 1, Stats: true,
		Report: sampling.Report{AggregateInterval: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	_, n = withoutFastPathCount(t, string(b))
	if n.fast < uint64(len(pkts))*8/10 || n.folded != n.fast {
		t.Errorf("aggregated: %d of %d packets took the fast path, %d of them folded; want at least 80 %% and all", n.fast, len(pkts), n.folded)
	}
	t.Logf("aggregated: %d of %d packets took the fast path, %d folded", n.fast, len(pkts), n.folded)
}
