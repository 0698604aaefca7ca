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
// one of two prefix maps, chosen by the global agg_epoch; Collect flips the
// epoch, waits until no program can still be writing to the old map, and
// then reads and zeroes it. Every update is thus counted in exactly one
// interval. Before reading it has the fast path's counts kept in the flows
// for that epoch folded into it (bpf/agg_fold.h). Collect must not be
// called concurrently.
//
// As in ePPing, a prefix's entry outlives its interval (zeroed, not
// deleted), since only tracked packets create entries and other traffic of
// a prefix without one goes to the backup entry (0.0.0.0/0, ::/0): an
// entry is deleted once it has seen no traffic for Timeout.
type Aggregator struct {
	objs  *Objects
	epoch uint32
	// Grace waits until every program run that may have read the old
	// epoch has finished. Nil: no wait (replay, where BPF_PROG_TEST_RUN
	// has returned before the flip).
	Grace func() error
	// Timeout is how long a prefix entry without traffic is kept
	// (ePPing's --aggregate-timeout); 0 keeps entries for ever.
	Timeout time.Duration
	keys    []probe.RttscopeAggKey
	vals    []probe.RttscopeAggStats
	zero    []probe.RttscopeAggStats
	h       []uint32
	// slotIdx, slotVals and slotZero are takeSlots' buffers: every slot
	// of agg_slots (values per CPU) and one slot's zero value.
	slotIdx  []uint32
	slotVals []probe.RttscopeAggSlot
	slotZero []probe.RttscopeAggSlot
	// frame is the packet the fold program's test run is handed.
	frame []byte
	// active is, per map, when each entry last had traffic (interval
	// end, Unix ns).
	active [2]map[probe.RttscopeAggKey]int64
	// global and counters are the cumulative values at the last Collect.
	global   probe.RttscopeAggGlobal
	counters events.Counters
}

// NewAggregator returns the interval collector. live selects the grace
// period of the live monitor (see WaitForPrograms).
func (o *Objects) NewAggregator(live bool) *Aggregator {
	a := &Aggregator{objs: o, h: make([]uint32, hist.Bins), Timeout: DefaultAggregateTimeout}
	a.active[0], a.active[1] = map[probe.RttscopeAggKey]int64{}, map[probe.RttscopeAggKey]int64{}
	if live {
		a.Grace = WaitForPrograms
	}
	return a
}

// DefaultAggregateTimeout is ePPing's: prefix entries idle this long go.
const DefaultAggregateTimeout = 30 * time.Second

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
// prefix that saw traffic or samples in it, in address order, then for the
// interval's global record (ePPing's protocol, ECN and error counters). The
// pointer is only valid during the call.
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
	if a.frame == nil {
		a.frame = make([]byte, 64)
	}
	if err := a.objs.foldFlows(a.frame); err != nil {
		return err
	}
	m := a.objs.AggMap0
	if old == 1 {
		m = a.objs.AggMap1
	}
	active := a.active[old&1]
	slots, err := a.takeSlots(old)
	if err != nil {
		return err
	}

	type entry struct {
		key probe.RttscopeAggKey
		agg events.Aggregate
	}
	var out []entry
	// visit sums one entry's per-CPU values; ok: it had traffic.
	visit := func(key probe.RttscopeAggKey, vals []probe.RttscopeAggStats) bool {
		e := entry{key: key}
		if !a.sum(&e.agg, vals) {
			return false
		}
		e.agg.Time, e.agg.Start = end, start
		e.agg.Prefix = prefixOf(&key)
		out = append(out, e)
		return true
	}
	var key probe.RttscopeAggKey
	a.keys = a.keys[:0]
	var stale []probe.RttscopeAggKey
	// A prefix entry with a backup entry's key (::/0 with prefix length
	// 0 configured) is merged with it below.
	var mapBackup [2][]probe.RttscopeAggStats
	it := m.Iterate()
	for it.Next(&key, &a.vals) {
		if c, ok := slots[key]; ok && len(a.vals) > 0 {
			addCounters(&a.vals[0].Rx, &c.Rx)
			addCounters(&a.vals[0].Tx, &c.Tx)
			delete(slots, key)
		}
		if fam, ok := backupFamily(&key); ok {
			mapBackup[fam] = slices.Clone(a.vals)
			continue
		}
		if !visit(key, a.vals) {
			// Idle: kept until the timeout.
			last, seen := active[key]
			if !seen {
				active[key] = end
			} else if a.Timeout > 0 && end-last > int64(a.Timeout) {
				stale = append(stale, key)
				delete(active, key)
			}
			continue
		}
		active[key] = end
		a.keys = append(a.keys, key)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read prefix map: %w", err)
	}
	if len(slots) > 0 {
		// A slot is filled only after its prefix's entry exists, and
		// entries go only here, after their slots were taken.
		return fmt.Errorf("aggregation: %d prefix slots without an entry in the prefix map", len(slots))
	}
	for fam := range mapBackup {
		vals, err := a.readBackup(old, fam)
		if err != nil {
			return err
		}
		if len(a.zero) != len(vals) {
			a.zero = make([]probe.RttscopeAggStats, len(vals))
		}
		key := backupKey(fam)
		if visit(key, append(vals, mapBackup[fam]...)) && mapBackup[fam] != nil {
			a.keys = append(a.keys, key)
		}
	}
	if err := a.reset(m, stale); err != nil {
		return err
	}
	if err := a.resetBackup(old); err != nil {
		return err
	}
	slices.SortFunc(out, func(x, y entry) int {
		if c := cmp.Compare(x.key.Ipv, y.key.Ipv); c != 0 {
			return c
		}
		if c := x.agg.Prefix.Addr().Compare(y.agg.Prefix.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(x.key.PrefixLen, y.key.PrefixLen)
	})
	for i := range out {
		if err := fn(&out[i].agg); err != nil {
			return err
		}
	}
	g, err := a.globalRecord()
	if err != nil {
		return err
	}
	return fn(&events.Aggregate{Time: end, Start: start, Global: g})
}

// reset zeroes the entries in a.keys and deletes the stale ones.
func (a *Aggregator) reset(m *ebpf.Map, stale []probe.RttscopeAggKey) error {
	for i := range a.keys {
		if err := m.Update(&a.keys[i], a.zero, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("empty prefix map: %w", err)
		}
	}
	for i := range stale {
		if err := m.Delete(&stale[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("empty prefix map: %w", err)
		}
	}
	return nil
}

// slotCounts is one prefix's traffic counted in its agg_slots slots.
type slotCounts struct{ Rx, Tx probe.RttscopeTrafficCounters }

// takeSlots returns the traffic that epoch's per-CPU prefix slots counted
// (bpf/agg.h, agg_slots), summed per prefix over slots and CPUs, and
// empties those slots. Only after the grace period: nothing writes to an
// old epoch's slots any more.
//
// The slots are read in one batch, both epochs (an array's batch starts
// at index 0), into buffers kept from the interval before: one system
// call and no allocation where a lookup per slot made 256 calls a second
// and garbage for the collector (docs/performance.md, "Round 7"). The
// other epoch's slots, which the programs are writing, are read and not
// used.
func (a *Aggregator) takeSlots(epoch uint32) (map[probe.RttscopeAggKey]*slotCounts, error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	n := int(a.objs.AggSlots.MaxEntries())
	if len(a.slotIdx) != n {
		a.slotIdx = make([]uint32, n)
		a.slotVals = make([]probe.RttscopeAggSlot, n*cpus)
		a.slotZero = make([]probe.RttscopeAggSlot, cpus)
	}
	var cursor ebpf.MapBatchCursor
	got := 0
	for got < n {
		k, err := a.objs.AggSlots.BatchLookup(&cursor, a.slotIdx[got:], a.slotVals[got*cpus:], nil)
		got += k
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break // that was the last batch
		}
		if err != nil {
			return nil, fmt.Errorf("read prefix slots: %w", err)
		}
	}
	out := map[probe.RttscopeAggKey]*slotCounts{}
	// Epoch e's slots are [e*half, (e+1)*half) (bpf/agg.h: 2 * AGG_SLOTS).
	half := uint32(n / 2)
	lo := epoch & 1 * half
	for i, idx := range a.slotIdx[:got] {
		if idx < lo || idx >= lo+half {
			continue
		}
		filled := false
		for c := range cpus {
			v := &a.slotVals[i*cpus+c]
			if v.Filled == 0 {
				continue
			}
			filled = true
			sc := out[v.Key]
			if sc == nil {
				sc = &slotCounts{}
				out[v.Key] = sc
			}
			addCounters(&sc.Rx, &v.Rx)
			addCounters(&sc.Tx, &v.Tx)
		}
		if !filled {
			continue
		}
		if err := a.objs.AggSlots.Put(idx, a.slotZero); err != nil {
			return nil, fmt.Errorf("empty prefix slots: %w", err)
		}
	}
	return out, nil
}

func addCounters(to, from *probe.RttscopeTrafficCounters) {
	for i := range 4 {
		to.Pkts[i] += from.Pkts[i]
		to.Bytes[i] += from.Bytes[i]
		to.Ecn[i] += from.Ecn[i]
	}
	for i := range events.NumEPPClasses {
		to.EppPkts[i] += from.EppPkts[i]
		to.EppBytes[i] += from.EppBytes[i]
	}
}

// The backup entries of epoch e are agg_backup[e*2+fam], fam 0 for IPv4
// and 1 for IPv6 (bpf/agg.h).
func backupIndex(epoch uint32, fam int) uint32 { return epoch&1*2 + uint32(fam) }

// backupFamily reports whether k is the key of a backup entry, and its
// family index. The programs' own /0 entries (prefix length 0 configured)
// have that key only for IPv6: an IPv4 key keeps ::ffff, so there the
// prefix and the backup entry are two records, as when both lived in the
// prefix map.
func backupFamily(k *probe.RttscopeAggKey) (int, bool) {
	for fam := range 2 {
		if *k == backupKey(fam) {
			return fam, true
		}
	}
	return 0, false
}

// backupKey is the key of family fam's backup entry, all zero but the
// family: 0.0.0.0/0 or ::/0.
func backupKey(fam int) probe.RttscopeAggKey {
	var k probe.RttscopeAggKey
	k.Ipv = unix.AF_INET
	if fam == 1 {
		k.Ipv = unix.AF_INET6
	}
	return k
}

// readBackup returns the per-CPU values of a backup entry.
func (a *Aggregator) readBackup(epoch uint32, fam int) ([]probe.RttscopeAggStats, error) {
	var vals []probe.RttscopeAggStats
	if err := a.objs.AggBackup.Lookup(backupIndex(epoch, fam), &vals); err != nil {
		return nil, fmt.Errorf("read backup entry: %w", err)
	}
	return vals, nil
}

// resetBackup zeroes the backup entries of an epoch.
func (a *Aggregator) resetBackup(epoch uint32) error {
	for fam := range 2 {
		if err := a.objs.AggBackup.Put(backupIndex(epoch, fam), a.zero); err != nil {
			return fmt.Errorf("empty backup entry: %w", err)
		}
	}
	return nil
}

// globalRecord returns the global counters since the last call.
func (a *Aggregator) globalRecord() (*events.GlobalCounters, error) {
	var perCPU []probe.RttscopeAggGlobal
	if err := a.objs.AggGlobalMap.Lookup(uint32(0), &perCPU); err != nil {
		return nil, fmt.Errorf("read global counters: %w", err)
	}
	var now probe.RttscopeAggGlobal
	for i := range perCPU {
		c := &perCPU[i]
		for p := range now.Proto {
			now.Proto[p].Pkts += c.Proto[p].Pkts
			now.Proto[p].Bytes += c.Proto[p].Bytes
		}
		now.NonipPkts += c.NonipPkts
		now.NonipBytes += c.NonipBytes
		for e := range now.Ecn {
			now.Ecn[e] += c.Ecn[e]
		}
	}
	counters, err := a.objs.ReadCounters()
	if err != nil {
		return nil, err
	}
	prev, prevCounters := &a.global, &a.counters
	g := &events.GlobalCounters{
		NonIPPackets:    now.NonipPkts - prev.NonipPkts,
		NonIPBytes:      now.NonipBytes - prev.NonipBytes,
		PacketTSStore:   counters[probe.RttscopeCounterCOUNTER_TS_MAP_FULL] - prevCounters[probe.RttscopeCounterCOUNTER_TS_MAP_FULL],
		FlowCreate:      counters[probe.RttscopeCounterCOUNTER_FLOW_MAP_FULL] - prevCounters[probe.RttscopeCounterCOUNTER_FLOW_MAP_FULL],
		AggSubnetCreate: counters[probe.RttscopeCounterCOUNTER_AGG_MAP_FULL] - prevCounters[probe.RttscopeCounterCOUNTER_AGG_MAP_FULL],
	}
	var ip uint64
	for p := range now.Proto {
		g.ProtoPackets[p] = now.Proto[p].Pkts - prev.Proto[p].Pkts
		g.ProtoBytes[p] = now.Proto[p].Bytes - prev.Proto[p].Bytes
		ip += g.ProtoPackets[p]
	}
	for e := range now.Ecn {
		g.ECN[e] = now.Ecn[e] - prev.Ecn[e]
	}
	// Not-ECT: the IP packets of the other codepoints (struct agg_global).
	g.ECN[0] = events.Sub(ip, g.ECN[1]+g.ECN[2]+g.ECN[3])
	a.global, a.counters = now, counters
	return g, nil
}

// prefixOf is the key's prefix; the backup entries (all zero, prefix
// length 0) are 0.0.0.0/0 and ::/0.
func prefixOf(k *probe.RttscopeAggKey) netip.Prefix {
	a := k.Prefix.In6U.U6Addr8
	addr := netip.AddrFrom16(a)
	if k.Ipv == unix.AF_INET {
		addr = netip.AddrFrom4([4]byte(a[12:]))
	}
	return netip.PrefixFrom(addr, int(k.PrefixLen))
}

// sum folds the per-CPU values vals into g; it reports whether the
// entry saw any traffic or sample.
func (a *Aggregator) sum(g *events.Aggregate, vals []probe.RttscopeAggStats) bool {
	clear(a.h)
	var lin [events.LinBins]uint32
	var sum, min, max uint64
	for i := range vals {
		v := &vals[i]
		addTraffic(&g.RX, &v.Rx)
		addTraffic(&g.TX, &v.Tx)
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
		for b, n := range v.LinHist {
			lin[b] += n
		}
	}
	rx, _ := g.RX.EPPTotals()
	tx, _ := g.TX.EPPTotals()
	if g.Count == 0 {
		return rx+tx > 0
	}
	var d events.Distribution
	d.Set(a.h, g.Count, sum, min, max)
	g.Min, g.Mean, g.Max, g.Sum = d.Min, d.Mean, d.Max, d.Sum
	g.P50, g.P90, g.P95, g.P99 = d.P50, d.P90, d.P95, d.P99
	g.Histogram = d.Histogram
	// ePPing's array runs up to the bin of the maximum.
	g.LinHist = slices.Clone(lin[:linBins(max)])
	return true
}

// linBins is the length of ePPing's histogram array for a maximum RTT of
// hi ns: up to the bin of hi.
func linBins(hi uint64) int {
	return int(min(hi/uint64(events.LinBinWidth)+1, events.LinBins))
}

// addTraffic adds the kernel's counters c to t, with the two counts the
// programs leave out (bpf/agg.h, struct traffic_counters): Not-ECT packets
// are all packets less the other codepoints', ePPing's TCP_TS packets are
// TCP's less TCP_noTS's. Both are sums, so deriving them per value (a
// CPU's, a slot's) or after summing gives the same.
func addTraffic(t *events.Traffic, c *probe.RttscopeTrafficCounters) {
	var all uint64
	for i := range 4 {
		t.Packets[i] += c.Pkts[i]
		t.Bytes[i] += c.Bytes[i]
		t.ECN[i] += c.Ecn[i]
		all += c.Pkts[i]
	}
	t.ECN[0] += events.Sub(all, c.Ecn[1]+c.Ecn[2]+c.Ecn[3])
	for i := range events.NumEPPClasses {
		t.EPPPackets[i] += c.EppPkts[i]
		t.EPPBytes[i] += c.EppBytes[i]
	}
	t.EPPPackets[events.EPPTCPTS] += events.Sub(c.Pkts[events.ClassTCP], c.EppPkts[events.EPPTCPNoTS])
}
