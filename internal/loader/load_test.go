package loader

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/testutil"
)

// Every configuration must pass the verifier, since constants prune code.
func TestLoadPassesVerifier(t *testing.T) {
	testutil.RequireRoot(t)
	variants := map[string]func(*Config){
		"default":   func(*Config) {},
		"icmp":      func(c *Config) { c.TrackICMP = true },
		"all":       func(c *Config) { c.TrackICMP, c.IncludeSYN, c.IncludeLocal, c.HaveL3Ifaces = true, true, true, true },
		"replay":    func(c *Config) { c.Replay, c.TrackICMP = true, true },
		"rtt-rate":  func(c *Config) { c.RTTRate, c.RTTRateUseSRTT = 0.5, true },
		"rate-zero": func(c *Config) { c.RateLimit = 0 },
		"aggregate": func(c *Config) { c.Aggregate, c.TrackICMP = true, true },
		"aggregate-replay-reverse": func(c *Config) {
			c.Aggregate, c.Replay, c.AggReverse, c.AggPrefixV4, c.AggPrefixV6 = true, true, true, 32, 0
		},
		"flow-summary": func(c *Config) { c.FlowSummary, c.TrackICMP = true, true },
		"flow-summary-aggregate-replay": func(c *Config) {
			c.FlowSummary, c.Aggregate, c.Replay = true, true, true
		},
		"aggregate-all": func(c *Config) {
			c.Aggregate, c.TrackICMP, c.IncludeSYN, c.IncludeLocal, c.HaveL3Ifaces = true, true, true, true, true
		},
		// The RTT sources (docs/sources.md). Few variants, each
		// covering several switches: every one costs a load of every
		// program, which takes tens of seconds in the qemu VMs.
		"tcp-seq":               func(c *Config) { c.TCPMode = TCPSequence },
		"handshake-only":        func(c *Config) { c.TrackTCP, c.TrackTCPHandshake = false, true },
		"seq-handshake-ts-mode": func(c *Config) { c.TCPMode, c.TrackTCPHandshake = TCPTimestamps, true },
		"udp-only": func(c *Config) {
			c.TrackTCP, c.TrackDNS, c.DNSNames, c.TrackQUIC = false, true, true, true
		},
		"sources-all": func(c *Config) {
			c.TrackICMP, c.TrackTCPHandshake, c.IncludeSYN, c.IncludeLocal, c.HaveL3Ifaces = true, true, true, true, true
			c.TrackDNS, c.DNSNames, c.TrackQUIC = true, true, true
			c.DNSPorts = [DNSPortSlots]uint16{53, 5353, 853, 8053}
			c.QUICPorts = [QUICPortSlots]uint16{443, 8443, 4433, 784}
		},
		"sources-all-replay-aggregate-summary": func(c *Config) {
			c.TrackICMP, c.TrackTCPHandshake, c.Replay, c.Aggregate, c.FlowSummary = true, true, true, true, true
			c.TrackDNS, c.DNSNames, c.TrackQUIC = true, true, true
		},
	}
	for name, mod := range variants {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			mod(&cfg)
			objs, err := Load(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer objs.Close()
			checkOptionalPrograms(t, objs)
		})
	}
}

// programFeature names the kernel feature each optional program needs.
var programFeature = map[string]kernel.ID{
	"rttscope_xdp_ingress":        kernel.XDP,
	"rttscope_xdp_replay":         kernel.XDPTestRunMeta,
	"rttscope_xdp_replay_batch":   kernel.XDPTestRunMeta,
	"rttscope_cleanup_flows":      kernel.MapElemIter,
	"rttscope_cleanup_timestamps": kernel.MapElemIter,
	"rttscope_flow_summaries":     kernel.MapElemIter,
	"rttscope_cleanup_run":        kernel.ForEachMapElem,
	"rttscope_agg_fold":           kernel.ForEachMapElem,
}

// checkOptionalPrograms loads every optional program whose feature this
// kernel has: each must pass the verifier with the configuration at hand
// (a refusal here is what users would see as a fallback they should not
// need), and every program, the data path's too, with room to spare
// (checkVerifierHeadroom). Programs of absent features are logged.
func checkOptionalPrograms(t *testing.T, o *Objects) {
	t.Helper()
	for name := range o.spec.Programs {
		if name == "rttscope_tc_egress" || name == "rttscope_tc_ingress" {
			checkVerifierHeadroom(t, o, name)
			continue
		}
		id, ok := programFeature[name]
		if !ok {
			t.Errorf("program %s has no entry in programFeature", name)
			continue
		}
		if r := kernel.Check(id); !r.OK() {
			t.Logf("%s not loaded: %s %s", name, id, r.Status)
			continue
		}
		checkVerifierHeadroom(t, o, name)
	}
}

// verifierBudget is the most instructions a program may take the
// verifier to check here: half the kernel's limit
// (BPF_COMPLEXITY_LIMIT_INSNS, 1,000,000). The same object meets other
// verifiers, whose state pruning differs between versions and builds: the
// cleanup program passed on earlier 6.18 builds, until one refused it
// (over the limit; 318,819 instructions in aggregated mode, bpf/cleanup.h,
// expire_slot). The heaviest today: the batched replay entry with every
// source on, 414,041 on Debian's 6.1 (76,305 here).
const verifierBudget = 500_000

var verifierProcessed = regexp.MustCompile(`processed (\d+) insns`)

// checkVerifierHeadroom loads program name with the verifier's statistics
// and fails when it does not load or its check took more than
// verifierBudget instructions.
func checkVerifierHeadroom(t *testing.T, o *Objects, name string) {
	t.Helper()
	one := &ebpf.CollectionSpec{
		Maps:      o.spec.Maps,
		Programs:  map[string]*ebpf.ProgramSpec{name: o.spec.Programs[name]},
		Variables: o.spec.Variables,
		Types:     o.spec.Types,
	}
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{
		MapReplacements: o.shared,
		Programs:        ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats},
	})
	if err != nil {
		t.Errorf("%s: the program does not load: %v", name, err)
		return
	}
	defer coll.Close()
	m := verifierProcessed.FindStringSubmatch(coll.Programs[name].VerifierLog)
	if m == nil {
		t.Errorf("%s: no instruction count in the verifier's statistics: %q", name, coll.Programs[name].VerifierLog)
		return
	}
	n, _ := strconv.Atoi(m[1])
	if n > verifierBudget {
		t.Errorf("%s: the verifier processed %d instructions, over the budget of %d (half its limit): another kernel's verifier may refuse it", name, n, verifierBudget)
	}
}

// The data path's errors name the program and the cause.
func TestDataPathError(t *testing.T) {
	err := dataPathError("rttscope_tc_egress", fmt.Errorf("load program: %w", unix.EPERM))
	for _, want := range []string{"rttscope_tc_egress", "EPERM", "nothing was attached", "rttscope doctor"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// With the optional programs' features disabled, Load still gives a
// working data path and records every fallback.
func TestLoadWithFallbacks(t *testing.T) {
	testutil.RequireRoot(t)
	t.Setenv(kernel.DisableEnv, "all")
	cfg := DefaultConfig()
	cfg.FlowSummary = true
	objs, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	c, err := objs.NewCleaner()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Run(); err != nil {
		t.Errorf("Run of the no-op cleaner: %v", err)
	}
	s, err := objs.NewSummaries(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if objs.RttscopeXdpIngress != nil || objs.RttscopeCleanupFlows != nil || objs.RttscopeFlowSummaries != nil {
		t.Error("optional programs loaded although their features are disabled")
	}
	if got := objs.Variant.String(); got != "cleanup=none summaries=map-walk" {
		t.Errorf("variant %q", got)
	}
	if len(objs.Variant.Notes) < 3 {
		t.Errorf("notes %q, want one per fallback", objs.Variant.Notes)
	}
	if _, err := objs.RttscopeTcEgress.Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
		t.Errorf("data path does not run: %v", err)
	}
}
