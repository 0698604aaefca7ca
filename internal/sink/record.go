package sink

import (
	"slices"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

// Kinds is a set of record types.
type Kinds uint8

// The record types.
const (
	RTTs Kinds = 1 << iota
	Flows
	Stats
	Aggregates
	FlowSummaries
	AnonKeys
	PDMs // PDM options and their interval summaries (rttscope pdm)
)

// kindsOf returns the record types a writer with capabilities c takes.
func kindsOf(c format.Capability) Kinds {
	k := RTTs | Flows | Stats
	if c&format.Aggregates != 0 {
		k |= Aggregates
	}
	if c&format.FlowSummaries != 0 {
		k |= FlowSummaries
	}
	if c&format.AnonKeys != 0 {
		k |= AnonKeys
	}
	if c&format.PDMRecords != 0 {
		k |= PDMs
	}
	return k
}

// item is one queued record. Samples and flow events, which come by the
// million, are held by value; the others, a few per interval, as deep
// copies on the heap (the caller's record is only lent for the call).
type item struct {
	kind  Kinds
	rtt   events.RTT
	flow  events.FlowEvent
	other any // *events.Stats, *events.Aggregate, *events.FlowSummary, *events.AnonKey, *events.PDM, *events.PDMInterval
}

// write passes it to w.
func (it *item) write(w format.Writer) error {
	switch it.kind {
	case RTTs:
		return w.WriteRTT(&it.rtt)
	case Flows:
		return w.WriteFlow(&it.flow)
	case Stats:
		return w.WriteStats(it.other.(*events.Stats))
	case Aggregates:
		return w.WriteAggregate(it.other.(*events.Aggregate))
	case FlowSummaries:
		return w.WriteFlowSummary(it.other.(*events.FlowSummary))
	case AnonKeys:
		return w.WriteAnonKey(it.other.(*events.AnonKey))
	case PDMs:
		if p, ok := it.other.(*events.PDM); ok {
			return w.WritePDM(p)
		}
		return w.WritePDMInterval(it.other.(*events.PDMInterval))
	}
	return nil
}

// copyPDMInterval returns a deep copy of p.
func copyPDMInterval(p *events.PDMInterval) *events.PDMInterval {
	c := *p
	for _, d := range []*events.Distribution{&c.DTLR, &c.DTLS, &c.NetworkRTT} {
		d.Histogram = slices.Clone(d.Histogram)
	}
	return &c
}

// copyAggregate returns a deep copy of a.
func copyAggregate(a *events.Aggregate) *events.Aggregate {
	c := *a
	c.Histogram = slices.Clone(a.Histogram)
	return &c
}
