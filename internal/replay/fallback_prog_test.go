package replay

import (
	"fmt"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/loader"
)

// Tests that run once per variant of an optional part: the preferred one
// (where this kernel has it) and each fallback, forced on through
// RTTSCOPE_DISABLE, so every path is tested on every machine.

// variantCase forces features off and names the variant that must result.
type variantCase struct {
	disable string
	want    func(loader.Variant) string // the variant part under test
	expect  string                      // "" : the preferred one, which depends on the kernel
}

func cleanupOf(v loader.Variant) string   { return v.Cleanup }
func summariesOf(v loader.Variant) string { return v.Summaries }

var (
	cleanupVariants = []variantCase{
		{"", cleanupOf, ""},
		{string(kernel.MapElemIter), cleanupOf, loader.CleanupProgRun},
	}
	summaryVariants = []variantCase{
		{"", summariesOf, ""},
		{string(kernel.MapElemIter), summariesOf, loader.SummariesMapWalk},
	}
)

// forEachVariant runs fn as one subtest per case; check(h) is called by fn
// once the harness exists and verifies that the forced variant is in use.
func forEachVariant(t *testing.T, cases []variantCase, fn func(t *testing.T, check func(*harness))) {
	for _, c := range cases {
		name := c.disable
		if name == "" {
			name = "preferred"
		}
		t.Run(name, func(t *testing.T) {
			t.Setenv(kernel.DisableEnv, c.disable)
			fn(t, func(h *harness) {
				got := c.want(h.e.Objects().Variant)
				if c.expect == "" {
					t.Logf("preferred variant on this kernel: %s", h.e.Objects().Variant)
					return
				}
				if got != c.expect {
					t.Fatalf("with %s=%s the variant is %q, want %q", kernel.DisableEnv, c.disable, got, c.expect)
				}
			})
		})
	}
}

// Without iterators and without bpf_for_each_map_elem nothing expires on
// time, and the run still measures.
func TestCleanupNone(t *testing.T) {
	t.Setenv(kernel.DisableEnv, "map_elem_iter,for_each_map_elem")
	cfg := testConfig()
	cfg.TimestampTimeout = time.Second
	h := newHarness(t, cfg)
	if v := h.e.Objects().Variant; v.Cleanup != loader.CleanupNone || len(v.Notes) == 0 {
		t.Fatalf("variant %+v, want cleanup=none with a note", v)
	}
	p := pathV4
	h.feed(p.data(true, 10, 0, 10), t0, true)
	h.feed(p.data(true, 11, 0, 10), t0+200*ms, true)
	h.feed(tick(), t0+10*time.Second.Nanoseconds(), true)
	h.expire()
	if s := h.stats(); s.TimestampsExpired != 0 || s.Timestamps != 2 {
		t.Errorf("stats %+v: want nothing expired, 2 timestamps", s)
	}
	h.feed(p.ack(false, 1, 11), t0+11*time.Second.Nanoseconds(), false)
	h.checkSamples(sample{Time: t0 + 11*time.Second.Nanoseconds(), Flow: p.tcpFlow(false), RTT: 11*time.Second - 200*time.Millisecond})
}

// A snapshot taken by either variant equals the summary the kernel itself
// writes when the flow then times out without further packets (all but the
// reason and time). Two flows in a table of 2,048 slots and in one of 4:
// user space reads a sparse table slot by slot, a full one in batches.
func TestSnapshotEqualsKernelSummary(t *testing.T) {
	for _, size := range []uint32{testConfig().FlowMapSize, oneBucketSize} {
		t.Run(fmt.Sprintf("%d-slots", loader.FlowTableSlots(size)), func(t *testing.T) {
			testSnapshotEqualsKernelSummary(t, size)
		})
	}
}

func testSnapshotEqualsKernelSummary(t *testing.T, flowMapSize uint32) {
	forEachVariant(t, summaryVariants, func(t *testing.T, check func(*harness)) {
		cfg := testConfig()
		cfg.FlowSummary, cfg.RateLimit = true, 0
		cfg.TCPFlowTimeout = time.Second
		cfg.FlowMapSize = flowMapSize
		h := newHarness(t, cfg)
		sums, err := h.e.Objects().NewSummaries(0)
		if err != nil {
			t.Fatal(err)
		}
		defer sums.Close()
		check(h)
		var got []events.FlowSummary
		collect := func(s *events.FlowSummary) error { got = append(got, *s); return nil }

		at := t0
		for i, p := range []path{pathV4Swapped, pathV6} {
			for j := range 40 {
				id := uint32(100 + j)
				rtt := int64(1_000_000 + 37_123*j + 1000*i)
				fromA := j%4 != 0
				h.feed(p.data(fromA, id, 0, 60+j), at, fromA)
				h.feed(p.ack(!fromA, 1, id), at+rtt, !fromA)
				at += rtt + ms
			}
		}
		if err := sums.Snapshot(collect); err != nil || len(got) != 2 {
			t.Fatalf("snapshot: %v, %d summaries, want 2", err, len(got))
		}
		snap := append([]events.FlowSummary(nil), got...)
		got = got[:0]
		end := at + 2*time.Second.Nanoseconds()
		h.feed(tick(), end, true)
		h.expire()
		if err := sums.Drain(collect); err != nil || len(got) != 2 {
			t.Fatalf("summaries at timeout: %v, %d, want 2", err, len(got))
		}
		for _, s := range snap {
			if s.Reason != 0 || s.Time != at-ms {
				t.Errorf("snapshot %v: reason %d time %d, want 0 and the last packet's time %d", s.Flow, s.Reason, s.Time, at-ms)
			}
			found := false
			for _, k := range got {
				if k.Flow != s.Flow {
					continue
				}
				found = true
				if k.Reason != events.ReasonTimeout || k.Time != end {
					t.Errorf("kernel summary %v: reason %d time %d", k.Flow, k.Reason, k.Time)
				}
				k.Reason, k.Time = s.Reason, s.Time
				if k != s {
					t.Errorf("snapshot differs from the kernel's summary:\n snapshot %+v\n   kernel %+v", s, k)
				}
			}
			if !found {
				t.Errorf("no kernel summary for %v", s.Flow)
			}
		}
	})
}
