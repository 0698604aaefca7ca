package loader

import (
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/probe"
)

// Cleaner expires idle flows and unanswered timestamps. The walk over the
// maps always happens in the kernel, in one of two ways (Variant.Cleanup):
// map-element iterators, run by reading their (empty) output, or where the
// kernel refuses those, a tc program that walks the maps with
// bpf_for_each_map_elem, run by BPF_PROG_TEST_RUN. Both apply the same
// per-entry logic (bpf/cleanup.h).
//
// A walk over a map that holds nothing is skipped: the programs count
// every insert and delete, so the occupancies (inserts minus deletes) are
// four counter reads, where the timestamp map's walk visits all its
// buckets (131,072 by default) even when empty. Skipping loses no expiry:
// whatever is inserted after the read is younger than any timeout and
// meets the next walk.
type Cleaner struct {
	iters    []*link.Iter // the flow table's walk, then the timestamp map's
	run      *ebpf.Program
	frame    []byte    // the (ignored) packet BPF_PROG_TEST_RUN needs
	counters *ebpf.Map // the programs' per-CPU counters; nil: always walk
	perCPU   []uint64  // scratch for counters lookups
}

// NewCleaner sets up the best cleanup this kernel allows and records it in
// o.Variant.Cleanup. Without iterators and without bpf_for_each_map_elem it
// returns a Cleaner that does nothing: state is then only reclaimed when
// the maps fill (evict.h).
func (o *Objects) NewCleaner() (*Cleaner, error) {
	if c := o.iteratorCleaner(); c != nil {
		o.Variant.Cleanup = CleanupIterator
		return c, nil
	}
	if r := kernel.Check(kernel.ForEachMapElem); !r.OK() {
		o.Variant.note("bpf_for_each_map_elem %s: no timed expiry, idle state is replaced when the maps fill", r.Status)
		o.Variant.Cleanup = CleanupNone
		return &Cleaner{}, nil
	}
	if o.RttscopeCleanupRun == nil {
		o.RttscopeCleanupRun = o.loadOptional("rttscope_cleanup_run", "bpf_for_each_map_elem",
			"no timed expiry (idle state is replaced when the maps fill)")
	}
	if o.RttscopeCleanupRun == nil {
		o.Variant.Cleanup = CleanupNone
		return &Cleaner{}, nil
	}
	o.Variant.Cleanup = CleanupProgRun
	return &Cleaner{run: o.RttscopeCleanupRun, frame: make([]byte, 64), counters: o.Counters}, nil
}

// iteratorCleaner loads and attaches the cleanup iterators, or returns nil
// (with a note) when this kernel does not allow them.
func (o *Objects) iteratorCleaner() *Cleaner {
	if r := kernel.Check(kernel.MapElemIter); !r.OK() {
		o.Variant.note("map-element iterators %s: cleanup runs a tc program with bpf_for_each_map_elem instead", r.Status)
		return nil
	}
	const instead = "a tc program with bpf_for_each_map_elem for cleanup"
	if o.RttscopeCleanupFlows == nil {
		o.RttscopeCleanupFlows = o.loadOptional("rttscope_cleanup_flows", "map-element iterator", instead)
	}
	if o.RttscopeCleanupTimestamps == nil {
		o.RttscopeCleanupTimestamps = o.loadOptional("rttscope_cleanup_timestamps", "map-element iterator", instead)
	}
	if o.RttscopeCleanupFlows == nil || o.RttscopeCleanupTimestamps == nil {
		return nil
	}
	c := &Cleaner{counters: o.Counters}
	for _, it := range []link.IterOptions{
		{Program: o.RttscopeCleanupFlows, Map: o.FlowUsed},
		{Program: o.RttscopeCleanupTimestamps, Map: o.TsMap},
	} {
		l, err := link.AttachIter(it)
		if err != nil {
			c.Close()
			o.Variant.note("the kernel refused to attach the cleanup iterator %s: %s; using %s",
				it.Program, oneLine(kernel.Explain(err)), instead)
			return nil
		}
		c.iters = append(c.iters, l)
	}
	return c
}

// Run walks both maps once, each only if it holds something. Not for
// concurrent use.
func (c *Cleaner) Run() error {
	flows, timestamps := c.occupied()
	if c.run != nil {
		// One program walks both maps.
		if !flows && !timestamps {
			return nil
		}
		if _, err := c.run.Run(&ebpf.RunOptions{Data: c.frame}); err != nil {
			return fmt.Errorf("run cleanup program: %w", err)
		}
		return nil
	}
	holds := [2]bool{flows, timestamps} // in the order of c.iters
	for i, it := range c.iters {
		if !holds[i] {
			continue
		}
		rd, err := it.Open()
		if err != nil {
			return fmt.Errorf("open cleanup iterator: %w", err)
		}
		_, err = io.Copy(io.Discard, rd)
		_ = rd.Close() // read-only iterator
		if err != nil {
			return fmt.Errorf("run cleanup iterator: %w", err)
		}
	}
	return nil
}

// occupied reports whether the flow table and the timestamp map may hold
// entries: true unless the programs' counters say they are empty (also
// when a counter cannot be read). Deletes are read before inserts, so that
// traffic between the reads can only make a map look fuller.
func (c *Cleaner) occupied() (flows, timestamps bool) {
	if c.counters == nil {
		return true, true
	}
	flows = c.differ(probe.RttscopeCounterCOUNTER_FLOWS_DELETED, probe.RttscopeCounterCOUNTER_FLOWS_CREATED)
	timestamps = c.differ(probe.RttscopeCounterCOUNTER_TS_DELETED, probe.RttscopeCounterCOUNTER_TS_CREATED)
	return flows, timestamps
}

// differ reports whether counter inserted, read after deleted, exceeds it
// (summed over CPUs); true when either cannot be read.
func (c *Cleaner) differ(deleted, inserted probe.RttscopeCounter) bool {
	d, err := sumCounter(c.counters, uint32(deleted), &c.perCPU)
	if err != nil {
		return true
	}
	i, err := sumCounter(c.counters, uint32(inserted), &c.perCPU)
	return err != nil || i > d
}

// Close detaches the iterators. The programs belong to the Objects.
func (c *Cleaner) Close() error {
	for _, it := range c.iters {
		it.Close()
	}
	c.iters = nil
	return nil
}
