package events

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"
)

// Kind says which record a ring buffer sample holds.
type Kind uint32

// Record kinds, as in bpf/events.h.
const (
	KindRTT  Kind = 1
	KindFlow Kind = 2
)

// Sizes and offsets of the records in bpf/events.h (checked there with
// _Static_assert). All integers are host (little) endian except ports,
// which are kept in network order.
const (
	rttRecordSize  = 120
	flowRecordSize = 64
	tupleOffset    = 16
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
	kind := Kind(le.Uint32(raw))
	switch kind {
	case KindRTT:
		if len(raw) < rttRecordSize {
			return kind, ErrShortRecord
		}
		rtt.Ifindex = le.Uint32(raw[4:])
		rtt.Time = int64(le.Uint64(raw[8:])) + d.ClockOffset
		decodeTuple(raw[tupleOffset:], &rtt.Flow)
		rtt.MatchOnEgress = le.Uint32(raw[60:]) != 0
		rtt.RTT = time.Duration(le.Uint64(raw[64:]))
		rtt.MinRTT = time.Duration(le.Uint64(raw[72:]))
		rtt.SmoothedRTT = time.Duration(le.Uint64(raw[80:]))
		rtt.SentPackets = le.Uint64(raw[88:])
		rtt.SentBytes = le.Uint64(raw[96:])
		rtt.RecPackets = le.Uint64(raw[104:])
		rtt.RecBytes = le.Uint64(raw[112:])
	case KindFlow:
		if len(raw) < flowRecordSize {
			return kind, ErrShortRecord
		}
		flow.Time = int64(le.Uint64(raw[8:])) + d.ClockOffset
		decodeTuple(raw[tupleOffset:], &flow.Flow)
		flow.Type = FlowEventType(raw[60])
		flow.Reason = FlowReason(raw[61])
		flow.TriggeredBySrc = raw[62] != 0
	default:
		return kind, ErrUnknownKind
	}
	return kind, nil
}

// decodeTuple reads a struct network_tuple: two (16-byte address, be16
// port, u16 pad) endpoints, u16 protocol, u8 family, u8 pad.
// DecodeTuple fills f from a struct network_tuple (44 bytes).
func DecodeTuple(b []byte, f *Flow) { decodeTuple(b, f) }

func decodeTuple(b []byte, f *Flow) {
	f.Src = decodeEndpoint(b[0:20])
	f.Dst = decodeEndpoint(b[20:40])
	f.Proto = Protocol(le.Uint16(b[40:]))
}

func decodeEndpoint(b []byte) Endpoint {
	addr := netip.AddrFrom16([16]byte(b[:16])).Unmap()
	return Endpoint{IP: addr, Port: binary.BigEndian.Uint16(b[16:])}
}
