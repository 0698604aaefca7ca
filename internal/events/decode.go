package events

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/rttscope/rttscope/internal/probe"
)

// Kind says which record a ring buffer sample holds.
type Kind uint32

// Record kinds: enum event_type in bpf/events.h.
const (
	KindRTT  = Kind(probe.RttscopeEventTypeEVENT_TYPE_RTT)
	KindFlow = Kind(probe.RttscopeEventTypeEVENT_TYPE_FLOW)
	// KindRTTNamed is an RTT record followed by a DNS question's name
	// (--dns-names); Decode reports it as KindRTT.
	KindRTTNamed = Kind(probe.RttscopeEventTypeEVENT_TYPE_RTT_NAMED)
)

// Layouts of the records of bpf/events.h, read by offset: no reflection,
// no allocation. TestLayout checks every offset and width against the Go
// types bpf2go generates from the object's BTF. All integers are host
// (little) endian except ports, which are kept in network order.
const (
	// The header of every record: u32 kind, then (rtt_event,
	// flow_event) u32 ifindex or (flow_summary_event) u32 reason, u64
	// timestamp, struct network_tuple.
	offKind      = 0
	offIfindex   = 4
	offTimestamp = 8
	tupleOffset  = 16

	// struct rtt_event: u8 match_on_egress, u8 source, then u64 fields.
	rttRecordSize       = 128
	rttOffMatchOnEgress = 60
	rttOffSource        = 61
	rttOffRTT           = 64
	rttOffMinRTT        = 72
	rttOffSRTT          = 80
	rttOffSentPkts      = 88
	rttOffSentBytes     = 96
	rttOffRecPkts       = 104
	rttOffRecBytes      = 112
	rttOffDNSQType      = 120 // u16, then u8 rcode, u8 truncated
	rttOffDNSRCode      = 122
	rttOffDNSTruncated  = 123

	// struct rtt_named_event: an rtt_event, u16 name length, the name.
	namedRecordSize  = 392
	namedOffNameLen  = 128
	namedOffName     = 136
	namedNameMaxSize = 256

	// struct flow_event: u8 fields.
	flowRecordSize        = 64
	flowOffType           = 60
	flowOffReason         = 61
	flowOffTriggeredBySrc = 62

	// struct network_tuple: two struct flow_address (16-byte address,
	// be16 port, u16 pad), u16 protocol, u8 family, u8 pad.
	tupleSize       = 44
	tupleOffSrc     = 0
	tupleOffDst     = 20
	tupleOffProto   = 40
	endpointSize    = 20
	endpointOffAddr = 0
	endpointOffPort = 16
)

// ErrShortRecord is returned for a sample too small for its kind.
var ErrShortRecord = errors.New("events: short record")

// ErrUnknownKind is returned for a sample of a kind this build does not know.
var ErrUnknownKind = errors.New("events: unknown record kind")

var le = binary.LittleEndian

// Decoder turns raw ring buffer samples into events. Its clock offset maps
// the kernel's timestamps (CLOCK_MONOTONIC live, Unix time in replay) to
// Unix nanoseconds.
type Decoder struct {
	// ClockOffset is added to every kernel timestamp.
	ClockOffset int64
}

// Decode fills rtt or flow from raw, depending on the record's kind, which
// it returns. It does not allocate.
func (d *Decoder) Decode(raw []byte, rtt *RTT, flow *FlowEvent) (Kind, error) {
	if len(raw) < 4 {
		return 0, ErrShortRecord
	}
	kind := Kind(le.Uint32(raw[offKind:]))
	switch kind {
	case KindRTT, KindRTTNamed:
		if len(raw) < rttRecordSize || (kind == KindRTTNamed && len(raw) < namedRecordSize) {
			return kind, ErrShortRecord
		}
		rtt.Ifindex = le.Uint32(raw[offIfindex:])
		rtt.Time = int64(le.Uint64(raw[offTimestamp:])) + d.ClockOffset
		decodeTuple(raw[tupleOffset:], &rtt.Flow)
		rtt.MatchOnEgress = raw[rttOffMatchOnEgress] != 0
		rtt.Source = Source(raw[rttOffSource])
		rtt.DNS = DNSInfo{QType: le.Uint16(raw[rttOffDNSQType:]), RCode: raw[rttOffDNSRCode],
			Truncated: raw[rttOffDNSTruncated] != 0}
		if kind == KindRTTNamed {
			n := min(int(le.Uint16(raw[namedOffNameLen:])), namedNameMaxSize)
			rtt.DNS.Name = DNSName(raw[namedOffName : namedOffName+n])
			kind = KindRTT
		}
		rtt.RTT = time.Duration(le.Uint64(raw[rttOffRTT:]))
		rtt.MinRTT = time.Duration(le.Uint64(raw[rttOffMinRTT:]))
		rtt.SmoothedRTT = time.Duration(le.Uint64(raw[rttOffSRTT:]))
		rtt.SentPackets = le.Uint64(raw[rttOffSentPkts:])
		rtt.SentBytes = le.Uint64(raw[rttOffSentBytes:])
		rtt.RecPackets = le.Uint64(raw[rttOffRecPkts:])
		rtt.RecBytes = le.Uint64(raw[rttOffRecBytes:])
	case KindFlow:
		if len(raw) < flowRecordSize {
			return kind, ErrShortRecord
		}
		flow.Time = int64(le.Uint64(raw[offTimestamp:])) + d.ClockOffset
		decodeTuple(raw[tupleOffset:], &flow.Flow)
		flow.Type = FlowEventType(raw[flowOffType])
		flow.Reason = FlowReason(raw[flowOffReason])
		flow.TriggeredBySrc = raw[flowOffTriggeredBySrc] != 0
	default:
		return kind, ErrUnknownKind
	}
	return kind, nil
}

// DecodeTuple fills f from a struct network_tuple (44 bytes).
func DecodeTuple(b []byte, f *Flow) { decodeTuple(b, f) }

func decodeTuple(b []byte, f *Flow) {
	f.Src = decodeEndpoint(b[tupleOffSrc : tupleOffSrc+endpointSize])
	f.Dst = decodeEndpoint(b[tupleOffDst : tupleOffDst+endpointSize])
	f.Proto = Protocol(le.Uint16(b[tupleOffProto:]))
}

// decodeEndpoint reads a struct flow_address.
func decodeEndpoint(b []byte) Endpoint {
	addr := netip.AddrFrom16([16]byte(b[endpointOffAddr : endpointOffAddr+16])).Unmap()
	return Endpoint{IP: addr, Port: binary.BigEndian.Uint16(b[endpointOffPort:])}
}
