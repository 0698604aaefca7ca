package bench

import (
	"context"
	"fmt"

	"github.com/rttscope/rttscope/internal/probe"
)

// The monitor study's "empty" configuration: an empty tc program on the
// interface's TCX egress and ingress hooks, attached by the bench itself.
// It is what any tc-based monitor pays before doing anything: the hooks'
// dispatch, the program call, and here bpf_stats' accounting, of which
// only the residual shows in the programs' run time. So the forwarding
// ratio of a monitor against it is the monitor's own cost, and the
// empty program's against "none" is the part of the throughput cost that
// no program run time accounts for.

// setupEmpty loads and attaches the empty program, one instance per hook
// so that each hook's run time is its own (bpf_ns_per_packet_egress,
// _ingress).
func (ms *monState) setupEmpty(context.Context) (func() error, error) {
	ms.noteStale()
	var eg, in probe.EmptyObjects
	closeObjs := func() {
		_ = eg.Close() // loaded programs only; nothing to report
		_ = in.Close()
	}
	if err := probe.LoadEmptyObjects(&eg, nil); err != nil {
		return nil, fmt.Errorf("load the empty program: %w", err)
	}
	if err := probe.LoadEmptyObjects(&in, nil); err != nil {
		closeObjs()
		return nil, fmt.Errorf("load the empty program: %w", err)
	}
	links, err := attachTCXPair(ms.lb.lab.Middlebox.Name, ms.lb.ifidx, eg.EmptyTc, in.EmptyTc)
	if err != nil {
		closeObjs() // the attach error is the one to report
		return nil, fmt.Errorf("attach the empty program on %s: %w", ms.lb.ifname, err)
	}
	undo := func() error {
		ms.progs = nil
		err := closeLinks(links)
		closeObjs() // after its links; nothing else holds them
		return err
	}
	ms.progs = []hookProgram{{hookEgress, eg.EmptyTc}, {hookIngress, in.EmptyTc}}
	return undo, nil
}

// addAgainstEmpty derives, per case, each monitor's figures as ratios to
// the empty program's: its forwarded packets/s (what the monitor costs the
// router beyond what any tc program costs) and its BPF ns per packet at
// each hook (issue 15's ratio to the empty program on the same path).
// The interval is the bootstrap interval of the ratio of means, paired by
// round when both series have every round (the rounds ran interleaved).
func addAgainstEmpty(res *Result) {
	against := []struct{ metric, name, how string }{
		{MetricFwdPPS, "packets_per_s_vs_empty", "mean forwarded packets/s / the empty program's"},
		{MetricBPFNsPerPktEgress, MetricBPFNsPerPktEgress + "_vs_empty", "mean BPF ns per packet at egress / the empty program's"},
		{MetricBPFNsPerPktIngress, MetricBPFNsPerPktIngress + "_vs_empty", "mean BPF ns per packet at ingress / the empty program's"},
	}
	for _, key := range res.caseKeys() {
		if key.group != GroupMonitor {
			continue
		}
		for _, a := range against {
			empty := res.Lookup(seriesID(key.group, key.cas, ProgEmpty, "", a.metric))
			if empty == nil || empty.Summary.N == 0 {
				continue
			}
			for _, s := range res.Series {
				if s.Group != key.group || s.Case != key.cas || s.Metric != a.metric || s.Program == ProgNone || s.Program == ProgEmpty || s.Summary.N == 0 {
					continue
				}
				if d, ok := ratioOfSeries(s, empty, a.name, a.how); ok {
					res.Derived = append(res.Derived, d)
				}
			}
		}
	}
}
