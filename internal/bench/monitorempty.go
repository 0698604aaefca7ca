package bench

import (
	"context"
	"fmt"

	"github.com/cilium/ebpf"

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

// setupEmpty loads and attaches the empty program (one program on both
// hooks: its counters cover both).
func (ms *monState) setupEmpty(context.Context) (func() error, error) {
	ms.noteStale()
	var objs probe.EmptyObjects
	if err := probe.LoadEmptyObjects(&objs, nil); err != nil {
		return nil, fmt.Errorf("load the empty program: %w", err)
	}
	links, err := attachTCXPair(ms.lb.lab.Middlebox.Name, ms.lb.ifidx, objs.EmptyTc, objs.EmptyTc)
	if err != nil {
		_ = objs.Close() // the attach error is the one to report
		return nil, fmt.Errorf("attach the empty program on %s: %w", ms.lb.ifname, err)
	}
	undo := func() error {
		ms.progs = nil
		err := closeLinks(links)
		_ = objs.Close() // after its links; nothing else holds it
		return err
	}
	ms.progs = []*ebpf.Program{objs.EmptyTc}
	return undo, nil
}

// addAgainstEmpty derives, per case, each monitor's forwarded packets/s
// as a ratio to the empty program's: what the monitor costs the router
// beyond what any tc program costs. The interval is the bootstrap
// interval of the ratio of means, paired by round when both series have
// every round (the rounds ran interleaved).
func addAgainstEmpty(res *Result) {
	for _, key := range res.caseKeys() {
		if key.group != GroupMonitor {
			continue
		}
		empty := res.Lookup(seriesID(key.group, key.cas, ProgEmpty, "", MetricFwdPPS))
		if empty == nil || empty.Summary.N == 0 {
			continue
		}
		for _, s := range res.Series {
			if s.Group != key.group || s.Case != key.cas || s.Metric != MetricFwdPPS || s.Program == ProgNone || s.Program == ProgEmpty {
				continue
			}
			if d, ok := ratioOfSeries(s, empty, "packets_per_s_vs_empty", "mean forwarded packets/s / the empty program's"); ok {
				res.Derived = append(res.Derived, d)
			}
		}
	}
}
