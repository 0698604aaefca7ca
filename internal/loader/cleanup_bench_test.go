package loader

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
)

// BenchmarkCleanupWalk measures one cleanup pass over n flows and n
// timestamps, none of them due, in maps sized for 131,072 entries, per
// variant: the steady-state cost paid every --cleanup-interval, for a
// mostly empty and a nearly full table. `go test -run - -bench CleanupWalk
// ./internal/loader` (root).
func BenchmarkCleanupWalk(b *testing.B) {
	if testing.Short() {
		b.Skip("fills maps of 100,000 entries")
	}
	for _, v := range []struct{ name, disable string }{
		{CleanupIterator, ""},
		{CleanupProgRun, string(kernel.MapElemIter)},
	} {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/flows=%d", v.name, n), func(b *testing.B) {
				benchmarkCleanupWalk(b, v.disable, v.name, n)
			})
		}
	}
}

func benchmarkCleanupWalk(b *testing.B, disable, variant string, n int) {
	o, c := loadCleaner(b, disable, variant, 131072)
	const now = uint64(1e12)
	if err := o.ReplayNow.Set(now); err != nil {
		b.Fatal(err)
	}
	fillForCleanup(b, o, n, now, true)
	b.ResetTimer()
	for b.Loop() {
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*n), "ns/entry")
}

// loadCleaner loads the programs for replay ("now" is replay_now: nothing
// is due until a test sets it), maps sized for size entries (0: default),
// with the kernel features in disable switched off, and sets up their
// Cleaner; it skips tb unless the Cleaner is of the given variant. Both
// are closed with tb.
func loadCleaner(tb testing.TB, disable, variant string, size uint32) (*Objects, *Cleaner) {
	tb.Helper()
	tb.Setenv(kernel.DisableEnv, disable)
	testutil.RequireRoot(tb)
	cfg := DefaultConfig()
	cfg.Replay = true
	if size > 0 {
		cfg.FlowMapSize, cfg.TimestampMapSize = size, size
	}
	o, err := Load(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { o.Close() })
	c, err := o.NewCleaner()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if o.Variant.Cleanup != variant {
		tb.Skipf("cleanup variant %s not available on this kernel: %v", variant, o.Variant.Notes)
	}
	return o, c
}

// fillForCleanup inserts n flows and n timestamps, all last seen at now.
// The flows go to the first n slots of the flow table, marked in use in
// flow_used: where the kernel's hash would put them does not matter to a
// walk. counted: also add them to the programs' insert counters, as the
// programs do, from which the Cleaner learns whether a map holds anything.
func fillForCleanup(b testing.TB, o *Objects, n int, now uint64, counted bool) {
	b.Helper()
	var slot probe.RttscopeFlowSlot
	slot.Tag = flowTagClaimed + 1 // any published tag
	slot.State.Dir[0].LastSeen = now
	for i := range n {
		var k [48]byte // struct packet_id; its first 44 bytes are the flow
		k[10], k[11] = 0xff, 0xff
		binary.BigEndian.PutUint32(k[12:], 10<<24|uint32(i)) // ::ffff:10.x.y.z
		k[30], k[31] = 0xff, 0xff
		binary.BigEndian.PutUint32(k[32:], 10<<24|1)
		binary.LittleEndian.PutUint16(k[40:], 6) // TCP
		k[42] = 2                                // AF_INET
		copy(tupleBytes(&slot.Key), k[:44])
		slot.Index = uint32(i)
		if err := o.FlowMap.Put(uint32(i), &slot); err != nil {
			b.Fatalf("fill flow table: %v", err)
		}
		used := uint64(1)<<(i%flowUsedBits) | (uint64(1)<<(i%flowUsedBits) - 1) // this slot and the ones before it
		if err := o.FlowUsed.Put(uint32(i/flowUsedBits), used); err != nil {
			b.Fatalf("fill flow_used: %v", err)
		}
		if err := o.TsMap.Put(k[:], now); err != nil {
			b.Fatalf("fill timestamp map: %v", err)
		}
	}
	if !counted {
		return
	}
	for _, c := range []probe.RttscopeCounter{probe.RttscopeCounterCOUNTER_FLOWS_CREATED, probe.RttscopeCounterCOUNTER_TS_CREATED} {
		var perCPU []uint64
		if err := o.Counters.Lookup(uint32(c), &perCPU); err != nil {
			b.Fatalf("read counter %d: %v", c, err)
		}
		perCPU[0] += uint64(n)
		if err := o.Counters.Put(uint32(c), perCPU); err != nil {
			b.Fatalf("count the fill in counter %d: %v", c, err)
		}
	}
}

// BenchmarkSummaryWalk measures one flow-summary snapshot read by user
// space (the variant where iterators are refused) over n flows in a table
// sized for 131,072: at 1,000 flows only the slots flow_used marks, at
// 100,000 the whole table in batches (sparseSlots), and a summary-map
// lookup per flow (the flows here have none). `go test -run - -bench
// SummaryWalk ./internal/loader` (root).
func BenchmarkSummaryWalk(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("flows=%d", n), func(b *testing.B) {
			b.Setenv(kernel.DisableEnv, string(kernel.MapElemIter))
			testutil.RequireRoot(b)
			cfg := DefaultConfig()
			cfg.Replay, cfg.FlowSummary = true, true
			cfg.FlowMapSize, cfg.TimestampMapSize = 131072, 131072
			o, err := Load(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer o.Close()
			s, err := o.NewSummaries(0)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if o.Variant.Summaries != SummariesMapWalk {
				b.Fatalf("summaries variant %s, want %s", o.Variant.Summaries, SummariesMapWalk)
			}
			fillForCleanup(b, o, n, 1e12, true)
			b.ResetTimer()
			for b.Loop() {
				if err := s.Snapshot(func(*events.FlowSummary) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
