package loader

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/rttscope/rttscope/internal/probe"
)

// Objects are the loaded programs and maps.
type Objects struct {
	probe.RttscopeObjects
	Config Config
}

// Load loads the programs with cfg. The caller closes the result.
func Load(cfg Config) (*Objects, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("loading BPF programs needs root (or CAP_BPF and CAP_NET_ADMIN): run with sudo")
	}
	// Kernels >= 5.11 charge BPF memory to the cgroup; raising the
	// memlock limit only matters before that and fails without
	// CAP_SYS_RESOURCE, so a failure here is not fatal.
	_ = rlimit.RemoveMemlock()

	spec, err := probe.LoadRttscope()
	if err != nil {
		return nil, fmt.Errorf("parse embedded BPF object: %w", err)
	}
	if err := configure(spec, cfg); err != nil {
		return nil, err
	}
	objs := &Objects{Config: cfg}
	if err := spec.LoadAndAssign(&objs.RttscopeObjects, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			// %v keeps the last lines of the verifier log on one line;
			// %+v would dump the whole (multi-line) log.
			return nil, fmt.Errorf("the kernel's verifier rejected the BPF programs (kernel too old? otherwise please report this with `uname -r`): %v", verr)
		}
		return nil, fmt.Errorf("load BPF objects: %w", err)
	}
	return objs, nil
}

// configure writes cfg into the spec's constants and map sizes.
func configure(spec *ebpf.CollectionSpec, cfg Config) error {
	rttRateMilli := uint64(cfg.RTTRate * 1000)
	consts := map[string]any{
		"cfg_rate_limit_ns":         uint64(cfg.RateLimit),
		"cfg_rtt_rate_milli":        rttRateMilli,
		"cfg_rtt_rate_use_srtt":     cfg.RTTRateUseSRTT,
		"cfg_track_tcp":             cfg.TrackTCP,
		"cfg_track_icmp":            cfg.TrackICMP,
		"cfg_include_syn":           cfg.IncludeSYN,
		"cfg_local_filter":          !cfg.IncludeLocal && !cfg.Replay,
		"cfg_replay":                cfg.Replay,
		"cfg_have_l3_ifaces":        cfg.HaveL3Ifaces,
		"cfg_tcp_flow_timeout_ns":   uint64(cfg.TCPFlowTimeout),
		"cfg_other_flow_timeout_ns": uint64(cfg.OtherFlowTimeout),
		"cfg_ts_timeout_ns":         uint64(cfg.TimestampTimeout),
		"cfg_aggregate":             cfg.Aggregate,
		"cfg_agg_prefix_v4":         uint32(cfg.AggPrefixV4),
		"cfg_agg_prefix_v6":         uint32(cfg.AggPrefixV6),
		"cfg_agg_reverse":           cfg.AggReverse,
		"cfg_flow_summary":          cfg.FlowSummary,
	}
	for name, v := range consts {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("BPF object lacks constant %s", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	spec.Maps["flow_map"].MaxEntries = cfg.FlowMapSize
	spec.Maps["ts_map"].MaxEntries = cfg.TimestampMapSize
	spec.Maps["events"].MaxEntries = cfg.RingbufSize
	// Without aggregation the prefix maps are never written: one entry.
	prefixes := uint32(1)
	if cfg.Aggregate {
		prefixes = cfg.PrefixMapSize
	}
	spec.Maps["agg_map0"].MaxEntries = prefixes
	spec.Maps["agg_map1"].MaxEntries = prefixes
	// Summaries exist for the flows in the flow map; their ring holds
	// about a thousand records between two reads.
	summaries, ring := uint32(1), uint32(4096)
	if cfg.FlowSummary {
		summaries, ring = cfg.FlowMapSize, 1<<20
	}
	spec.Maps["summary_map"].MaxEntries = summaries
	spec.Maps["summaries"].MaxEntries = ring
	return nil
}

// MarkL3Interface tells the programs that ifindex has no Ethernet header.
func (o *Objects) MarkL3Interface(ifindex uint32) error {
	return o.L3Ifaces.Put(ifindex, uint8(1))
}
