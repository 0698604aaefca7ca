package loader

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// Kernel memory of the maps (docs/aggregation.md). Every map is
// preallocated at load, so this is a bound the load fixes, not a figure
// that grows with traffic. With P possible CPUs, for a hash map of N
// entries, key K and value V bytes (rounded up to 8):
//
//	hash:        N' * (48 + K + V) + pow2(N) * 16,   N' = N + P (spare elements)
//	per-CPU hash: N * (48 + K + 8 + P*V) + pow2(N) * 16
//	(per-CPU) array: N * V (* P)
//	ring buffer: its size
//
// 48 is struct htab_elem, 16 struct bucket (x86-64, Linux 6.x).
const (
	htabElemSize = 48
	bucketSize   = 16
)

// MapMemory is the memory of one map: Estimate from the formula above,
// Kernel as the kernel reports it (fdinfo memlock, 0 if unknown).
type MapMemory struct {
	Name             string
	Entries          uint32
	Estimate, Kernel uint64
}

func round8(n uint32) uint64 { return (uint64(n) + 7) &^ 7 }

func pow2(n uint32) uint64 {
	p := uint64(1)
	for p < uint64(n) {
		p <<= 1
	}
	return p
}

// estimateMap applies the formula to a map with nCPU possible CPUs.
func estimateMap(typ ebpf.MapType, entries, key, value uint32, nCPU int) uint64 {
	n, p := uint64(entries), uint64(nCPU)
	k, v := round8(key), round8(value)
	switch typ {
	case ebpf.Hash:
		return (n+p)*(htabElemSize+k+v) + pow2(entries)*bucketSize
	case ebpf.LRUHash:
		return n*(htabElemSize+k+v) + pow2(entries)*bucketSize
	case ebpf.PerCPUHash:
		return n*(htabElemSize+k+8+p*v) + pow2(entries)*bucketSize
	case ebpf.Array:
		return n * v
	case ebpf.PerCPUArray:
		return n * v * p
	case ebpf.RingBuf:
		return n
	}
	return n * (k + v)
}

// MemoryUsage returns the memory of every map of the loaded objects, the
// estimate and the kernel's own figure.
func (o *Objects) MemoryUsage() ([]MapMemory, error) {
	nCPU, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	var out []MapMemory
	for name, m := range o.maps() {
		mm := MapMemory{Name: name, Entries: m.MaxEntries(),
			Estimate: estimateMap(m.Type(), m.MaxEntries(), m.KeySize(), m.ValueSize(), nCPU)}
		mm.Kernel = fdinfoMemlock(m.FD())
		out = append(out, mm)
	}
	sortMem(out)
	return out, nil
}

func (o *Objects) maps() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		"flow_map": o.FlowMap, "flow_used": o.FlowUsed, "ts_map": o.TsMap, "events": o.Events,
		"agg_map0": o.AggMap0, "agg_map1": o.AggMap1, "agg_zero": o.AggZero,
		"agg_backup": o.AggBackup, "agg_absent": o.AggAbsent, "agg_slots": o.AggSlots, "agg_global_map": o.AggGlobalMap,
		"ts_ring":  o.TsRing,
		"counters": o.Counters, "l3_ifaces": o.L3Ifaces,
		"summary_map": o.SummaryMap, "summary_zero": o.SummaryZero,
		"summaries": o.Summaries, "summary_scratch": o.SummaryScratch,
		"dns_names": o.DnsNames,
	}
}

func sortMem(m []MapMemory) {
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && (m[j].Estimate > m[j-1].Estimate ||
			m[j].Estimate == m[j-1].Estimate && m[j].Name < m[j-1].Name); j-- {
			m[j], m[j-1] = m[j-1], m[j]
		}
	}
}

// fdinfoMemlock reads the kernel's memory figure of a map (Linux 6.4+:
// the map's mem_usage) from /proc/self/fdinfo.
func fdinfoMemlock(fd int) uint64 {
	f, err := os.Open("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "memlock:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// MemorySummary is the start-up line: "kernel map memory: 57.3 MiB
// (estimate 57.1 MiB; flow_map 102400 entries 26.0 MiB, ...)".
func MemorySummary(ms []MapMemory) string {
	var kern, est uint64
	var parts []string
	for _, m := range ms {
		kern += m.Kernel
		est += m.Estimate
		if m.Estimate >= 1<<20 || m.Kernel >= 1<<20 {
			parts = append(parts, fmt.Sprintf("%s %d entries %.1f MiB", m.Name, m.Entries, mib(max(m.Kernel, m.Estimate))))
		}
	}
	return fmt.Sprintf("kernel map memory: %.1f MiB (formula %.1f MiB; %s)", mib(kern), mib(est), strings.Join(parts, ", "))
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
