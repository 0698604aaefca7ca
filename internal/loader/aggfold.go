package loader

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/kernel"
)

// aggFold says whether aggregated mode's fast path counts in the flows
// and has them folded into the prefixes at each interval's end
// (bpf/agg_fold.h): in aggregated mode, where the kernel has
// bpf_for_each_map_elem for the fold's walk. The answer goes into the
// programs' code (cfg_agg_fold), so it is taken before they load.
func aggFold(cfg Config) kernel.Result {
	if !cfg.Aggregate {
		return kernel.Result{Status: kernel.Disabled}
	}
	return kernel.Check(kernel.ForEachMapElem)
}

// loadAggFold loads the fold program when the data path counts for it;
// without it those counts would never reach a record, so its refusal is
// an error like the data path's. Without bpf_for_each_map_elem the data
// path counts every packet in the prefix slots instead: a note says so.
func (o *Objects) loadAggFold(fold kernel.Result) error {
	if !o.Config.Aggregate {
		return nil
	}
	if !fold.OK() {
		o.Variant.note("bpf_for_each_map_elem %s: aggregated mode counts every packet in the prefix slots (no fold of the flows' counts)", fold.Status)
		return nil
	}
	const name = "rttscope_agg_fold"
	p, err := o.loadProgram(name)
	if err != nil {
		return dataPathError(name, err)
	}
	o.RttscopeAggFold = p
	return nil
}

// foldFlows adds what the flows counted in the old epoch's parity to that
// epoch's prefix records (bpf/agg_fold.h). Only after the epoch flip and
// the grace period, before the old epoch is read; frame is the (ignored)
// packet BPF_PROG_TEST_RUN needs. A no-op without the fold program.
func (o *Objects) foldFlows(frame []byte) error {
	if o.RttscopeAggFold == nil {
		return nil
	}
	if _, err := o.RttscopeAggFold.Run(&ebpf.RunOptions{Data: frame}); err != nil {
		return fmt.Errorf("fold the flows' counts into the prefixes: %w", err)
	}
	return nil
}
