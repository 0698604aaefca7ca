package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/telemetry"
)

// Packet types of the TEST_RUN micro-benchmark.
const (
	CaseTCPData     = "tcp-data-ts"     // MSS data segment, TSval already seen
	CaseTCPPureACK  = "tcp-pure-ack"    // pure ACK, TSecr matches nothing
	CaseICMPEcho    = "icmp-echo"       // ICMP echo request, seq already seen
	CaseIPv6ExtData = "ipv6-ext-tcp-ts" // IPv6 + hop-by-hop + dest opts + TCP data
	CaseNonIP       = "non-ip-arp"      // ARP frame
	CaseTCPNewTS    = "tcp-data-new-ts" // data segment with a new TSval: stored
	CaseTCPACKMatch = "tcp-ack-match"   // ACK echoing a stored TSval: RTT event
	// CaseStatsOn is tcp-data-ts again with bpf_stats switched on for the
	// call: its empty program, compared with the empty program of
	// tcp-data-ts, is what the accounting adds to every run.
	CaseStatsOn = "tcp-data-ts+bpf_stats"

	// The sequence source (no timestamp option, --tcp-mode auto).
	CaseSeqPureACK = "tcp-pure-ack-seq"    // pure ACK, nothing timed the other way
	CaseSeqRexmit  = "tcp-data-seq-rexmit" // MSS data segment seen before: a retransmission
	CaseSeqNew     = "tcp-data-seq-new"    // data segment with a new range: timed
	CaseSeqMatch   = "tcp-ack-seq-match"   // ACK covering the timed range: RTT event
	// DNS (--dns): a query to port 53 and its response, as pairs.
	CaseDNSQuery    = "dns-query"    // UDP query with a new id: timed
	CaseDNSResponse = "dns-response" // its response: RTT event
	// CaseUDPOther is a UDP datagram to another port with --dns on:
	// what the DNS source adds to UDP traffic that is not DNS.
	CaseUDPOther = "udp-other+dns"
	// CaseQUICShort is a 1-RTT QUIC packet (short header) with --quic,
	// repeated: the same spin value, no edge (the steady state).
	CaseQUICShort = "quic-short+quic"
	// CaseHandshakeOn is tcp-data-ts on programs loaded with
	// --tcp-handshake: what the handshake source adds to the timestamp
	// path (the ACK check of every segment).
	CaseHandshakeOn = "tcp-data-ts+handshake"
	// Aggregated mode (--aggregate): what counting a packet's traffic for
	// its two prefixes and ePPing's global record adds, on tcp-data-ts
	// and on a 64-byte UDP datagram (untracked: the worst case, where the
	// default programs only parse), beside that datagram on the default
	// programs.
	CaseAggData     = "tcp-data-ts+aggregate"
	CaseUDPSmall    = "udp-64"
	CaseUDPSmallAgg = "udp-64+aggregate"
)

// packetCase is a frame run with a large repeat count. Repeating one frame
// means every run after the first sees the state the first run left, so
// these are the steady-state paths (documented per case).
type packetCase struct {
	name  string
	frame []byte
}

// Addresses of the crafted packets (the lab's client and server, though
// TEST_RUN sends nothing anywhere).
var (
	benchClient4 = netip.MustParseAddr("10.10.0.2")
	benchServer4 = netip.MustParseAddr("10.20.0.2")
	benchClient6 = netip.MustParseAddr("fd00:10::2")
	benchServer6 = netip.MustParseAddr("fd00:20::2")
)

const (
	serverPort   = 5201
	portRepeat   = 40001 // flow of the repeat cases
	portPairs    = 40002 // flow of the data/ACK pairs
	portIPv6     = 40003
	portSeq      = 40004 // flow of the sequence cases
	portSeqPairs = 40005 // flow of the sequence data/ACK pairs
	portDNS      = 40006 // client port of the DNS pairs
	dataTSval    = 1000
	mssPayload4  = 1448 // 1500 - 20 (IPv4) - 32 (TCP with TS)
	mssPayload6  = 1412 // 1500 - 40 (IPv6) - 16 (two ext headers) - 32
	echoID       = 0x5254
	pairTSvalLow = 1 << 20
)

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

func tcpFrame(src, dst netip.Addr, sport, dport uint16, ext []pktcraft.ExtHeader, seg pktcraft.TCP) ([]byte, error) {
	seg.SrcPort, seg.DstPort = sport, dport
	return pktcraft.Packet{Src: src, Dst: dst, IPv6ExtHeaders: ext, TCP: &seg, DF: src.Is4()}.Bytes()
}

// repeatCases builds the frames of the repeat-mode cases.
func repeatCases() ([]packetCase, error) {
	var cases []packetCase
	add := func(name string, b []byte, err error) error {
		if err != nil {
			return fmt.Errorf("craft %s: %w", name, err)
		}
		cases = append(cases, packetCase{name, b})
		return nil
	}
	data, err := tcpFrame(benchClient4, benchServer4, portRepeat, serverPort, nil,
		pktcraft.TCP{ACK: true, PSH: true, Seq: 1, Ack: 1, Window: 502, TSval: dataTSval, TSecr: 500, Payload: payload(mssPayload4)})
	if err := add(CaseTCPData, data, err); err != nil {
		return nil, err
	}
	// TSecr 999 was never sent: the lookup misses while the data
	// packet's timestamp stays outstanding.
	ack, err := tcpFrame(benchServer4, benchClient4, serverPort, portRepeat, nil,
		pktcraft.TCP{ACK: true, Seq: 1, Ack: 1 + mssPayload4, Window: 502, TSval: 600, TSecr: dataTSval - 1})
	if err := add(CaseTCPPureACK, ack, err); err != nil {
		return nil, err
	}
	echo, err := pktcraft.Packet{Src: benchClient4, Dst: benchServer4, DF: true,
		ICMPEcho: &pktcraft.ICMPEcho{ID: echoID, Seq: 1, Payload: payload(56)}}.Bytes()
	if err := add(CaseICMPEcho, echo, err); err != nil {
		return nil, err
	}
	v6, err := tcpFrame(benchClient6, benchServer6, portIPv6, serverPort,
		[]pktcraft.ExtHeader{pktcraft.HopByHop(), pktcraft.DestOpts()},
		pktcraft.TCP{ACK: true, PSH: true, Seq: 1, Ack: 1, Window: 502, TSval: dataTSval, TSecr: 500, Payload: payload(mssPayload6)})
	if err := add(CaseIPv6ExtData, v6, err); err != nil {
		return nil, err
	}
	seqACK, err := tcpFrame(benchServer4, benchClient4, serverPort, portSeq, nil,
		pktcraft.TCP{ACK: true, Seq: 1, Ack: 1 + mssPayload4, Window: 502, NoTimestamp: true})
	if err := add(CaseSeqPureACK, seqACK, err); err != nil {
		return nil, err
	}
	seqData, err := tcpFrame(benchClient4, benchServer4, portSeq, serverPort, nil,
		pktcraft.TCP{ACK: true, PSH: true, Seq: 1, Ack: 1, Window: 502, NoTimestamp: true, Payload: payload(mssPayload4 + 12)})
	if err := add(CaseSeqRexmit, seqData, err); err != nil {
		return nil, err
	}
	arp := make([]byte, 28)
	copy(arp, []byte{0, 1, 8, 0, 6, 4, 0, 1}) // Ethernet/IPv4 request
	nonIP, err := pktcraft.Packet{EtherType: pktcraft.EtherTypeARP, L3Payload: arp}.Bytes()
	if err := add(CaseNonIP, nonIP, err); err != nil {
		return nil, err
	}
	return cases, nil
}

// pairCases are the data/ACK pairs: TCP timestamps, and sequence numbers.
// config names the programs of sourceConfigs they run on ("": the main
// ones).
var pairCases = []struct {
	data, ack string
	frames    func(id uint32) (data, ack []byte, err error)
	config    string
}{
	{CaseTCPNewTS, CaseTCPACKMatch, pairFrames, ""},
	{CaseSeqNew, CaseSeqMatch, seqPairFrames, ""},
	{CaseDNSQuery, CaseDNSResponse, dnsPairFrames, "dns"},
}

// dnsPairFrames returns a DNS query (A example.com) with id and its
// response, client port 40006 to port 53.
func dnsPairFrames(id uint32) (query, response []byte, err error) {
	msg := func(flags uint16, answer int) []byte {
		b := []byte{byte(id >> 8), byte(id), byte(flags >> 8), byte(flags), 0, 1, 0, 0, 0, 0, 0, 0,
			7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1}
		return append(b, payload(answer)...)
	}
	query, err = pktcraft.Packet{Src: benchClient4, Dst: benchServer4,
		UDP: &pktcraft.UDP{SrcPort: portDNS, DstPort: 53, Payload: msg(0x0100, 0)}}.Bytes()
	if err != nil {
		return nil, nil, err
	}
	response, err = pktcraft.Packet{Src: benchServer4, Dst: benchClient4,
		UDP: &pktcraft.UDP{SrcPort: 53, DstPort: portDNS, Payload: msg(0x8180, 16)}}.Bytes()
	return query, response, err
}

// seqPairFrames returns a data segment without timestamps ending at a new
// sequence number and the pure ACK that covers it, on the sequence pairs
// flow.
func seqPairFrames(id uint32) (data, ack []byte, err error) {
	const n = mssPayload4 + 12
	seq := id * n
	data, err = tcpFrame(benchClient4, benchServer4, portSeqPairs, serverPort, nil,
		pktcraft.TCP{ACK: true, PSH: true, Seq: seq, Ack: 1, Window: 502, NoTimestamp: true, Payload: payload(n)})
	if err != nil {
		return nil, nil, err
	}
	ack, err = tcpFrame(benchServer4, benchClient4, serverPort, portSeqPairs, nil,
		pktcraft.TCP{ACK: true, Seq: 1, Ack: seq + n, Window: 502, NoTimestamp: true})
	return data, ack, err
}

// pairFrames returns a data segment carrying tsval and the pure ACK that
// echoes it, on the pairs flow.
func pairFrames(tsval uint32) (data, ack []byte, err error) {
	data, err = tcpFrame(benchClient4, benchServer4, portPairs, serverPort, nil,
		pktcraft.TCP{ACK: true, PSH: true, Seq: tsval, Ack: 1, Window: 502, TSval: tsval, TSecr: 500, Payload: payload(mssPayload4)})
	if err != nil {
		return nil, nil, err
	}
	ack, err = tcpFrame(benchServer4, benchClient4, serverPort, portPairs, nil,
		pktcraft.TCP{ACK: true, Seq: 1, Ack: tsval + mssPayload4, Window: 502, TSval: 600, TSecr: tsval})
	return data, ack, err
}

// TestRunConfig is the BPF configuration of the TEST_RUN phase: the
// monitor's defaults with ICMP tracking on (so the echo case takes the
// ICMP path) and no rate limit (so every data/ACK pair is timestamped
// and matched, microseconds apart). The cases of other sources run on
// programs loaded with that source on as well (sourceConfigs).
func TestRunConfig() loader.Config {
	c := loader.DefaultConfig()
	c.TrackICMP = true
	c.RateLimit = 0
	return c
}

// sourceConfigs are the programs, besides TestRunConfig's, that the cases
// of sources off by default run on.
var sourceConfigs = map[string]func(*loader.Config){
	"handshake": func(c *loader.Config) { c.TrackTCPHandshake = true },
	"dns":       func(c *loader.Config) { c.TrackDNS = true },
	"quic":      func(c *loader.Config) { c.TrackQUIC = true },
	"aggregate": func(c *loader.Config) { c.Aggregate = true },
}

// extraCases run on the egress program of one of sourceConfigs (of
// TestRunConfig's programs for ""), with the empty program of tcp-data-ts
// as their baseline.
var extraCases = []struct {
	name, config string
	frame        func() ([]byte, error)
}{
	{CaseHandshakeOn, "handshake", func() ([]byte, error) {
		return tcpFrame(benchClient4, benchServer4, portRepeat, serverPort, nil,
			pktcraft.TCP{ACK: true, PSH: true, Seq: 1, Ack: 1, Window: 502, TSval: dataTSval, TSecr: 500, Payload: payload(mssPayload4)})
	}},
	{CaseQUICShort, "quic", func() ([]byte, error) {
		pl := append([]byte{0x40 | 0x20 | 0x03, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1}, payload(1200)...)
		return pktcraft.Packet{Src: benchClient4, Dst: benchServer4, DF: true,
			UDP: &pktcraft.UDP{SrcPort: portDNS, DstPort: 443, Payload: pl}}.Bytes()
	}},
	{CaseUDPOther, "dns", func() ([]byte, error) {
		return pktcraft.Packet{Src: benchClient4, Dst: benchServer4, DF: true,
			UDP: &pktcraft.UDP{SrcPort: portDNS, DstPort: 443, Payload: payload(1200)}}.Bytes()
	}},
	{CaseAggData, "aggregate", func() ([]byte, error) {
		return tcpFrame(benchClient4, benchServer4, portRepeat, serverPort, nil,
			pktcraft.TCP{ACK: true, PSH: true, Seq: 1, Ack: 1, Window: 502, TSval: dataTSval, TSecr: 500, Payload: payload(mssPayload4)})
	}},
	{CaseUDPSmall, "", smallUDPFrame},
	{CaseUDPSmallAgg, "aggregate", smallUDPFrame},
}

// smallUDPFrame is the load phase's flood datagram: 64 bytes of payload to
// a port no source tracks.
func smallUDPFrame() ([]byte, error) {
	return pktcraft.Packet{Src: benchClient4, Dst: benchServer4, DF: true,
		UDP: &pktcraft.UDP{SrcPort: portDNS, DstPort: 9, Payload: payload(64)}}.Bytes()
}

// egress is the egress program of sourceConfigs' config, or of
// TestRunConfig's programs for "".
func (t *testRunner) egress(config string) *ebpf.Program {
	if config == "" {
		return t.objs.RttscopeTcEgress
	}
	return t.src[config].RttscopeTcEgress
}

type testRunner struct {
	objs *loader.Objects
	// by sourceConfigs' names
	src   map[string]*loader.Objects
	empty probe.EmptyObjects
	rbs   []*ringbuf.Reader // of objs and of every src
	rec   ringbuf.Record
}

func newTestRunner() (*testRunner, error) {
	objs, err := loader.Load(TestRunConfig())
	if err != nil {
		return nil, err
	}
	t := &testRunner{objs: objs, src: map[string]*loader.Objects{}}
	for name, mod := range sourceConfigs {
		c := TestRunConfig()
		mod(&c)
		o, err := loader.Load(c)
		if err != nil {
			t.closeSources()
			objs.Close()
			return nil, fmt.Errorf("load the programs with %s: %w", name, err)
		}
		t.src[name] = o
	}
	if err := probe.LoadEmptyObjects(&t.empty, nil); err != nil {
		t.closeSources()
		objs.Close()
		return nil, fmt.Errorf("load empty program: %w", err)
	}
	for _, o := range append([]*loader.Objects{objs}, slices.Collect(maps.Values(t.src))...) {
		rb, err := ringbuf.NewReader(o.Events)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("open ring buffer: %w", err)
		}
		t.rbs = append(t.rbs, rb)
	}
	return t, nil
}

func (t *testRunner) Close() {
	for _, rb := range t.rbs {
		rb.Close()
	}
	t.empty.Close()
	t.closeSources()
	t.objs.Close()
}

func (t *testRunner) closeSources() {
	for _, o := range t.src {
		o.Close()
	}
}

// drain discards the events the programs produced.
func (t *testRunner) drain() (n uint64, err error) {
	for _, rb := range t.rbs {
		for rb.AvailableBytes() > 0 {
			if err := rb.ReadInto(&t.rec); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

type runProg struct {
	prog string // ProgEmpty or ProgRttscope
	hook string // "" for the empty program
	p    *ebpf.Program
}

// benchOnce runs p on frame repeat times in one BPF_PROG_TEST_RUN and
// returns the kernel's mean ns per run.
func benchOnce(p *ebpf.Program, frame []byte, repeat int) (float64, error) {
	_, d, err := p.Benchmark(frame, repeat, nil)
	if err != nil {
		return 0, err
	}
	return float64(d) / float64(time.Nanosecond), nil
}

// runTestRun is the TEST_RUN phase: every repeat case on the empty,
// egress and ingress programs, then the data/ACK pairs, once per rep.
func runTestRun(ctx context.Context, o *Options, res *Result) error {
	cases, err := repeatCases()
	if err != nil {
		return err
	}
	t, err := newTestRunner()
	if err != nil {
		return err
	}
	defer t.Close()
	progs := []runProg{
		{ProgEmpty, "", t.empty.EmptyTc},
		{ProgRttscope, "egress", t.objs.RttscopeTcEgress},
		{ProgRttscope, "ingress", t.objs.RttscopeTcIngress},
	}
	mode := fmt.Sprintf("repeat=%d", o.Repeat)

	// Warm-up, egress first: it opens the flows and stores the data
	// packets' timestamps, the state every later run finds.
	o.progress("test_run: warm-up")
	warm := max(o.Repeat/10, 1)
	for _, c := range cases {
		for _, p := range []runProg{progs[1], progs[2], progs[0]} {
			if _, err := benchOnce(p.p, c.frame, warm); err != nil {
				return fmt.Errorf("TEST_RUN %s on %s: %w", c.name, p.p, err)
			}
		}
	}
	extraFrames := make([][]byte, len(extraCases))
	for i, c := range extraCases {
		if extraFrames[i], err = c.frame(); err != nil {
			return fmt.Errorf("craft %s: %w", c.name, err)
		}
		if _, err := benchOnce(t.egress(c.config), extraFrames[i], warm); err != nil {
			return fmt.Errorf("TEST_RUN %s: %w", c.name, err)
		}
	}
	for i := range pairCases {
		if _, _, err := t.pairs(i, 0, min(o.Pairs, 100)); err != nil {
			return err
		}
	}
	if _, err := t.drain(); err != nil {
		return err
	}

	var pairsRun, pairsMatched uint64
	for rep := 0; rep < o.Reps; rep++ {
		start := time.Now()
		for _, c := range cases {
			for _, p := range rotate(progs, rep) {
				if err := ctx.Err(); err != nil {
					return err
				}
				v, err := benchOnce(p.p, c.frame, o.Repeat)
				if err != nil {
					return fmt.Errorf("TEST_RUN %s on %s: %w", c.name, p.p, err)
				}
				s := res.series(GroupTestRun, c.name, p.prog, p.hook, MetricNsPerRun, "ns", mode)
				if p.prog != ProgEmpty {
					s.Baseline = (&Series{Group: GroupTestRun, Case: c.name, Program: ProgEmpty, Metric: MetricNsPerRun}).ID()
				}
				s.Add(v)
			}
		}
		if err := statsOverhead(cases[0].frame, progs[:2], rep, o.Repeat, mode, res); err != nil {
			return err
		}
		for i, c := range extraCases {
			v, err := benchOnce(t.egress(c.config), extraFrames[i], o.Repeat)
			if err != nil {
				return fmt.Errorf("TEST_RUN %s: %w", c.name, err)
			}
			s := res.series(GroupTestRun, c.name, ProgRttscope, "egress", MetricNsPerRun, "ns", mode)
			s.Baseline = seriesID(GroupTestRun, CaseTCPData, ProgEmpty, "", MetricNsPerRun)
			s.Add(v)
		}
		if o.Pairs > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			for pc := range pairCases {
				med, matched, err := t.pairs(pc, pairTSvalLow+uint32(rep+1)*uint32(o.Pairs), o.Pairs)
				if err != nil {
					return err
				}
				pairsRun += uint64(o.Pairs)
				pairsMatched += matched
				pmode := fmt.Sprintf("single run (repeat=1), median of %d", o.Pairs)
				c := pairCases[pc]
				for i, k := range []struct{ cas, prog, hook string }{
					{c.data, ProgEmpty, ""}, {c.data, ProgRttscope, "egress"},
					{c.ack, ProgEmpty, ""}, {c.ack, ProgRttscope, "ingress"},
				} {
					s := res.series(GroupTestRun, k.cas, k.prog, k.hook, MetricNsPerRun, "ns", pmode)
					if k.prog != ProgEmpty {
						s.Baseline = (&Series{Group: GroupTestRun, Case: k.cas, Program: ProgEmpty, Metric: MetricNsPerRun}).ID()
					}
					s.Add(med[i])
				}
			}
		}
		o.progress("test_run: rep %d/%d done in %v", rep+1, o.Reps, time.Since(start).Round(time.Millisecond))
	}
	res.Checks["test_run_pairs"] = pairsRun
	res.Checks["test_run_pairs_rtt_events"] = pairsMatched
	if o.Pairs > 0 && pairsMatched != pairsRun {
		res.Notes = append(res.Notes, fmt.Sprintf(
			"test_run: only %d of %d data/ACK pairs produced an RTT event; tcp-ack-match is partly the miss path", pairsMatched, pairsRun))
	}
	return nil
}

// statsOverhead runs the empty and the egress program on the data frame
// with bpf_stats on (turned off again before it returns). The empty
// program's baseline is its run with the stats off, so the difference is
// the accounting's cost per run.
func statsOverhead(frame []byte, progs []runProg, rep, repeat int, mode string, res *Result) (err error) {
	restore, _, err := telemetry.EnableBPFStatsOrSysctl()
	if err != nil {
		return err
	}
	defer func() {
		if rerr := restore(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	for _, p := range rotate(progs, rep) {
		before, serr := p.p.Stats()
		v, err := benchOnce(p.p, frame, repeat)
		if err != nil {
			return fmt.Errorf("TEST_RUN %s with bpf_stats on %s: %w", CaseStatsOn, p.p, err)
		}
		// What bpf_stats itself reports for these runs; the empty
		// program's figure is its residual (statsresidual.go).
		if after, aerr := p.p.Stats(); serr == nil && aerr == nil && after.RunCount > before.RunCount {
			res.series(GroupTestRun, CaseStatsOn, p.prog, p.hook, MetricBPFNsPerRun, "ns", mode+", bpf_stats' own run_time_ns / run_cnt").
				Add(float64(after.Runtime-before.Runtime) / float64(after.RunCount-before.RunCount))
		}
		s := res.series(GroupTestRun, CaseStatsOn, p.prog, p.hook, MetricNsPerRun, "ns", mode+", bpf_stats on")
		if p.prog == ProgEmpty {
			s.Baseline = seriesID(GroupTestRun, CaseTCPData, ProgEmpty, "", MetricNsPerRun)
		} else {
			s.Baseline = seriesID(GroupTestRun, CaseStatsOn, ProgEmpty, "", MetricNsPerRun)
		}
		s.Add(v)
	}
	return nil
}

// pairs runs n data/ACK pairs of pairCases[pc], each frame once
// (repeat=1): the data segment carries a new identifier (stored in the
// timestamp map), the ACK answers it (matched: RTT event). The empty
// program runs on the same two frames next to them. It returns the median
// single-run ns of empty(data), egress(data), empty(ack), ingress(ack) and
// how many RTT events the ACKs produced.
func (t *testRunner) pairs(pc int, idBase uint32, n int) (med [4]float64, matched uint64, err error) {
	if n <= 0 {
		return med, 0, nil
	}
	objs := t.objs
	if c := pairCases[pc].config; c != "" {
		objs = t.src[c]
	}
	var before, after events.Stats
	if err := objs.Stats(&before); err != nil {
		return med, 0, err
	}
	vals := make([][]float64, 4)
	for i := range vals {
		vals[i] = make([]float64, 0, n)
	}
	for i := 0; i < n; i++ {
		data, ack, err := pairCases[pc].frames(idBase + uint32(i))
		if err != nil {
			return med, 0, fmt.Errorf("craft pair: %w", err)
		}
		for j, run := range []struct {
			p     *ebpf.Program
			frame []byte
		}{
			{t.empty.EmptyTc, data}, {objs.RttscopeTcEgress, data},
			{t.empty.EmptyTc, ack}, {objs.RttscopeTcIngress, ack},
		} {
			v, err := benchOnce(run.p, run.frame, 1)
			if err != nil {
				return med, 0, fmt.Errorf("TEST_RUN pair on %s: %w", run.p, err)
			}
			vals[j] = append(vals[j], v)
		}
		if i%512 == 511 {
			if _, err := t.drain(); err != nil {
				return med, 0, err
			}
		}
	}
	if err := objs.Stats(&after); err != nil {
		return med, 0, err
	}
	if _, err := t.drain(); err != nil {
		return med, 0, err
	}
	for j := range vals {
		med[j] = Median(vals[j])
	}
	return med, after.RTTEvents - before.RTTEvents, nil
}

// rotate returns progs rotated left by k, so that each configuration
// takes every position of the interleaved order in turn.
func rotate[T any](progs []T, k int) []T {
	n := len(progs)
	if n == 0 {
		return nil
	}
	k %= n
	return append(append([]T(nil), progs[k:]...), progs[:k]...)
}
