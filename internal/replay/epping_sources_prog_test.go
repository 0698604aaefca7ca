package replay

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// Where ePPing's rules meet the sources it does not have (docs/epping.md,
// "RTT sources"): --tcp-mode auto, the default, measures TCP without
// timestamps, and ePPing's counters and classes keep their meaning there.

func rst(t *pktcraft.TCP) { t.RST = true }

// TestSeqFlowCounters: in a flow without timestamps, measured by sequence
// numbers, ePPing's counters follow ePPing's rule with the sequence
// source's identifiers: every segment counts (each carries a sequence or
// an ACK), from its direction's first timed segment on, bytes are payload.
func TestSeqFlowCounters(t *testing.T) {
	for _, pc := range seqPaths {
		p := pc.p
		t.Run(pc.name, func(t *testing.T) {
			h := newHarness(t, seqConfig(loader.TCPAuto))
			h.run([]step{
				{0, p.seg(true, 1000, 5000, 100), true},       // a active, timed: end 1100
				{10 * ms, p.seg(false, 5000, 1100, 0), false}, // sample of a's
				{20 * ms, p.seg(false, 5000, 1100, 300), false},
				{25 * ms, p.seg(true, 1100, 5300, 0), true}, // sample of b's
				{30 * ms, p.seg(true, 1100, 5300, 50), true},
				{40 * ms, p.seg(false, 5300, 1150, 0), false}, // sample of a's
			})
			type counters struct{ sp, sb, rp, rb uint64 }
			want := []counters{
				{1, 100, 1, 0}, // a's data; b's ACK
				{1, 300, 1, 0}, // b's data; a's ACK, since b became active
				{3, 150, 3, 300},
			}
			rtts := h.takeRTTs()
			if len(rtts) != len(want) {
				t.Fatalf("%d samples, want %d: %+v", len(rtts), len(want), rtts)
			}
			for i, r := range rtts {
				got := counters{r.SentPackets, r.SentBytes, r.RecPackets, r.RecBytes}
				if got != want[i] || r.Source != events.SourceTCPSeq {
					t.Errorf("sample %d: %s counters %+v, want tcp_seq %+v", i, r.Source, got, want[i])
				}
			}
		})
	}
}

// TestAutoModeRST: in auto mode a RST without the timestamp option is
// ignored in a flow measured by timestamps, as ePPing ignores it (it
// neither counts nor closes), and closes a flow measured by sequence
// numbers.
func TestAutoModeRST(t *testing.T) {
	p := pathV4
	t.Run("timestamps", func(t *testing.T) {
		h := newHarness(t, seqConfig(loader.TCPAuto))
		h.run([]step{
			{0, p.data(true, 1, 0, 100), true},
			{10 * ms, p.ack(false, 7, 1), false},
			{20 * ms, p.seg(false, 5000, 1100, 0, rst), false},
			{30 * ms, p.data(true, 2, 7, 100), true},
			{40 * ms, p.ack(false, 8, 2), false},
		})
		rtts := h.takeRTTs()
		if len(rtts) != 2 || rtts[1].RecPackets != 2 || rtts[1].SentPackets != 2 || rtts[1].Source != events.SourceTCPTS {
			t.Fatalf("samples %+v: want 2 tcp_ts, the second with 2 packets each way (the RST not counted)", rtts)
		}
		h.checkFlows(opening(t0, p.tcpFlow(false), events.ReasonFirstObserved, false))
		if s := h.stats(); s.Flows != 1 {
			t.Errorf("%d flows: the RST closed the flow", s.Flows)
		}
	})
	t.Run("sequence", func(t *testing.T) {
		h := newHarness(t, seqConfig(loader.TCPAuto))
		h.run([]step{
			{0, p.seg(true, 1000, 5000, 100), true},
			{10 * ms, p.seg(false, 5000, 1100, 0), false},
			{20 * ms, p.seg(true, 1100, 5000, 100), true}, // b's side stays inactive
			{30 * ms, p.seg(false, 5000, 1100, 0, rst), false},
		})
		if rtts := h.takeRTTs(); len(rtts) != 1 || rtts[0].Source != events.SourceTCPSeq {
			t.Errorf("samples %+v: want one tcp_seq", rtts)
		}
		h.checkFlows(opening(t0, p.tcpFlow(false), events.ReasonFirstObserved, false),
			closing(t0+30*ms, p.tcpFlow(false), events.ReasonRST, true))
		if s := h.stats(); s.Flows != 0 {
			t.Errorf("%d flows: the RST did not close the flow", s.Flows)
		}
	})
}

// TestAutoModeAggregateClasses: the segments of a flow without timestamps
// are ePPing's TCP_noTS class, also when the sequence source measures them
// (and they create the prefix's entry: no backup entry is used); those of
// a flow with timestamps TCP_TS.
func TestAutoModeAggregateClasses(t *testing.T) {
	cfg := aggConfig()
	h := newAggHarness(t, cfg, time.Second)
	seq := path{a: ep("10.1.0.1", 1000), b: ep("10.2.0.1", 80)}
	ts := path{a: ep("10.3.0.1", 1000), b: ep("10.4.0.1", 80)}
	for _, s := range []step{
		{0, seq.seg(true, 1000, 5000, 100), true},
		{10 * ms, seq.seg(false, 5000, 1100, 0), false},
		{20 * ms, ts.data(true, 1, 0, 100), true},
		{30 * ms, ts.ack(false, 7, 1), false},
	} {
		h.feed(s.frame, t0+s.at, s.egress)
	}
	if err := h.a.Finish(); err != nil {
		t.Fatal(err)
	}
	type class struct {
		epp     int // ePPing's class of both packets
		source  events.Source
		samples uint64 // keyed on the reply's source
	}
	want := map[string]class{
		"10.1.0.0/24": {events.EPPTCPNoTS, events.SourceTCPSeq, 0},
		"10.2.0.0/24": {events.EPPTCPNoTS, events.SourceTCPSeq, 1},
		"10.3.0.0/24": {events.EPPTCPTS, events.SourceTCPTS, 0},
		"10.4.0.0/24": {events.EPPTCPTS, events.SourceTCPTS, 1},
	}
	seen := map[netip.Prefix]bool{}
	for _, r := range h.recs {
		seen[r.Prefix] = true
		w, ok := want[r.Prefix.String()]
		if !ok {
			continue
		}
		var one [events.NumEPPClasses]uint64
		one[w.epp] = 1
		if r.RX.EPPPackets != one || r.TX.EPPPackets != one {
			t.Errorf("%s: rx %v tx %v, want one packet each way in class %s", r.Prefix, r.RX.EPPPackets, r.TX.EPPPackets, events.EPPClassNames[w.epp])
		}
		if r.Count != w.samples || r.BySource[w.source] != w.samples {
			t.Errorf("%s: %d samples by source %v, want %d %s", r.Prefix, r.Count, r.BySource, w.samples, w.source)
		}
	}
	for p := range want {
		if !seen[netip.MustParsePrefix(p)] {
			t.Errorf("no record of %s", p)
		}
	}
	for _, bk := range []string{"0.0.0.0/0", "::/0"} {
		if seen[netip.MustParsePrefix(bk)] {
			t.Errorf("a record of the backup entry %s: tracked packets did not create their prefixes' entries", bk)
		}
	}
}

// TestSeqAcksAfterFIN: a sender that closes (FIN) while its last data is
// in flight, to a receiver that never sent data (its direction never
// became active): the sequence source still takes the ACKs (the flow stays
// until the last timed range is answered, then goes), where ePPing's
// timestamp source, as ePPing, ends the flow at the FIN and takes none.
func TestSeqAcksAfterFIN(t *testing.T) {
	p := pathV4
	t.Run("sequence", func(t *testing.T) {
		h := newHarness(t, seqConfig(loader.TCPAuto))
		h.run([]step{
			{0, p.seg(true, 1000, 5000, 100), true},
			{10 * ms, p.seg(false, 5000, 1100, 0), false},
			{20 * ms, p.seg(true, 1100, 5000, 100), true},      // timed: end 1200
			{21 * ms, p.seg(true, 1200, 5000, 0, fin), true},   // a closes; not timed (one range at a time)
			{30 * ms, p.seg(false, 5000, 1200, 0), false},      // a's data: 10 ms; nothing awaited: the flow goes
			{31 * ms, p.seg(false, 5000, 1201, 0, fin), false}, // no flow: nothing
		})
		rtts := h.takeRTTs()
		if len(rtts) != 2 || rtts[1].RTT != 10*time.Millisecond || rtts[1].Source != events.SourceTCPSeq {
			t.Errorf("samples %+v: want two tcp_seq, the second 10 ms after the FIN", rtts)
		}
		if s := h.stats(); s.Flows != 0 || s.FlowsDeleted != 1 {
			t.Errorf("stats %+v: want the flow deleted once", s)
		}
	})
	t.Run("timestamps", func(t *testing.T) {
		h := newHarness(t, seqConfig(loader.TCPAuto))
		h.run([]step{
			{0, p.data(true, 1, 0, 100), true},
			{10 * ms, p.ack(false, 7, 1), false},
			{20 * ms, p.data(true, 2, 7, 100), true},
			{21 * ms, p.tcp(true, pktcraft.TCP{ACK: true, FIN: true, TSval: 3, TSecr: 7}), true},
			{30 * ms, p.ack(false, 8, 2), false},
		})
		if rtts := h.takeRTTs(); len(rtts) != 1 {
			t.Errorf("samples %+v: want one (ePPing's rule: none after the FIN)", rtts)
		}
		if s := h.stats(); s.Flows != 0 || s.FlowsDeleted != 1 {
			t.Errorf("stats %+v: want the flow deleted at the FIN", s)
		}
	})
}
