package bench

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
)

// The bench's own BPF programs pass the verifier of the running kernel:
// the forwarders always (bpf_fib_lookup, bpf_redirect_neigh and devmaps
// are older than any supported kernel), the hook programs unless the
// kernel refuses their type, which the hooks study then reports. Run under
// Debian 6.1 with scripts/vmtest.sh (docs/experiments.md).
func TestBenchProgramsLoad(t *testing.T) {
	testutil.RequireRoot(t)
	var fwd probe.FwdObjects
	if err := probe.LoadFwdObjects(&fwd, nil); err != nil {
		t.Fatalf("bpf/fwd.c: %v", err)
	}
	_ = fwd.Close() // loaded only
	spec, err := probe.LoadHooks()
	if err != nil {
		t.Fatal(err)
	}
	cfg := kernelConfig()
	for _, typ := range HookTypes {
		for _, fl := range []string{"empty", "count"} {
			hc := hookConfig{typ: typ, flavour: fl}
			coll, err := loadHook(spec, hc)
			if err != nil {
				// Tracing types may be refused by configuration or
				// lockdown; the verifier must never reject them.
				var ve *ebpf.VerifierError
				if errors.As(err, &ve) {
					t.Errorf("%s: verifier rejected it: %v", hc.progName(), err)
				} else {
					t.Logf("%s: %s", hc.progName(), hookRefusal(typ, "load", err, cfg))
				}
				continue
			}
			coll.Close()
		}
	}
}
