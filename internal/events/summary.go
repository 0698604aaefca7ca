package events

import (
	"time"

	"github.com/rttscope/rttscope/internal/hist"
	"github.com/rttscope/rttscope/internal/probe"
)

// KindFlowSummary is the record kind of per-flow summaries (they travel in
// their own ring buffer and iterator stream, not with RTT and flow events).
const KindFlowSummary = Kind(probe.RttscopeEventTypeEVENT_TYPE_FLOW_SUMMARY)

// Layout of struct flow_summary_event (bpf/summary.h): the header of
// decode.go with a u32 reason, then u64 start and two struct
// flow_summary_dir_event of u64 fields and a u16 histogram.
const (
	FlowSummarySize  = 1096
	summaryOffReason = 4
	summaryOffStart  = 64
	summaryDirOffset = 72
	summaryDirSize   = 512
	dirOffPkts       = 0
	dirOffBytes      = 8
	dirOffCount      = 16
	dirOffSum        = 24
	dirOffMin        = 32
	dirOffMax        = 40
	dirOffHist       = 48
	dirOffBySource   = 488 // u32 per source
)

// FlowDirSummary covers what one side of a flow sent, and the RTTs of its
// packets (answered by the other side).
type FlowDirSummary struct {
	Packets, Bytes uint64
	// Count is the number of RTT samples; the durations are zero without.
	Count          uint64
	Min, Mean, Max time.Duration // exact
	P50, P99       time.Duration // from a coarse histogram (within 6.25%)
	// BySource counts the samples of each source (indexed by Source).
	BySource [NumSources]uint64
}

// FlowSummary summarises one flow: at its end (Reason says why) or, with
// Reason 0, periodically while it lasts.
type FlowSummary struct {
	// Time is when the summary was taken, Start when the flow was first
	// seen (Unix ns).
	Time, Start int64
	// Flow is in the direction of the packet that opened the flow; Src
	// describes what Flow.Src sent, Dst what Flow.Dst sent.
	Flow     Flow
	Reason   FlowReason
	Src, Dst FlowDirSummary
}

// DecodeFlowSummary fills s from a flow_summary_event record.
func (d *Decoder) DecodeFlowSummary(raw []byte, s *FlowSummary) error {
	if len(raw) < FlowSummarySize {
		return ErrShortRecord
	}
	if Kind(le.Uint32(raw[offKind:])) != KindFlowSummary {
		return ErrUnknownKind
	}
	s.Reason = FlowReason(le.Uint32(raw[summaryOffReason:]))
	s.Time = int64(le.Uint64(raw[offTimestamp:])) + d.ClockOffset
	decodeTuple(raw[tupleOffset:], &s.Flow)
	s.Start = int64(le.Uint64(raw[summaryOffStart:])) + d.ClockOffset
	decodeDirSummary(raw[summaryDirOffset:], &s.Src)
	decodeDirSummary(raw[summaryDirOffset+summaryDirSize:], &s.Dst)
	return nil
}

func decodeDirSummary(b []byte, d *FlowDirSummary) {
	var h [hist.CoarseBins]uint16
	for i := range h {
		h[i] = le.Uint16(b[dirOffHist+2*i:])
	}
	var src [NumSources]uint32
	for i := range src {
		src[i] = le.Uint32(b[dirOffBySource+4*i:])
	}
	d.Set(le.Uint64(b[dirOffPkts:]), le.Uint64(b[dirOffBytes:]), le.Uint64(b[dirOffCount:]), le.Uint64(b[dirOffSum:]),
		le.Uint64(b[dirOffMin:]), le.Uint64(b[dirOffMax:]), h[:], src[:])
}

// Set fills d from the kernel's raw per-direction summary: packets and
// bytes sent, RTT sample count, sum, min and max (ns), the coarse
// histogram (hist.CoarseBins counts) and the samples per source.
func (d *FlowDirSummary) Set(pkts, bytes, count, sum, min, max uint64, h []uint16, bySource []uint32) {
	d.Packets, d.Bytes, d.Count = pkts, bytes, count
	for i := range d.BySource {
		d.BySource[i] = 0
		if i < len(bySource) {
			d.BySource[i] = uint64(bySource[i])
		}
	}
	d.Min, d.Mean, d.Max, d.P50, d.P99 = 0, 0, 0, 0, 0
	if d.Count == 0 {
		return
	}
	d.Min, d.Max = time.Duration(min), time.Duration(max)
	d.Mean = time.Duration(sum / d.Count)
	d.P50 = time.Duration(hist.CoarseQuantile(h[:], d.Count, 0.5, min, max))
	d.P99 = time.Duration(hist.CoarseQuantile(h[:], d.Count, 0.99, min, max))
}
