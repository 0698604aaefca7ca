package bench

// BenchmarkFlowLookup measures what finding a flow's state costs one
// packet, by kind of table (bpf/lookup_bench.c), under BPF_PROG_TEST_RUN
// on warm caches: a loop of 64 lookups of 8 flows per run, each bumping a
// counter in the state it found, as the packet programs do.
//
//	none         the key built, no lookup: the loop's own cost
//	hash-tuple   BPF hash map keyed by struct network_tuple (44 bytes):
//	             the flow map of today
//	hash-v4      BPF hash map keyed by a 16-byte IPv4-only key
//	array-slot   an array slot chosen by a hash computed in BPF, the key
//	             compared there (one probe, no collisions: the lower bound
//	             of a flow table of our own)
//
// It reports ns/lookup (the run's time over 64) and asserts nothing about
// time; it fails only when a lookup did not find the state it created.
//
//	sudo go test ./internal/bench/ -run '^$' -bench FlowLookup -count 5
//
// docs/performance.md ("The flow lookup, by kind of table") has figures.

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
)

// lookupBatch is LOOKUP_BATCH of bpf/lookup_bench.c.
const lookupBatch = 64

func BenchmarkFlowLookup(b *testing.B) {
	testutil.RequireRoot(b)
	kinds := []struct {
		name string
		kind probe.LookupBenchLookupTable
	}{
		{"none", probe.LookupBenchLookupTableLOOKUP_NONE},
		{"hash-tuple", probe.LookupBenchLookupTableLOOKUP_HASH_TUPLE},
		{"hash-v4", probe.LookupBenchLookupTableLOOKUP_HASH_V4},
		{"array-slot", probe.LookupBenchLookupTableLOOKUP_ARRAY_TUPLE},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			coll := loadLookupBench(b, k.kind)
			prog := coll.Programs["lookup_bench"]
			frame := make([]byte, 64) // any frame: the program ignores it
			b.ResetTimer()
			if _, err := prog.Run(&ebpf.RunOptions{Data: frame, Repeat: uint32(b.N)}); err != nil {
				b.Fatalf("BPF_PROG_TEST_RUN: %v", err)
			}
			b.StopTimer()
			var runs, missed uint64
			if err := coll.Variables["lookup_runs"].Get(&runs); err != nil {
				b.Fatal(err)
			}
			if err := coll.Variables["lookup_missed"].Get(&missed); err != nil {
				b.Fatal(err)
			}
			if runs != uint64(b.N) || missed != 0 {
				b.Fatalf("%d runs (want %d), %d lookups found no state", runs, b.N, missed)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/lookupBatch, "ns/lookup")
		})
	}
}

func loadLookupBench(b *testing.B, kind probe.LookupBenchLookupTable) *ebpf.Collection {
	b.Helper()
	spec, err := probe.LoadLookupBench()
	if err != nil {
		b.Fatal(err)
	}
	if err := spec.Variables["lookup_kind"].Set(uint32(kind)); err != nil {
		b.Fatal(err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatalf("load bpf/lookup_bench.c: %v", err)
	}
	b.Cleanup(coll.Close)
	return coll
}
