package loader

import (
	"testing"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/probe"
)

// TestCleanerWalksOnlyOccupiedMaps checks, for both ways of walking, that
// a cleanup expires what is due when the programs' counters say the maps
// hold entries, and skips the walks when they say the maps are empty: the
// entries filled here behind the counters' back then stay.
func TestCleanerWalksOnlyOccupiedMaps(t *testing.T) {
	for _, v := range []struct{ name, disable string }{
		{CleanupIterator, ""},
		{CleanupProgRun, string(kernel.MapElemIter)},
	} {
		for _, counted := range []bool{true, false} {
			name := v.name + "/counted"
			if !counted {
				name = v.name + "/uncounted"
			}
			t.Run(name, func(t *testing.T) {
				o, c := loadCleaner(t, v.disable, v.name, 0)
				const n = 10
				fillForCleanup(t, o, n, 1, counted)
				// 1000 s later: past every timeout.
				if err := o.ReplayNow.Set(uint64(1e12)); err != nil {
					t.Fatal(err)
				}
				if err := c.Run(); err != nil {
					t.Fatal(err)
				}
				flows, timestamps := countEntries(t, o)
				want := 0
				if !counted {
					want = n
				}
				if flows != want || timestamps != want {
					t.Errorf("after the cleanup: %d flows and %d timestamps left, want %d of each", flows, timestamps, want)
				}
			})
		}
	}
}

// countEntries returns the published flows in the flow table's first
// slots (those fillForCleanup uses) and the entries of the timestamp map.
func countEntries(t *testing.T, o *Objects) (flows, timestamps int) {
	t.Helper()
	var slot probe.RttscopeFlowSlot
	for i := uint32(0); i < 64; i++ {
		if err := o.FlowMap.Lookup(i, &slot); err != nil {
			t.Fatalf("read flow slot %d: %v", i, err)
		}
		if slot.Tag > flowTagClaimed {
			flows++
		}
	}
	var key [48]byte
	var sent uint64
	it := o.TsMap.Iterate()
	for it.Next(&key, &sent) {
		timestamps++
	}
	if err := it.Err(); err != nil {
		t.Fatalf("walk the timestamp map: %v", err)
	}
	return flows, timestamps
}
