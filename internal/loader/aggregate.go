package loader

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/hist"
	"github.com/rttscope/rttscope/internal/probe"
)

// Aggregator ends the intervals of aggregated mode. The programs write to
// one of two prefix maps and one half of the traffic counters' per-CPU
// cache (bpf/agg.h), chosen by the global agg_epoch; Collect flips the
// epoch, waits until no program can still be writing to the old map and
// half, and then reads and empties them. Every update is thus counted in
// exactly one interval. Collect must not be called concurrently.
type Aggregator struct {
	objs  *Objects
	epoch uint32
	// Grace waits until every program run that may have read the old
	// epoch has finished. Nil: no wait (replay, where BPF_PROG_TEST_RUN
	// has returned before the flip).
	Grace func() error
	keys  []probe.RttscopeAggKey
	vals  []probe.RttscopeAggStats
	cache []probe.RttscopeAggCacheEntry
	zero  []probe.RttscopeAggCacheEntry
	h     []uint32
}

// NewAggregator returns the interval collector. live selects the grace
// period of the live monitor (see WaitForPrograms).
func (o *Objects) NewAggregator(live bool) *Aggregator {
	a := &Aggregator{objs: o, h: make([]uint32, hist.Bins)}
	if live {
		a.Grace = WaitForPrograms
	}
	return a
}

const (
	membarrierCmdQuery  = 0
	membarrierCmdGlobal = 1
)

// WaitForPrograms returns once every BPF program run that started before
// the call has finished. tc, XDP and iterator programs run inside an RCU
// read-side critical section (softirq or rcu_read_lock), and
// membarrier(MEMBARRIER_CMD_GLOBAL) is implemented with synchronize_rcu(),
// which waits for every such section in progress. Kernels with nohz_full
// refuse that command; there a 50 ms sleep stands in, far longer than any
// run of these programs (a few µs).
func WaitForPrograms() error {
	r, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdQuery, 0, 0)
	if errno == 0 && r&membarrierCmdGlobal != 0 {
		if _, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobal, 0, 0); errno == 0 {
			return nil
		}
	}
	time.Sleep(50 * time.Millisecond)
	return nil
}

// Collect ends the interval [start, end) (Unix ns) and calls fn for each
// prefix that saw traffic or samples in it, in address order. The pointer
// is only valid during the call.
func (a *Aggregator) Collect(start, end int64, fn func(*events.Aggregate) error) error {
	old := a.epoch
	next := old ^ 1
	if err := a.objs.AggEpoch.Set(next); err != nil {
		return fmt.Errorf("flip aggregation epoch: %w", err)
	}
	a.epoch = next
	if a.Grace != nil {
		if err := a.Grace(); err != nil {
			return err
		}
	}
	m := a.objs.AggMap0
	if old == 1 {
		m = a.objs.AggMap1
	}

	recs := map[probe.RttscopeAggKey]*events.Aggregate{}
	var key probe.RttscopeAggKey
	a.keys = a.keys[:0]
	it := m.Iterate()
	for it.Next(&key, &a.vals) {
		a.keys = append(a.keys, key)
		g := &events.Aggregate{}
		a.sum(g)
		recs[key] = g
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read prefix map: %w", err)
	}
	if err := a.readCache(old, recs); err != nil {
		return err
	}
	if len(a.keys) > 0 {
		if _, err := m.BatchDelete(a.keys, nil); err != nil {
			if !errors.Is(err, ebpf.ErrNotSupported) {
				return fmt.Errorf("empty prefix map: %w", err)
			}
			for i := range a.keys {
				if err := m.Delete(&a.keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					return fmt.Errorf("empty prefix map: %w", err)
				}
			}
		}
	}

	type entry struct {
		key probe.RttscopeAggKey
		agg *events.Aggregate
	}
	out := make([]entry, 0, len(recs))
	for k, g := range recs {
		g.Time, g.Start = end, start
		g.Prefix = prefixOf(&k)
		out = append(out, entry{k, g})
	}
	slices.SortFunc(out, func(x, y entry) int {
		if c := cmp.Compare(x.key.Ipv, y.key.Ipv); c != 0 {
			return c
		}
		return x.agg.Prefix.Addr().Compare(y.agg.Prefix.Addr())
	})
	for i := range out {
		if err := fn(out[i].agg); err != nil {
			return err
		}
	}
	return nil
}

// readCache adds the counts in the traffic cache's half of epoch, every
// CPU's, to recs and empties that half.
func (a *Aggregator) readCache(epoch uint32, recs map[probe.RttscopeAggKey]*events.Aggregate) error {
	c := a.objs.AggCache
	slots := c.MaxEntries() / 2 // [epoch][AGG_CACHE_SLOTS]
	for slot := epoch * slots; slot < (epoch+1)*slots; slot++ {
		if err := c.Lookup(slot, &a.cache); err != nil {
			return fmt.Errorf("read prefix cache: %w", err)
		}
		used := false
		for i := range a.cache {
			e := &a.cache[i]
			if e.Key.Ipv == 0 {
				continue
			}
			used = true
			k := e.Key
			k.Reserved = 0
			g := recs[k]
			if g == nil {
				g = &events.Aggregate{}
				recs[k] = g
			}
			t := &g.RX
			if e.Egress != 0 {
				t = &g.TX
			}
			addTraffic(t, e.C.Pkts, e.C.Bytes, e.C.Ecn)
		}
		if !used {
			continue
		}
		if len(a.zero) != len(a.cache) {
			a.zero = make([]probe.RttscopeAggCacheEntry, len(a.cache))
		}
		if err := c.Put(slot, a.zero); err != nil {
			return fmt.Errorf("empty prefix cache: %w", err)
		}
	}
	return nil
}

func prefixOf(k *probe.RttscopeAggKey) netip.Prefix {
	addr := netip.AddrFrom16(k.Prefix.In6U.U6Addr8).Unmap()
	return netip.PrefixFrom(addr, int(k.PrefixLen))
}

// sum folds the per-CPU values in a.vals into g.
func (a *Aggregator) sum(g *events.Aggregate) {
	clear(a.h)
	var sum, min, max uint64
	for i := range a.vals {
		v := &a.vals[i]
		addTraffic(&g.RX, v.Rx.Pkts, v.Rx.Bytes, v.Rx.Ecn)
		addTraffic(&g.TX, v.Tx.Pkts, v.Tx.Bytes, v.Tx.Ecn)
		if v.RttCount == 0 {
			continue
		}
		if g.Count == 0 || v.RttMin < min {
			min = v.RttMin
		}
		if v.RttMax > max {
			max = v.RttMax
		}
		g.Count += v.RttCount
		sum += v.RttSum
		for src, n := range v.SourceCount {
			g.BySource[src] += uint64(n)
		}
		for b, n := range v.Hist[:hist.Bins] {
			a.h[b] += n
		}
	}
	if g.Count == 0 {
		return
	}
	var d events.Distribution
	d.Set(a.h, g.Count, sum, min, max)
	g.Min, g.Mean, g.Max, g.Sum = d.Min, d.Mean, d.Max, d.Sum
	g.P50, g.P90, g.P95, g.P99 = d.P50, d.P90, d.P95, d.P99
	g.Histogram = d.Histogram
}

func addTraffic(t *events.Traffic, pkts, bytes, ecn [4]uint64) {
	for i := range 4 {
		t.Packets[i] += pkts[i]
		t.Bytes[i] += bytes[i]
		t.ECN[i] += ecn[i]
	}
}
