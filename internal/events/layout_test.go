package events

import (
	"testing"
	"unsafe"

	"github.com/rttscope/rttscope/internal/hist"
	"github.com/rttscope/rttscope/internal/probe"
)

// TestLayout checks every offset the decoder reads at, and the width it
// reads there, against the Go types bpf2go generates from the BPF object's
// BTF: a field moved, resized or reordered in bpf/events.h or
// bpf/summary.h fails here instead of decoding garbage.
func TestLayout(t *testing.T) {
	var (
		r probe.RttscopeRttEvent
		f probe.RttscopeFlowEvent
		m probe.RttscopeRttNamedEvent
		s probe.RttscopeFlowSummaryEvent
		n probe.RttscopeNetworkTuple
	)
	for _, c := range []struct {
		name        string
		off, size   uintptr // where and how much the decoder reads
		goff, gsize uintptr // the generated type's field
	}{
		{"sizeof(rtt_event)", 0, rttRecordSize, 0, unsafe.Sizeof(r)},
		{"rtt_event.event_type", offKind, 4, unsafe.Offsetof(r.EventType), unsafe.Sizeof(r.EventType)},
		{"rtt_event.ifindex", offIfindex, 4, unsafe.Offsetof(r.Ifindex), unsafe.Sizeof(r.Ifindex)},
		{"rtt_event.timestamp", offTimestamp, 8, unsafe.Offsetof(r.Timestamp), unsafe.Sizeof(r.Timestamp)},
		{"rtt_event.flow", tupleOffset, tupleSize, unsafe.Offsetof(r.Flow), unsafe.Sizeof(r.Flow)},
		{"rtt_event.match_on_egress", rttOffMatchOnEgress, 1, unsafe.Offsetof(r.MatchOnEgress), unsafe.Sizeof(r.MatchOnEgress)},
		{"rtt_event.source", rttOffSource, 1, unsafe.Offsetof(r.Source), unsafe.Sizeof(r.Source)},
		{"rtt_event.rtt", rttOffRTT, 8, unsafe.Offsetof(r.Rtt), unsafe.Sizeof(r.Rtt)},
		{"rtt_event.min_rtt", rttOffMinRTT, 8, unsafe.Offsetof(r.MinRtt), unsafe.Sizeof(r.MinRtt)},
		{"rtt_event.srtt", rttOffSRTT, 8, unsafe.Offsetof(r.Srtt), unsafe.Sizeof(r.Srtt)},
		{"rtt_event.sent_pkts", rttOffSentPkts, 8, unsafe.Offsetof(r.SentPkts), unsafe.Sizeof(r.SentPkts)},
		{"rtt_event.sent_bytes", rttOffSentBytes, 8, unsafe.Offsetof(r.SentBytes), unsafe.Sizeof(r.SentBytes)},
		{"rtt_event.rec_pkts", rttOffRecPkts, 8, unsafe.Offsetof(r.RecPkts), unsafe.Sizeof(r.RecPkts)},
		{"rtt_event.rec_bytes", rttOffRecBytes, 8, unsafe.Offsetof(r.RecBytes), unsafe.Sizeof(r.RecBytes)},
		{"rtt_event.dns_qtype", rttOffDNSQType, 2, unsafe.Offsetof(r.DnsQtype), unsafe.Sizeof(r.DnsQtype)},
		{"rtt_event.dns_rcode", rttOffDNSRCode, 1, unsafe.Offsetof(r.DnsRcode), unsafe.Sizeof(r.DnsRcode)},
		{"rtt_event.dns_truncated", rttOffDNSTruncated, 1, unsafe.Offsetof(r.DnsTruncated), unsafe.Sizeof(r.DnsTruncated)},

		{"sizeof(rtt_named_event)", 0, namedRecordSize, 0, unsafe.Sizeof(m)},
		{"rtt_named_event.rtt", 0, rttRecordSize, unsafe.Offsetof(m.Rtt), unsafe.Sizeof(m.Rtt)},
		{"rtt_named_event.name_len", namedOffNameLen, 2, unsafe.Offsetof(m.NameLen), unsafe.Sizeof(m.NameLen)},
		{"rtt_named_event.name", namedOffName, namedNameMaxSize, unsafe.Offsetof(m.Name), unsafe.Sizeof(m.Name)},

		{"sizeof(flow_event)", 0, flowRecordSize, 0, unsafe.Sizeof(f)},
		{"flow_event.event_type", offKind, 4, unsafe.Offsetof(f.EventType), unsafe.Sizeof(f.EventType)},
		{"flow_event.timestamp", offTimestamp, 8, unsafe.Offsetof(f.Timestamp), unsafe.Sizeof(f.Timestamp)},
		{"flow_event.flow", tupleOffset, tupleSize, unsafe.Offsetof(f.Flow), unsafe.Sizeof(f.Flow)},
		{"flow_event.flow_event_type", flowOffType, 1, unsafe.Offsetof(f.FlowEventType), unsafe.Sizeof(f.FlowEventType)},
		{"flow_event.reason", flowOffReason, 1, unsafe.Offsetof(f.Reason), unsafe.Sizeof(f.Reason)},
		{"flow_event.triggered_by_src", flowOffTriggeredBySrc, 1, unsafe.Offsetof(f.TriggeredBySrc), unsafe.Sizeof(f.TriggeredBySrc)},

		{"sizeof(network_tuple)", 0, tupleSize, 0, unsafe.Sizeof(n)},
		{"network_tuple.saddr", tupleOffSrc, endpointSize, unsafe.Offsetof(n.Saddr), unsafe.Sizeof(n.Saddr)},
		{"network_tuple.daddr", tupleOffDst, endpointSize, unsafe.Offsetof(n.Daddr), unsafe.Sizeof(n.Daddr)},
		{"network_tuple.proto", tupleOffProto, 2, unsafe.Offsetof(n.Proto), unsafe.Sizeof(n.Proto)},
		{"flow_address.ip", endpointOffAddr, 16, unsafe.Offsetof(n.Saddr.Ip), unsafe.Sizeof(n.Saddr.Ip)},
		{"flow_address.port", endpointOffPort, 2, unsafe.Offsetof(n.Saddr.Port), unsafe.Sizeof(n.Saddr.Port)},

		{"sizeof(flow_summary_event)", 0, FlowSummarySize, 0, unsafe.Sizeof(s)},
		{"flow_summary_event.event_type", offKind, 4, unsafe.Offsetof(s.EventType), unsafe.Sizeof(s.EventType)},
		{"flow_summary_event.reason", summaryOffReason, 4, unsafe.Offsetof(s.Reason), unsafe.Sizeof(s.Reason)},
		{"flow_summary_event.timestamp", offTimestamp, 8, unsafe.Offsetof(s.Timestamp), unsafe.Sizeof(s.Timestamp)},
		{"flow_summary_event.flow", tupleOffset, tupleSize, unsafe.Offsetof(s.Flow), unsafe.Sizeof(s.Flow)},
		{"flow_summary_event.start", summaryOffStart, 8, unsafe.Offsetof(s.Start), unsafe.Sizeof(s.Start)},
		{"flow_summary_event.dir", summaryDirOffset, 2 * summaryDirSize, unsafe.Offsetof(s.Dir), unsafe.Sizeof(s.Dir)},
		{"sizeof(flow_summary_dir_event)", 0, summaryDirSize, 0, unsafe.Sizeof(s.Dir[0])},
		{"flow_summary_dir_event.pkts", dirOffPkts, 8, unsafe.Offsetof(s.Dir[0].Pkts), unsafe.Sizeof(s.Dir[0].Pkts)},
		{"flow_summary_dir_event.bytes", dirOffBytes, 8, unsafe.Offsetof(s.Dir[0].Bytes), unsafe.Sizeof(s.Dir[0].Bytes)},
		{"flow_summary_dir_event.count", dirOffCount, 8, unsafe.Offsetof(s.Dir[0].Count), unsafe.Sizeof(s.Dir[0].Count)},
		{"flow_summary_dir_event.sum", dirOffSum, 8, unsafe.Offsetof(s.Dir[0].Sum), unsafe.Sizeof(s.Dir[0].Sum)},
		{"flow_summary_dir_event.min", dirOffMin, 8, unsafe.Offsetof(s.Dir[0].Min), unsafe.Sizeof(s.Dir[0].Min)},
		{"flow_summary_dir_event.max", dirOffMax, 8, unsafe.Offsetof(s.Dir[0].Max), unsafe.Sizeof(s.Dir[0].Max)},
		{"flow_summary_dir_event.hist", dirOffHist, 2 * hist.CoarseBins, unsafe.Offsetof(s.Dir[0].Hist), unsafe.Sizeof(s.Dir[0].Hist)},
		{"flow_summary_dir_event.source_count", dirOffBySource, 4 * uintptr(NumSources), unsafe.Offsetof(s.Dir[0].SourceCount), unsafe.Sizeof(s.Dir[0].SourceCount)},
	} {
		if c.off != c.goff || c.size != c.gsize {
			t.Errorf("%s: the decoder reads %d bytes at %d, the BPF object has %d at %d", c.name, c.size, c.off, c.gsize, c.goff)
		}
	}
}
