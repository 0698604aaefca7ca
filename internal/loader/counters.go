package loader

import (
	"fmt"

	"github.com/cilium/ebpf"

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

// ReadCounters returns the kernel counters summed over all CPUs.
func (o *Objects) ReadCounters() (events.Counters, error) {
	var sum events.Counters
	var perCPU []uint64
	for c := range sum {
		n, err := sumCounter(o.Counters, uint32(c), &perCPU)
		if err != nil {
			return sum, err
		}
		sum[c] = n
	}
	return sum, nil
}

// sumCounter returns kernel counter k of the per-CPU counters map m,
// summed over all CPUs; perCPU is scratch kept between calls.
func sumCounter(m *ebpf.Map, k uint32, perCPU *[]uint64) (uint64, error) {
	if err := m.Lookup(k, perCPU); err != nil {
		return 0, fmt.Errorf("read kernel counter %d: %w", k, err)
	}
	var n uint64
	for _, v := range *perCPU {
		n += v
	}
	return n, nil
}

// Stats fills the counters of the telemetry record from the kernel's. The
// fast path's packets (packets, fast_path_packets) lag by up to
// FAST_COUNT_BATCH-1 per direction of a flow still in the table
// (bpf/fastpath.h, fast_count): a periodic record costs no walk of the
// table. StatsExact counts them too.
func (o *Objects) Stats(s *events.Stats) error {
	c, err := o.ReadCounters()
	if err != nil {
		return err
	}
	s.SetCounters(&c)
	return nil
}

// StatsExact is Stats with the fast path's packets that the flows in the
// table still keep: one walk of the slots in use, for a run's last record
// and for replay.
func (o *Objects) StatsExact(s *events.Stats) error {
	c, err := o.ReadCounters()
	if err != nil {
		return err
	}
	kept, err := o.unflushedFastPackets()
	if err != nil {
		return err
	}
	c[probe.RttscopeCounterCOUNTER_FAST_PATH] += kept
	s.SetCounters(&c)
	return nil
}
