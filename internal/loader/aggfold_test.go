package loader

import (
	"strings"
	"testing"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/testutil"
)

// Aggregated mode folds the flows' counts where the kernel has
// bpf_for_each_map_elem, and says so in the code (cfg_agg_fold) and by
// loading the fold program; without it, or without aggregation, neither,
// and aggregated mode notes the fallback.
func TestAggFoldFollowsKernel(t *testing.T) {
	testutil.RequireRoot(t)
	if r := kernel.Check(kernel.ForEachMapElem); !r.OK() {
		t.Skipf("bpf_for_each_map_elem %s: only the fallback can be checked (TestFastPathSameOutput/aggregated-slots)", r.Status)
	}
	for _, c := range []struct {
		name      string
		aggregate bool
		disable   string
		fold      bool
		note      bool
	}{
		{"aggregated", true, "", true, false},
		{"aggregated-without-for-each", true, "for_each_map_elem", false, true},
		{"default-mode", false, "", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(kernel.DisableEnv, c.disable)
			cfg := DefaultConfig()
			cfg.Aggregate = c.aggregate
			cfg.FlowMapSize, cfg.TimestampMapSize = 1024, 1024
			objs, err := Load(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer objs.Close()
			var inCode bool
			if err := objs.CfgAggFold.Get(&inCode); err != nil {
				t.Fatal(err)
			}
			if inCode != c.fold || (objs.RttscopeAggFold != nil) != c.fold {
				t.Errorf("cfg_agg_fold %v, fold program loaded %v; want both %v", inCode, objs.RttscopeAggFold != nil, c.fold)
			}
			noted := strings.Contains(strings.Join(objs.Variant.Notes, "\n"), "no fold")
			if noted != c.note {
				t.Errorf("notes %q: a note of the fallback %v, want %v", objs.Variant.Notes, noted, c.note)
			}
			// The fold runs (it walks an empty table here) and is a
			// no-op without the program.
			if err := objs.foldFlows(make([]byte, 64)); err != nil {
				t.Errorf("foldFlows: %v", err)
			}
		})
	}
}
