package bench

import (
	"context"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/rttscope/rttscope/internal/nsrun"
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
	var links []link.Link
	undo := func() error {
		ms.progs = nil
		err := closeLinks(links)
		_ = objs.Close() // after its links; nothing else holds it
		return err
	}
	err := nsrun.Named(ms.lb.lab.Middlebox.Name, func() error {
		for _, dir := range []ebpf.AttachType{ebpf.AttachTCXEgress, ebpf.AttachTCXIngress} {
			l, err := link.AttachTCX(link.TCXOptions{Interface: ms.lb.ifidx, Program: objs.EmptyTc, Attach: dir})
			if err != nil {
				return fmt.Errorf("attach the empty program (TCX %v on %s): %w", dir, ms.lb.ifname, err)
			}
			links = append(links, l)
		}
		return nil
	})
	if err != nil {
		_ = undo() // the attach error is the one to report
		return nil, err
	}
	ms.progs = []*ebpf.Program{objs.EmptyTc}
	return undo, nil
}
