// Package events holds the decoded form of what the BPF programs report:
// RTT samples and flow opening/closing events. Values are plain structs so
// a reader can decode into one reused value per event without allocating.
package events

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/rttscope/rttscope/internal/probe"
)

// Protocol is the IP protocol number of a flow.
type Protocol uint8

// Protocols rttscope reports on.
const (
	ProtoICMP   Protocol = 1
	ProtoTCP    Protocol = 6
	ProtoUDP    Protocol = 17
	ProtoICMPv6 Protocol = 58
)

// String returns the name used in every output format (README.md, "Output
// formats").
func (p Protocol) String() string {
	switch p {
	case ProtoICMP:
		return "ICMP"
	case ProtoTCP:
		return "TCP"
	case ProtoUDP:
		return "UDP"
	case ProtoICMPv6:
		return "ICMPv6"
	}
	return "UNKNOWN"
}

// Source is what an RTT sample was measured with (enum rtt_source in
// bpf/events.h).
type Source uint8

// The RTT sources.
const (
	SourceTCPTS    = Source(probe.RttscopeRttSourceRTT_SOURCE_TCP_TS)    // TCP timestamps: TSval echoed in TSecr
	SourceICMP     = Source(probe.RttscopeRttSourceRTT_SOURCE_ICMP)      // ICMP/ICMPv6 echo
	SourceTCPSeq   = Source(probe.RttscopeRttSourceRTT_SOURCE_TCP_SEQ)   // TCP data: end sequence, covering ACK
	SourceTCPSYN   = Source(probe.RttscopeRttSourceRTT_SOURCE_TCP_SYN)   // TCP handshake
	SourceDNS      = Source(probe.RttscopeRttSourceRTT_SOURCE_DNS)       // DNS query and response
	SourceQUICSpin = Source(probe.RttscopeRttSourceRTT_SOURCE_QUIC_SPIN) // QUIC spin bit
	NumSources     = int(probe.RttscopeRttSourceRTT_SOURCES)
)

var sourceNames = [NumSources]string{"tcp_ts", "icmp", "tcp_seq", "tcp_syn", "dns", "quic_spin"}

// String returns the source's name in every output format ("source").
func (s Source) String() string {
	if int(s) < NumSources {
		return sourceNames[s]
	}
	return "unknown"
}

// Tag is the source's mark on the standard format's RTT lines: empty for
// the sources ePPing has (TCP timestamps, ICMP echo), whose lines stay
// ePPing's, the source's name otherwise.
func (s Source) Tag() string {
	if s == SourceTCPTS || s == SourceICMP {
		return ""
	}
	return s.String()
}

// Endpoint is one side of a flow. For ICMP echo the echo identifier stands
// in for the port on both sides.
type Endpoint struct {
	IP   netip.Addr
	Port uint16
}

// Flow names a direction of a connection: Src sent the packet the event is
// about (for RTT samples: the reply that completed the sample).
type Flow struct {
	Src, Dst Endpoint
	Proto    Protocol
	// ID, when not 0, is a number given to the connection for the run that
	// stands in for its addresses, which are then invalid (zero): with
	// --anonymize drop no address leaves the process (docs/privacy.md).
	ID uint64
}

// Reverse returns the flow in the other direction.
func (f Flow) Reverse() Flow { return Flow{Src: f.Dst, Dst: f.Src, Proto: f.Proto, ID: f.ID} }

// AddressesDropped reports whether the flow carries a number instead of
// addresses (Flow.ID).
func (f *Flow) AddressesDropped() bool { return f.ID != 0 && !f.Src.IP.IsValid() }

// RTT is one round-trip time sample.
type RTT struct {
	// Time is when the reply was seen, as Unix time in nanoseconds.
	Time int64
	// Flow is the direction of the reply packet.
	Flow Flow
	// RTT and MinRTT are the sample and the flow's minimum so far.
	RTT, MinRTT time.Duration
	// SmoothedRTT is the flow's EWMA (1/8 gain, as TCP's SRTT).
	SmoothedRTT time.Duration
	// Sent* count what the timestamped side sent, Rec* what it received,
	// over the life of the flow.
	SentPackets, SentBytes uint64
	RecPackets, RecBytes   uint64
	// MatchOnEgress is true when the reply was matched on an egress hook:
	// the sample then includes this host's own processing delay.
	MatchOnEgress bool
	// Ifindex is the interface the reply was matched on (0 in replay).
	Ifindex uint32
	// Source is what the sample was measured with.
	Source Source
	// DNS holds the response's details of a DNS sample (Source ==
	// SourceDNS); zero otherwise.
	DNS DNSInfo
}

// DNSInfo is what a DNS sample reports of its response; the name only
// with --dns-names (data minimisation, docs/privacy.md).
type DNSInfo struct {
	// QType is the type of the first question (1 A, 28 AAAA, ...; 0 when
	// the name was too long to walk or malformed).
	QType uint16
	// RCode is the response code (0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, ...).
	RCode uint8
	// Truncated is the TC bit: the answer did not fit (UDP).
	Truncated bool
	// Name is the question's name in presentation format
	// ("www.example.com."), only with --dns-names.
	Name string
}

// DNSName turns a name in wire format (length-prefixed labels, ending with
// a zero length or a compression pointer, which ends it here) into its
// presentation format (RFC 1035 5.1): labels joined by dots, a final dot,
// and every byte outside letters, digits, '-' and '_' as \DDD, so the
// result is printable ASCII whatever the packet held.
func DNSName(wire []byte) string {
	var b []byte
	for i := 0; i < len(wire); {
		n := int(wire[i])
		if n == 0 || n&0xc0 != 0 {
			break
		}
		i++
		for j := 0; j < n && i < len(wire); j, i = j+1, i+1 {
			c := wire[i]
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
				b = append(b, c)
			default:
				b = append(b, '\\', '0'+c/100, '0'+c/10%10, '0'+c%10)
			}
		}
		b = append(b, '.')
	}
	if len(b) == 0 {
		return "."
	}
	return string(b)
}

// FlowEventType says whether a flow opens or closes.
type FlowEventType uint8

// Flow event types: enum flow_event_type in bpf/events.h.
const (
	FlowOpening = FlowEventType(probe.RttscopeFlowEventTypeFLOW_EVENT_OPENING)
	FlowClosing = FlowEventType(probe.RttscopeFlowEventTypeFLOW_EVENT_CLOSING)
)

// String returns the word used by the output formats.
func (t FlowEventType) String() string {
	if t == FlowOpening {
		return "opening"
	}
	return "closing"
}

// FlowReason says why a flow opened or closed.
type FlowReason uint8

// Flow event reasons: enum flow_event_reason in bpf/events.h; the strings
// are ePPing's.
const (
	ReasonSYN           = FlowReason(probe.RttscopeFlowEventReasonEVENT_REASON_SYN)
	ReasonSYNACK        = FlowReason(probe.RttscopeFlowEventReasonEVENT_REASON_SYN_ACK)
	ReasonFirstObserved = FlowReason(probe.RttscopeFlowEventReasonEVENT_REASON_FIRST_OBS_PCKT)
	ReasonFIN           = FlowReason(probe.RttscopeFlowEventReasonEVENT_REASON_FIN)
	ReasonRST           = FlowReason(probe.RttscopeFlowEventReasonEVENT_REASON_RST)
	ReasonTimeout       = FlowReason(probe.RttscopeFlowEventReasonEVENT_REASON_FLOW_TIMEOUT)
)

// String returns the reason as printed in every format.
func (r FlowReason) String() string {
	switch r {
	case ReasonSYN:
		return "SYN"
	case ReasonSYNACK:
		return "SYN-ACK"
	case ReasonFirstObserved:
		return "first observed packet"
	case ReasonFIN:
		return "FIN"
	case ReasonRST:
		return "RST"
	case ReasonTimeout:
		return "flow timeout"
	}
	return "unknown"
}

// FlowEvent reports a flow opening or closing.
type FlowEvent struct {
	// Time is Unix time in nanoseconds.
	Time int64
	// Flow is the direction whose state changed, named as ePPing names it:
	// as that direction's RTT samples are, from the side that answers it.
	Flow   Flow
	Type   FlowEventType
	Reason FlowReason
	// Source says which end of Flow caused the event, or the expiry of
	// idle state.
	Source FlowSource
	// Seen is when the event happened (Unix ns): the time of the packet or
	// cleanup that caused it. It equals Time except for openings, whose
	// Time is ePPing's (the direction's last timestamp before its first
	// answer). Not written by any format; replay orders events by it.
	Seen int64
}

// FlowSource says what caused a flow event, relative to its flow.
type FlowSource uint8

// Flow event sources: enum flow_event_source in bpf/events.h.
const (
	SourceDest = FlowSource(probe.RttscopeFlowEventSourceEVENT_SOURCE_DEST)
	SourceSrc  = FlowSource(probe.RttscopeFlowEventSourceEVENT_SOURCE_SRC)
	SourceGC   = FlowSource(probe.RttscopeFlowEventSourceEVENT_SOURCE_GC)
)

// String returns ePPing's word for the source ("from src", "from dest",
// "from garbage collection").
func (s FlowSource) String() string {
	switch s {
	case SourceSrc:
		return "src"
	case SourceGC:
		return "garbage collection"
	}
	return "dest"
}

// Stats is the self-telemetry record printed at interval and at exit.
// Counters are totals since start; StatsCounters lists them in output
// order, and SetCounters fills them from the kernel's.
type Stats struct {
	// Time is Unix time in nanoseconds.
	Time int64
	// Packets is the number of packets the programs looked at.
	Packets uint64
	// RTTEvents and FlowEvents count events delivered to user space.
	RTTEvents, FlowEvents uint64
	// FlowMapFull and TimestampMapFull count inserts refused because the
	// map was full; RingbufFull counts events dropped in the kernel because
	// the ring buffer had no room.
	FlowMapFull, TimestampMapFull, RingbufFull uint64
	// FlowsTimedOut and TimestampsExpired count entries the periodic
	// cleanup removed.
	FlowsTimedOut, TimestampsExpired uint64
	// Flows and Timestamps are the current map occupancies.
	Flows, Timestamps uint64
	// FlowsEvicted and TimestampsEvicted count entries replaced to make
	// room for new ones when their map was full (docs/aggregation.md).
	FlowsEvicted, TimestampsEvicted uint64
	// AggregatedSamples counts RTT samples added to per-prefix histograms;
	// PrefixMapFull counts updates lost because the prefix map was full.
	AggregatedSamples, PrefixMapFull uint64
	// FlowsCreated, FlowsDeleted, TimestampsCreated and TimestampsDeleted
	// count inserts and deletes (closed, timed out, evicted; timestamps
	// also matched): Flows and Timestamps are their differences.
	FlowsCreated, FlowsDeleted, TimestampsCreated, TimestampsDeleted uint64
	// SummaryMapFull counts flows without a summary (--flow-summary)
	// because the summary map was full; SummaryRingbufFull counts
	// summaries of ended flows lost because their ring buffer had no
	// room; SummariesSent counts those delivered.
	SummaryMapFull, SummaryRingbufFull, SummariesSent uint64
	// Samples counts the RTT samples of each source (events or
	// aggregated), indexed by Source.
	Samples [NumSources]uint64
	// TCPSeqRetransmissions counts TCP segments that carried sequence
	// numbers already sent (seen by the sequence sources only), and
	// TCPSeqAmbiguous the timed ranges they made ambiguous (Karn's rule:
	// dropped, no sample).
	TCPSeqRetransmissions, TCPSeqAmbiguous uint64
	// DNSDuplicateQueries counts DNS queries sent while a query with
	// their id was outstanding on their tuple (a retransmission or a
	// duplicate id: that timing is dropped), DNSUnmatchedResponses DNS
	// responses that answered no outstanding query.
	DNSDuplicateQueries, DNSUnmatchedResponses uint64
	// QUICSpinRejected counts spin bit edges closer than 1/8 of the
	// running RTT estimate (reordering, loss), QUICSpinRandom flow
	// directions whose spin bit looked random (no samples from them).
	QUICSpinRejected, QUICSpinRandom uint64
	// FastPathPackets counts the packets the fast paths took whole
	// (bpf/fastpath.h: TCP segments of existing IPv4 flows that change
	// only counters, and IPv4 packets no RTT source reads), which
	// Packets includes; Packets less it took the general path. The
	// kernel adds the TCP segments 16 at a time per flow direction: a
	// periodic record's count (and so Packets) lags by up to 15 per
	// direction of a flow still tracked, a run's last record and
	// replay's are exact (docs/design.md).
	FastPathPackets uint64
	// AggFoldedPackets counts, in aggregated mode, the fast path's
	// packets that were counted in their flow and added to the prefixes'
	// records at their interval's end or when the flow went
	// (bpf/agg_fold.h), the rest of aggregated mode's packets having
	// counted in the prefixes one by one: the share of the traffic that
	// took the cheap way. A periodic record counts the intervals folded
	// by then.
	AggFoldedPackets uint64
	// Variant names the variant of each optional part in use, as
	// "cleanup=iterator summaries=map-walk" (loader.Variant); empty in
	// records that do not carry it.
	Variant string
	// Process is the resource use of the rttscope process itself; nil in
	// records that do not carry it (replay). The record owns it: writers
	// may not keep it after the call, producers may not change it after.
	Process *ProcessStats
	// BPF is the kernel's run time accounting of the attached programs;
	// nil in records that do not carry it (replay). Owned as Process.
	BPF *BPFStats
	// Sinks counts the work of each output sink when records go to
	// sinks with queues of their own (internal/sink); nil otherwise. A
	// pointer, as Process and BPF, so that Stats stays comparable.
	// Owned as Process.
	Sinks *SinkReport
}

// ProcessStats is the resource use of the rttscope process (getrusage
// RUSAGE_SELF, /proc/self/statm).
type ProcessStats struct {
	// CPUUser and CPUSystem are the CPU time used since start, in user
	// and kernel mode (microsecond resolution).
	CPUUser, CPUSystem time.Duration
	// RSS is the current resident set size, MaxRSS its peak; bytes.
	RSS, MaxRSS uint64
	// CPUShare is the CPU time used over the wall time elapsed since the
	// previous record (the first: since monitoring began); 1 is one CPU
	// busy.
	CPUShare float64
}

// BPFStats is the kernel's accounting of the attached BPF programs, which
// it keeps only while run time statistics are enabled (sysctl
// kernel.bpf_stats_enabled, or BPF_ENABLE_STATS as --bpf-stats does).
type BPFStats struct {
	// Enabled says whether the kernel is accounting; Programs is empty
	// when it is not.
	Enabled bool
	// Programs has one entry per attached program.
	Programs []ProgramStats
}

// ProgramStats is the run time accounting of one BPF program. Each run
// handles one packet.
type ProgramStats struct {
	// Name is "tc_egress", "tc_ingress" or "xdp_ingress".
	Name string
	// RunCount and RunTime are totals since the program was loaded
	// (counted only while statistics are enabled).
	RunCount uint64
	RunTime  time.Duration
	// IntervalRunCount and IntervalRunTime cover the time since the
	// previous record (the first: since the program was loaded).
	IntervalRunCount uint64
	IntervalRunTime  time.Duration
}

// NsPerPacket is the mean run time per packet since load; ok is false
// when the program has not run.
func (p *ProgramStats) NsPerPacket() (ns float64, ok bool) {
	return perRun(p.RunTime, p.RunCount)
}

// IntervalNsPerPacket is the mean run time per packet over the interval;
// ok is false when the program did not run in it.
func (p *ProgramStats) IntervalNsPerPacket() (ns float64, ok bool) {
	return perRun(p.IntervalRunTime, p.IntervalRunCount)
}

func perRun(t time.Duration, n uint64) (float64, bool) {
	if n == 0 {
		return 0, false
	}
	return float64(t) / float64(n), true
}

var dnsTypes = map[uint16]string{1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT", 28: "AAAA",
	33: "SRV", 35: "NAPTR", 43: "DS", 46: "RRSIG", 48: "DNSKEY", 64: "SVCB", 65: "HTTPS", 255: "ANY"}

var dnsRCodes = [...]string{"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"}

// AppendQType appends the question type's mnemonic, or TYPEn for others
// (RFC 3597).
func (d *DNSInfo) AppendQType(b []byte) []byte {
	if s, ok := dnsTypes[d.QType]; ok {
		return append(b, s...)
	}
	return strconv.AppendUint(append(b, "TYPE"...), uint64(d.QType), 10)
}

// AppendRCode appends the response code's mnemonic, or RCODEn for others.
func (d *DNSInfo) AppendRCode(b []byte) []byte {
	if int(d.RCode) < len(dnsRCodes) {
		return append(b, dnsRCodes[d.RCode]...)
	}
	return strconv.AppendUint(append(b, "RCODE"...), uint64(d.RCode), 10)
}
