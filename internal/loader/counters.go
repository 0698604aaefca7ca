package loader

import (
	"fmt"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/telemetry"
)

// HookPrograms returns the packet programs Attach hooks to every
// interface with the given ingress hook (IngressTC, "" or IngressXDP),
// named as in the stats record, for their run time statistics.
func (o *Objects) HookPrograms(ingressHook string) []telemetry.Program {
	progs := []telemetry.Program{{Name: telemetry.TCEgress, Prog: o.RttscopeTcEgress}}
	switch ingressHook {
	case IngressTC, "":
		progs = append(progs, telemetry.Program{Name: telemetry.TCIngress, Prog: o.RttscopeTcIngress})
	case IngressXDP:
		progs = append(progs, telemetry.Program{Name: telemetry.XDPIngress, Prog: o.RttscopeXdpIngress})
	}
	return progs
}

// Counters returns the kernel counters summed over all CPUs.
func (o *Objects) Counters() (probe.RttscopeCounters, error) {
	var perCPU []probe.RttscopeCounters
	var sum probe.RttscopeCounters
	if err := o.PercpuCounters.Lookup(uint32(0), &perCPU); err != nil {
		return sum, fmt.Errorf("read counters: %w", err)
	}
	for _, c := range perCPU {
		sum.Packets += c.Packets
		sum.RttEvents += c.RttEvents
		sum.FlowEvents += c.FlowEvents
		sum.RingbufFull += c.RingbufFull
		sum.FlowsCreated += c.FlowsCreated
		sum.FlowsDeleted += c.FlowsDeleted
		sum.FlowMapFull += c.FlowMapFull
		sum.FlowsTimedOut += c.FlowsTimedOut
		sum.TsCreated += c.TsCreated
		sum.TsDeleted += c.TsDeleted
		sum.TsMapFull += c.TsMapFull
		sum.TsExpired += c.TsExpired
		sum.FlowsEvicted += c.FlowsEvicted
		sum.TsEvicted += c.TsEvicted
		sum.AggSamples += c.AggSamples
		sum.AggMapFull += c.AggMapFull
		sum.SummaryMapFull += c.SummaryMapFull
		sum.SummaryRingbufFull += c.SummaryRingbufFull
		sum.SummariesSent += c.SummariesSent
	}
	return sum, nil
}

// Stats fills the telemetry record from the kernel counters. Occupancy is
// derived from inserts minus deletes, so no map walk is needed.
func (o *Objects) Stats(s *events.Stats) error {
	c, err := o.Counters()
	if err != nil {
		return err
	}
	s.Packets = c.Packets
	s.RTTEvents = c.RttEvents
	s.FlowEvents = c.FlowEvents
	s.FlowMapFull = c.FlowMapFull
	s.TimestampMapFull = c.TsMapFull
	s.RingbufFull = c.RingbufFull
	s.FlowsTimedOut = c.FlowsTimedOut
	s.TimestampsExpired = c.TsExpired
	s.Flows = sub(c.FlowsCreated, c.FlowsDeleted)
	s.Timestamps = sub(c.TsCreated, c.TsDeleted)
	s.FlowsEvicted = c.FlowsEvicted
	s.TimestampsEvicted = c.TsEvicted
	s.AggregatedSamples = c.AggSamples
	s.PrefixMapFull = c.AggMapFull
	return nil
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
