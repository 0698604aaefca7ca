package recordpb

import (
	"net/netip"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rttscope/rttscope/internal/events"
)

// roundTrip marshals r and reads it back.
func roundTrip(t *testing.T, r *Record) *Record {
	t.Helper()
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var out Record
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestRecordsSurviveTheWire: each record type's fields come back from
// the wire with their values, addresses as 4 or 16 bytes, dropped
// addresses empty with the flow number.
func TestRecordsSurviveTheWire(t *testing.T) {
	var c Encoder
	f := events.Flow{Src: events.Endpoint{IP: netip.MustParseAddr("192.0.2.1"), Port: 443},
		Dst: events.Endpoint{IP: netip.MustParseAddr("2001:db8::5"), Port: 4000}, Proto: events.ProtoTCP}
	rtt := roundTrip(t, c.RTT(&events.RTT{Time: 17, Flow: f, RTT: 3 * time.Millisecond, MinRTT: time.Millisecond,
		SmoothedRTT: 2 * time.Millisecond, SentPackets: 5, RecBytes: 99, MatchOnEgress: true, Source: events.SourceTCPSeq})).GetRtt()
	if rtt.Timestamp != 17 || rtt.RttNs != 3e6 || rtt.MinRttNs != 1e6 || rtt.SmoothedRttNs != 2e6 || rtt.SentPackets != 5 ||
		rtt.RecBytes != 99 || !rtt.MatchOnEgress || len(rtt.Flow.Src.Ip) != 4 || len(rtt.Flow.Dst.Ip) != 16 ||
		rtt.Flow.Src.Port != 443 || rtt.Flow.Protocol != 6 || rtt.Source != "tcp_seq" || rtt.Dns != nil {
		t.Errorf("rtt %v", rtt)
	}
	dns := roundTrip(t, c.RTT(&events.RTT{Time: 18, Flow: f, RTT: time.Millisecond, Source: events.SourceDNS,
		DNS: events.DNSInfo{QType: 28, RCode: 3, Truncated: true, Name: "a.example."}})).GetRtt()
	if d := dns.Dns; dns.Source != "dns" || d == nil || d.Qtype != "AAAA" || d.Rcode != "NXDOMAIN" || !d.Truncated || d.Name != "a.example." {
		t.Errorf("dns rtt %v", dns)
	}
	fe := roundTrip(t, c.FlowEvent(&events.FlowEvent{Time: 3, Flow: events.Flow{ID: 9, Proto: events.ProtoICMP},
		Type: events.FlowClosing, Reason: events.ReasonTimeout, TriggeredBySrc: true})).GetFlowEvent()
	if fe.Type != FlowEvent_CLOSING || fe.Reason != "flow timeout" || !fe.TriggeredBySrc || fe.Flow.FlowId != 9 || len(fe.Flow.Src.Ip) != 0 {
		t.Errorf("flow event %v", fe)
	}
	st := roundTrip(t, c.Stats(&events.Stats{Time: 1, Packets: 77, Flows: 3, Variant: "cleanup=iterator",
		Process: &events.ProcessStats{RSS: 1 << 20}, BPF: &events.BPFStats{Enabled: true, Programs: []events.ProgramStats{{Name: "tc_egress", RunCount: 4}}},
		Sinks: &events.SinkReport{List: []events.SinkStats{{Name: "kafka", Acked: 8}}}})).GetStats()
	if st.Counters["packets"] != 77 || st.Counters["flows"] != 3 || len(st.Counters) != len(events.StatsCounters) ||
		st.Process.RssBytes != 1<<20 || st.Programs[0].RunCount != 4 || st.Sinks[0].Acked != 8 || st.Variant != "cleanup=iterator" {
		t.Errorf("stats %v", st)
	}
	a := &events.Aggregate{Time: 10, Start: 5, Prefix: netip.MustParsePrefix("10.1.2.0/24"), Count: 2, Sum: 7 * time.Millisecond,
		P99: 4 * time.Millisecond, Histogram: []events.HistBin{{Lower: 1, Upper: 2, Count: 2}}}
	a.RX.Packets[events.ClassUDP] = 6
	a.BySource[events.SourceDNS] = 2
	ag := roundTrip(t, c.Aggregate(a)).GetAggregate()
	if ag.PrefixBits != 24 || netip.AddrFrom4([4]byte(ag.PrefixAddr)).String() != "10.1.2.0" || ag.SumNs != 7e6 || ag.P99Ns != 4e6 ||
		ag.Rx.Packets[events.ClassUDP] != 6 || len(ag.Rx.Ecn) != 4 || ag.Histogram[0].Count != 2 ||
		len(ag.CountBySource) != 1 || ag.CountBySource["dns"] != 2 {
		t.Errorf("aggregate %v", ag)
	}
	fs := roundTrip(t, c.FlowSummary(&events.FlowSummary{Time: 2, Flow: f, Reason: events.ReasonFIN,
		Src: events.FlowDirSummary{Packets: 4, P50: time.Millisecond, BySource: [events.NumSources]uint64{events.SourceTCPSYN: 1}}})).GetFlowSummary()
	if fs.Reason != "FIN" || fs.Src.Packets != 4 || fs.Src.P50Ns != 1e6 || fs.Flow.Dst.Port != 4000 ||
		fs.Src.CountBySource["tcp_syn"] != 1 || fs.Dst.CountBySource != nil {
		t.Errorf("flow summary %v", fs)
	}
	pd := roundTrip(t, c.PDM(&events.PDM{Time: 6, Flow: f, Egress: true, PSNThisPkt: 7, ScaleDTLR: 3, DeltaLastRecv: 9,
		DTLR: 72 * time.Microsecond, HasNetworkRTT: true, NetworkRTT: 5 * time.Millisecond})).GetPdm()
	if pd.Timestamp != 6 || !pd.Egress || pd.PsnThisPkt != 7 || pd.ScaleDtlr != 3 || pd.DeltaLastRecv != 9 || pd.DtlrNs != 72e3 ||
		!pd.HasNetworkRtt || pd.NetworkRttNs != 5e6 || pd.HasRoundTrip || pd.Flow.Src.Port != 443 {
		t.Errorf("pdm %v", pd)
	}
	pi := roundTrip(t, c.PDMInterval(&events.PDMInterval{Time: 8, Start: 7, Flow: f,
		DTLS: events.Distribution{Count: 3, Sum: 9, Histogram: []events.HistBin{{Lower: 1, Upper: 2, Count: 3}}}})).GetPdmInterval()
	if pi.Start != 7 || pi.Dtls.Count != 3 || pi.Dtls.SumNs != 9 || pi.Dtls.Histogram[0].Count != 3 || pi.Dtlr.Count != 0 {
		t.Errorf("pdm interval %v", pi)
	}
	ak := roundTrip(t, c.AnonKey(&events.AnonKey{Time: 4, Scheme: "pfx", KeyID: "ab", Rotated: true})).GetAnonKey()
	if ak.Scheme != "pfx" || ak.KeyId != "ab" || !ak.Rotated || ak.Timestamp != 4 {
		t.Errorf("anon key %v", ak)
	}
}
