package replay

// Tests of the TCP sequence and handshake sources (bpf/id_tcp_seq.h) with
// crafted segments: every RTT is asserted to the nanosecond, with its
// source.

import (
	"slices"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// sourced is a sample with its source.
type sourced struct {
	sample
	Source events.Source
}

// checkSourced compares the collected RTT events with want (in order),
// sources included, and forgets them.
func (h *harness) checkSourced(want ...sourced) {
	h.tb.Helper()
	var got []sourced
	for _, r := range h.takeRTTs() {
		got = append(got, sourced{sample{Time: r.Time, Flow: r.Flow, RTT: r.RTT, Egress: r.MatchOnEgress}, r.Source})
	}
	if !slices.Equal(got, want) {
		h.tb.Errorf("RTT samples:\n got %s\nwant %s", fmtList(got), fmtList(want))
	}
}

// seqSample is the sample of a reply sent by b (fromA false) or a at t0+at.
func seqSample(p path, fromA bool, at int64, rtt time.Duration, src events.Source) sourced {
	return sourced{sample{Time: t0 + at, Flow: p.tcpFlow(fromA), RTT: rtt, Egress: fromA}, src}
}

// seg is a segment without the timestamp option: n bytes of payload at
// seq, acknowledging ack; extra sets more flags or options.
func (p path) seg(fromA bool, seq, ack uint32, n int, extra ...func(*pktcraft.TCP)) []byte {
	t := pktcraft.TCP{ACK: true, NoTimestamp: true, Seq: seq, Ack: ack}
	if n > 0 {
		t.PSH, t.Payload = true, payload(n)
	}
	for _, f := range extra {
		f(&t)
	}
	return p.tcp(fromA, t)
}

func withSACK(blocks ...[2]uint32) func(*pktcraft.TCP) {
	return func(t *pktcraft.TCP) { t.ExtraOptions = pktcraft.Opts([]byte{1, 1}, pktcraft.OptSACK(blocks...)) }
}

func fin(t *pktcraft.TCP) { t.FIN = true }

// seqConfig samples every range (no rate limit) in the given mode.
func seqConfig(mode loader.TCPMode) loader.Config {
	c := testConfig()
	c.RateLimit = 0
	c.TCPMode = mode
	return c
}

// seqPaths are the paths of the sequence tests: both halves of the flow
// key, both families.
var seqPaths = []struct {
	name string
	p    path
}{{"ipv4", pathV4}, {"ipv4-a-after-b", pathV4Swapped}, {"ipv6", pathV6}}

// TestSeqMatch: a segment without timestamps is timed by its end sequence
// and the first ACK of the other side that reaches it gives the sample,
// exactly; both directions, with data, a cumulative ACK covering two
// segments (timed from the first: one range at a time), a partial ACK that
// does not, a FIN counting one, and duplicates of the ACK that give
// nothing more.
func TestSeqMatch(t *testing.T) {
	for _, pc := range seqPaths {
		p := pc.p
		t.Run(pc.name, func(t *testing.T) {
			h := newHarness(t, seqConfig(loader.TCPAuto))
			h.run([]step{
				{0, p.seg(true, 1000, 5000, 100), true},            // timed: end 1100
				{10_000_007, p.seg(false, 5000, 1100, 0), false},   // sample 10.000007 ms
				{10_000_008, p.seg(false, 5000, 1100, 0), false},   // duplicate ACK: nothing
				{20 * ms, p.seg(false, 5000, 1100, 300), false},    // b's data, timed: end 5300
				{20*ms + 1, p.seg(true, 1100, 5000, 50), true},     // a's data: timed, acks nothing new
				{25 * ms, p.seg(true, 1150, 5300, 0), true},        // a acks b's data: 5 ms
				{30 * ms, p.seg(true, 1150, 5300, 100), true},      // not timed: 1100-1150 is
				{35 * ms, p.seg(false, 5300, 1120, 0), false},      // partial ACK: nothing
				{40 * ms, p.seg(false, 5300, 1250, 0), false},      // covers 1150 and 1250: 20 ms - 1 ns
				{50 * ms, p.seg(true, 1250, 5300, 0, fin), true},   // FIN: end 1251
				{61 * ms, p.seg(false, 5300, 1251, 0), false},      // 11 ms
				{62 * ms, p.seg(false, 5300, 1251, 0, fin), false}, // b's FIN: the flow ends
			})
			h.checkSourced(
				seqSample(p, false, 10_000_007, 10_000_007, events.SourceTCPSeq),
				seqSample(p, true, 25*ms, 5*time.Millisecond, events.SourceTCPSeq),
				seqSample(p, false, 40*ms, 20*time.Millisecond-1, events.SourceTCPSeq),
				seqSample(p, false, 61*ms, 11*time.Millisecond, events.SourceTCPSeq),
			)
			s := h.stats()
			if s.Samples[events.SourceTCPSeq] != 4 || s.RTTEvents != 4 || s.TCPSeqRetransmissions != 0 || s.Flows != 0 {
				t.Errorf("stats %+v: want 4 tcp_seq samples, no retransmission, the flow closed", s)
			}
		})
	}
}

// TestSeqKarn: a range retransmitted before it was acknowledged gives no
// sample (the ACK may answer either copy), and neither does the ACK that
// follows the retransmission of a hole before the timed range (it waited
// for the hole: post-loss); new data sent after the retransmission is timed
// again. Duplicate ACKs and ACKs that only add SACK blocks never sample.
func TestSeqKarn(t *testing.T) {
	for _, pc := range seqPaths {
		p := pc.p
		t.Run(pc.name, func(t *testing.T) {
			h := newHarness(t, seqConfig(loader.TCPAuto))
			h.run([]step{
				// Retransmitted timed range: ambiguous.
				{0, p.seg(true, 1000, 1, 100), true},
				{200 * ms, p.seg(true, 1000, 1, 100), true}, // RTO: timing dropped
				{210 * ms, p.seg(false, 1, 1100, 0), false}, // nothing
				{220 * ms, p.seg(true, 1100, 1, 100), true}, // new data: timed (end 1200)
				{230 * ms, p.seg(false, 1, 1200, 0), false}, // 10 ms
				// A hole before the timed range.
				{300 * ms, p.seg(true, 1200, 1, 100), true},                                  // timed: end 1300
				{301 * ms, p.seg(true, 1300, 1, 100), true},                                  // not timed (1300 is)
				{310 * ms, p.seg(false, 1, 1300, 0), false},                                  // 10 ms
				{311 * ms, p.seg(true, 1400, 1, 100), true},                                  // timed: end 1500
				{320 * ms, p.seg(false, 1, 1300, 0, withSACK([2]uint32{1400, 1500})), false}, // SACK only: nothing
				{321 * ms, p.seg(false, 1, 1300, 0, withSACK([2]uint32{1400, 1500})), false}, // duplicate: nothing
				{330 * ms, p.seg(true, 1300, 1, 100), true},                                  // fast retransmit of the hole
				{340 * ms, p.seg(false, 1, 1500, 0), false},                                  // post-loss: nothing
				{350 * ms, p.seg(true, 1500, 1, 100), true},                                  // new data: timed
				{360 * ms, p.seg(false, 1, 1550, 0, withSACK([2]uint32{1400, 1500})), false}, // partial: nothing
				{370*ms + 3, p.seg(false, 1, 1600, 0), false},                                // 20 ms + 3 ns
				{380 * ms, p.seg(true, 1550, 1, 50), true},                                   // retransmission, nothing timed
			})
			h.checkSourced(
				seqSample(p, false, 230*ms, 10*time.Millisecond, events.SourceTCPSeq),
				seqSample(p, false, 310*ms, 10*time.Millisecond, events.SourceTCPSeq),
				seqSample(p, false, 370*ms+3, 20*time.Millisecond+3, events.SourceTCPSeq),
			)
			s := h.stats()
			if s.TCPSeqRetransmissions != 3 || s.TCPSeqAmbiguous != 2 || s.Timestamps != 0 {
				t.Errorf("stats %+v: want 3 retransmissions, 2 timings dropped, no timestamp left", s)
			}
		})
	}
}

// TestSeqWrap: sequence numbers wrap through 2^32: a range that ends past
// the wrap is acknowledged by an ACK below it, an ACK before the wrap does
// not reach it, and a range after the wrap is new data.
func TestSeqWrap(t *testing.T) {
	p := pathV4
	h := newHarness(t, seqConfig(loader.TCPAuto))
	h.run([]step{
		{0, p.seg(true, 0xffffff00, 7, 0x200), true},      // end 0x100
		{5 * ms, p.seg(false, 7, 0xffffff80, 0), false},   // before the end: nothing
		{9 * ms, p.seg(false, 7, 0x100, 0), false},        // 9 ms
		{10 * ms, p.seg(true, 0x100, 7, 100), true},       // new data after the wrap
		{12 * ms, p.seg(false, 7, 0x164, 0), false},       // 2 ms
		{13 * ms, p.seg(true, 0xfffffff0, 7, 0x10), true}, // old data before the wrap: a retransmission
		{14 * ms, p.seg(false, 7, 0x164, 0), false},       // nothing
	})
	h.checkSourced(
		seqSample(p, false, 9*ms, 9*time.Millisecond, events.SourceTCPSeq),
		seqSample(p, false, 12*ms, 2*time.Millisecond, events.SourceTCPSeq),
	)
	if s := h.stats(); s.TCPSeqRetransmissions != 1 {
		t.Errorf("stats %+v: want the old segment counted as a retransmission", s)
	}
}

// TestSeqReordering: segments reordered before the observer look like a
// retransmission (their sequence numbers are below the highest sent): the
// timing they overlap is dropped rather than sampled wrong.
func TestSeqReordering(t *testing.T) {
	p := pathV6
	h := newHarness(t, seqConfig(loader.TCPAuto))
	h.run([]step{
		{0, p.seg(true, 2100, 1, 100), true},       // seen first: timed, end 2200
		{1, p.seg(true, 2000, 1, 100), true},       // sent first, seen second
		{10 * ms, p.seg(false, 1, 2200, 0), false}, // nothing
		{11 * ms, p.seg(true, 2200, 1, 100), true}, // timed
		{21 * ms, p.seg(false, 1, 2300, 0), false}, // 10 ms
	})
	h.checkSourced(seqSample(p, false, 21*ms, 10*time.Millisecond, events.SourceTCPSeq))
	if s := h.stats(); s.TCPSeqRetransmissions != 1 || s.TCPSeqAmbiguous != 1 {
		t.Errorf("stats %+v: want 1 retransmission, 1 timing dropped", s)
	}
}

// TestSeqGRO: a segment that GRO aggregated (or TSO has not split yet) is
// one range: an ACK inside it does not sample, the ACK of its end does.
// The test run takes at most a page of packet, so the frame holds the
// headers and the IP length says 44 full-sized segments, as an skb whose
// payload is in pages shows itself to the program.
func TestSeqGRO(t *testing.T) {
	const big = 44 * 1448
	for _, pc := range seqPaths {
		p := pc.p
		t.Run(pc.name, func(t *testing.T) {
			f := p.tcpPacket(true, pktcraft.TCP{ACK: true, NoTimestamp: true, Seq: 1, Ack: 1, Payload: payload(big)}).MustBuild()
			h := newHarness(t, seqConfig(loader.TCPAuto))
			h.run([]step{
				{0, pktcraft.Truncate(f.Data, f.Payload+100), true},
				{5 * ms, p.seg(false, 1, 1+20*1448, 0), false},
				{8 * ms, p.seg(false, 1, 1+big, 0), false},
			})
			h.checkSourced(seqSample(p, false, 8*ms, 8*time.Millisecond, events.SourceTCPSeq))
		})
	}
}

// TestSeqRateLimit: the rate limit applies as to timestamps: one range per
// direction per 100 ms (ePPing's default), the first range after it.
func TestSeqRateLimit(t *testing.T) {
	p := pathV4
	c := testConfig() // 100 ms, auto
	h := newHarness(t, c)
	var steps []step
	var want []sourced
	for i := range int64(25) {
		seq := uint32(1 + 100*i)
		at := i * 10 * ms
		steps = append(steps, step{at, p.seg(true, seq, 1, 100), true}, step{at + 3*ms, p.seg(false, 1, seq+100, 0), false})
		if i%10 == 0 { // at 0, 100 and 200 ms
			want = append(want, seqSample(p, false, at+3*ms, 3*time.Millisecond, events.SourceTCPSeq))
		}
	}
	h.run(steps)
	h.checkSourced(want...)
}

// TestTCPModes: which source a segment gives in each mode. A flow with
// timestamps gives tcp_ts samples in auto and ts mode and tcp_seq ones in
// seq mode; a flow without gives tcp_seq samples in auto and seq mode and
// none in ts mode.
func TestTCPModes(t *testing.T) {
	p := pathV4
	withTS := []step{
		{0, p.tcp(true, pktcraft.TCP{ACK: true, PSH: true, Seq: 1, Ack: 1, TSval: 10, TSecr: 1, Payload: payload(100)}), true},
		{7 * ms, p.tcp(false, pktcraft.TCP{ACK: true, Seq: 1, Ack: 101, TSval: 2, TSecr: 10}), false},
	}
	without := []step{
		{0, p.seg(true, 1, 1, 100), true},
		{7 * ms, p.seg(false, 1, 101, 0), false},
	}
	for _, c := range []struct {
		name  string
		mode  loader.TCPMode
		steps []step
		want  []events.Source
	}{
		{"auto/timestamps", loader.TCPAuto, withTS, []events.Source{events.SourceTCPTS}},
		{"auto/none", loader.TCPAuto, without, []events.Source{events.SourceTCPSeq}},
		{"ts/timestamps", loader.TCPTimestamps, withTS, []events.Source{events.SourceTCPTS}},
		{"ts/none", loader.TCPTimestamps, without, nil},
		{"seq/timestamps", loader.TCPSequence, withTS, []events.Source{events.SourceTCPSeq}},
		{"seq/none", loader.TCPSequence, without, []events.Source{events.SourceTCPSeq}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, seqConfig(c.mode))
			h.run(c.steps)
			var want []sourced
			for _, src := range c.want {
				want = append(want, seqSample(p, false, 7*ms, 7*time.Millisecond, src))
			}
			h.checkSourced(want...)
			s := h.stats()
			for _, src := range c.want {
				if s.Samples[src] != 1 {
					t.Errorf("samples per source %v: want 1 %v", s.Samples, src)
				}
			}
		})
	}
}

// TestSeqAutoMode: in auto mode a segment whose timestamp option cannot be
// read (a malformed option) is timed by its sequence numbers instead.
func TestSeqAutoMode(t *testing.T) {
	p := pathV4
	bad := p.tcp(true, pktcraft.TCP{ACK: true, Seq: 1, Ack: 1, RawOptions: pktcraft.Opts([]byte{pktcraft.OptEOL}, []byte{1, 1},
		pktcraft.OptTimestamp(5, 0)), Payload: payload(20)})
	h := newHarness(t, seqConfig(loader.TCPAuto))
	h.run([]step{{0, bad, true}, {3 * ms, p.seg(false, 1, 21, 0), false}})
	h.checkSourced(seqSample(p, false, 3*ms, 3*time.Millisecond, events.SourceTCPSeq))
}

// TestSeqTruncated: a capture with a small snap length keeps the TCP header
// but cuts the options and payload: the IP length still says how much
// sequence space the segment took, so it is timed.
func TestSeqTruncated(t *testing.T) {
	p := pathV4
	f := p.tcpPacket(true, pktcraft.TCP{ACK: true, PSH: true, Seq: 1, Ack: 1, TSval: 10, Payload: payload(500)}).MustBuild()
	h := newHarness(t, seqConfig(loader.TCPAuto))
	h.run([]step{{0, pktcraft.Truncate(f.Data, f.L4+20), true}, {4 * ms, p.seg(false, 1, 501, 0), false}})
	h.checkSourced(seqSample(p, false, 4*ms, 4*time.Millisecond, events.SourceTCPSeq))
}

// handshake is a three-way handshake, a opening: SYN at 0, SYN-ACK at 20
// ms, ACK at 20.5 ms, with or without timestamps; retransmissions of the
// SYN (synRTO) or the SYN-ACK (synAckRTO) after 1 s.
func handshake(p path, ts bool, synRTO, synAckRTO bool) []step {
	seg := func(fromA bool, t pktcraft.TCP, tsval, tsecr uint32) []byte {
		t.NoTimestamp = !ts
		t.TSval, t.TSecr = tsval, tsecr
		return p.tcp(fromA, t)
	}
	syn := seg(true, pktcraft.TCP{SYN: true, Seq: 100, ExtraOptions: pktcraft.OptMSS(1460)}, 1000, 0)
	synAck := seg(false, pktcraft.TCP{SYN: true, ACK: true, Seq: 900, Ack: 101, ExtraOptions: pktcraft.OptMSS(1460)}, 5000, 1000)
	steps := []step{{0, syn, true}}
	at := int64(0)
	if synRTO {
		at = 1000 * ms
		steps = append(steps, step{at, syn, true})
	}
	steps = append(steps, step{at + 20*ms, synAck, false})
	if synAckRTO {
		at += 1000 * ms
		steps = append(steps, step{at + 20*ms, synAck, false})
	}
	return append(steps,
		step{at + 20500*int64(time.Microsecond), seg(true, pktcraft.TCP{ACK: true, Seq: 101, Ack: 901}, 1001, 5000), true},
		step{at + 21*ms, seg(true, pktcraft.TCP{ACK: true, PSH: true, Seq: 101, Ack: 901, Payload: payload(100)}, 1002, 5000), true},
		step{at + 41*ms, seg(false, pktcraft.TCP{ACK: true, Seq: 901, Ack: 201}, 5001, 1002), false},
	)
}

// TestHandshake: SYN -> SYN-ACK gives the far side's RTT (reply b->a),
// SYN-ACK -> ACK the near side's (reply a->b), labelled tcp_syn, with and
// without timestamps; the SYN opens the flow. A retransmitted SYN or
// SYN-ACK gives no sample of its own. The data after the handshake gives
// the mode's samples (tcp_ts or tcp_seq); with the handshake source alone,
// none.
func TestHandshake(t *testing.T) {
	const us = int64(time.Microsecond)
	for _, ts := range []bool{true, false} {
		name := map[bool]string{true: "timestamps", false: "no-timestamps"}[ts]
		dataSrc := map[bool]events.Source{true: events.SourceTCPTS, false: events.SourceTCPSeq}[ts]
		for _, p := range []path{pathV4, pathV6Swapped} {
			cfg := seqConfig(loader.TCPAuto)
			cfg.TrackTCPHandshake = true
			t.Run(name+"/"+p.a.ip.String(), func(t *testing.T) {
				h := newHarness(t, cfg)
				h.run(handshake(p, ts, false, false))
				h.checkSourced(
					seqSample(p, false, 20*ms, 20*time.Millisecond, events.SourceTCPSYN),
					seqSample(p, true, 20500*us, 500*time.Microsecond, events.SourceTCPSYN),
					seqSample(p, false, 41*ms, 20*time.Millisecond, dataSrc),
				)
				h.checkFlows(opening(t0, p.tcpFlow(true), events.ReasonSYN, true))
				if s := h.stats(); s.Samples[events.SourceTCPSYN] != 2 || s.Samples[dataSrc] != 1 {
					t.Errorf("samples per source %v", s.Samples)
				}
			})
			t.Run(name+"/syn-retransmitted/"+p.a.ip.String(), func(t *testing.T) {
				h := newHarness(t, cfg)
				h.run(handshake(p, ts, true, false))
				h.checkSourced(
					seqSample(p, true, 1020500*us, 500*time.Microsecond, events.SourceTCPSYN),
					seqSample(p, false, 1041*ms, 20*time.Millisecond, dataSrc),
				)
			})
			t.Run(name+"/syn-ack-retransmitted/"+p.a.ip.String(), func(t *testing.T) {
				h := newHarness(t, cfg)
				h.run(handshake(p, ts, false, true))
				h.checkSourced(
					seqSample(p, false, 20*ms, 20*time.Millisecond, events.SourceTCPSYN),
					seqSample(p, false, 1041*ms, 20*time.Millisecond, dataSrc),
				)
			})
			t.Run(name+"/handshake-only/"+p.a.ip.String(), func(t *testing.T) {
				c := cfg
				c.TrackTCP = false
				h := newHarness(t, c)
				h.run(handshake(p, ts, false, false))
				h.checkSourced(
					seqSample(p, false, 20*ms, 20*time.Millisecond, events.SourceTCPSYN),
					seqSample(p, true, 20500*us, 500*time.Microsecond, events.SourceTCPSYN),
				)
			})
		}
	}
	// Without the handshake source, the SYN opens no flow (ePPing's rule)
	// and the handshake gives no sample.
	t.Run("off", func(t *testing.T) {
		h := newHarness(t, seqConfig(loader.TCPAuto))
		h.run(handshake(pathV4, false, false, false))
		h.checkSourced(seqSample(pathV4, false, 41*ms, 20*time.Millisecond, events.SourceTCPSeq))
	})
}

// mixedSources is a handshake without timestamps (two tcp_syn samples),
// two tcp_seq samples of a's data, one of b's, and the FINs of both sides.
func mixedSources(p path) []step {
	return append(handshake(p, false, false, false),
		step{50 * ms, p.seg(true, 201, 901, 100), true},
		step{60 * ms, p.seg(false, 901, 301, 10), false}, // a's range: 10 ms; b's: timed
		step{61 * ms, p.seg(true, 301, 911, 0), true},    // b's range: 1 ms
		step{70 * ms, p.seg(true, 301, 911, 0, fin), true},
		step{75 * ms, p.seg(false, 911, 302, 0, fin), false}, // a's FIN: 5 ms; the flow ends
	)
}

// TestSourcesInAggregatesAndSummaries: aggregated records and flow
// summaries count the samples of each source.
func TestSourcesInAggregatesAndSummaries(t *testing.T) {
	p := pathV4
	t.Run("aggregate", func(t *testing.T) {
		cfg := aggConfig()
		cfg.TrackTCPHandshake = true
		h := newAggHarness(t, cfg, time.Second)
		for _, s := range mixedSources(p) {
			h.feed(s.frame, t0+s.at, s.egress)
		}
		if err := h.a.Finish(); err != nil {
			t.Fatal(err)
		}
		var by [events.NumSources]uint64
		var n uint64
		for _, r := range h.recs {
			n += r.Count
			for i, c := range r.BySource {
				by[i] += c
			}
		}
		want := [events.NumSources]uint64{events.SourceTCPSYN: 2, events.SourceTCPSeq: 4}
		if by != want || n != 6 {
			t.Errorf("aggregated samples %d by source %v, want 6: %v", n, by, want)
		}
	})
	t.Run("flow-summary", func(t *testing.T) {
		cfg := seqConfig(loader.TCPAuto)
		cfg.TrackTCPHandshake, cfg.FlowSummary = true, true
		h := newHarness(t, cfg)
		sums, err := h.e.Objects().NewSummaries(0)
		if err != nil {
			t.Fatal(err)
		}
		defer sums.Close()
		h.run(mixedSources(p))
		var got []events.FlowSummary
		if err := sums.Drain(func(s *events.FlowSummary) error { got = append(got, *s); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%d summaries, want 1", len(got))
		}
		// Src is a, the opener: its SYN, two data ranges and its FIN,
		// answered by b; Dst is b: its SYN-ACK and its data.
		wantA := [events.NumSources]uint64{events.SourceTCPSYN: 1, events.SourceTCPSeq: 3}
		wantB := [events.NumSources]uint64{events.SourceTCPSYN: 1, events.SourceTCPSeq: 1}
		if s := got[0]; s.Src.BySource != wantA || s.Dst.BySource != wantB || s.Src.Count != 4 || s.Dst.Count != 2 {
			t.Errorf("summary by source: src %v (n=%d), dest %v (n=%d); want %v, %v",
				s.Src.BySource, s.Src.Count, s.Dst.BySource, s.Dst.Count, wantA, wantB)
		}
	})
}
