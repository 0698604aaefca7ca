package loader

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/probe"
)

// Objects are the loaded maps and programs. The tc programs (the data
// path) are always there; every other program is optional and nil when
// the kernel refused it or it was not needed: Variant says what is used
// instead.
type Objects struct {
	probe.RttscopeMaps
	probe.RttscopeVariables
	probe.RttscopePrograms
	Config  Config
	Variant Variant

	spec   *ebpf.CollectionSpec
	shared map[string]*ebpf.Map // every map by name, for optional programs
	data   *ebpf.Collection     // owns the .rodata and .bss maps
}

// Load creates the maps and loads the data path with cfg, then the
// optional programs it can (XDP ingress; the XDP replay entry points in
// replay). A refused optional program is recorded in Variant, never an
// error. The caller closes the result.
func Load(cfg Config) (_ *Objects, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := kernel.CheckRequired(); err != nil {
		return nil, err
	}
	// Kernels >= 5.11 charge BPF memory to the cgroup; raising the
	// memlock limit only matters before that and fails without
	// CAP_SYS_RESOURCE, so a failure here is not fatal.
	_ = rlimit.RemoveMemlock()

	spec, err := probe.LoadRttscope()
	if err != nil {
		return nil, fmt.Errorf("parse embedded BPF object: %w", err)
	}
	fold := aggFold(cfg)
	if err := configure(spec, cfg, fold.OK()); err != nil {
		return nil, err
	}
	o := &Objects{Config: cfg, spec: spec}
	defer func() {
		if err != nil {
			o.Close()
		}
	}()
	if err := o.createMaps(); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		name string
		dst  **ebpf.Program
	}{
		{"rttscope_tc_egress", &o.RttscopeTcEgress},
		{"rttscope_tc_ingress", &o.RttscopeTcIngress},
	} {
		if *p.dst, err = o.loadProgram(p.name); err != nil {
			return nil, dataPathError(p.name, err)
		}
	}
	if err := o.loadAggFold(fold); err != nil {
		return nil, err
	}
	// The XDP ingress program also in replay: BPF unit tests run it.
	o.loadXDPIngress()
	if cfg.Replay {
		o.loadXDPReplay()
	}
	return o, nil
}

// createMaps creates every map once; each program is then loaded on its
// own against these maps, so one refused program cannot stop the others.
func (o *Objects) createMaps() error {
	mapsOnly := o.spec.Copy()
	mapsOnly.Programs = nil
	coll, err := ebpf.NewCollection(mapsOnly)
	if err != nil {
		return fmt.Errorf("create BPF maps: %s", kernel.Explain(err))
	}
	o.shared = maps.Clone(coll.Maps)
	o.data = coll
	if err := coll.Assign(&o.RttscopeMaps); err != nil {
		return fmt.Errorf("assign BPF maps: %w", err)
	}
	if err := coll.Assign(&o.RttscopeVariables); err != nil {
		return fmt.Errorf("assign BPF variables: %w", err)
	}
	return nil
}

// loadProgram loads one program of the object against the shared maps.
// When the verifier refuses it, cilium/ebpf loads it again with the
// verifier's log, for the error to quote.
func (o *Objects) loadProgram(name string) (*ebpf.Program, error) {
	return o.loadProgramWith(name, ebpf.ProgramOptions{})
}

// loadProgramWith is loadProgram with the verifier's log options.
func (o *Objects) loadProgramWith(name string, opts ebpf.ProgramOptions) (*ebpf.Program, error) {
	ps, ok := o.spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("BPF object lacks program %s", name)
	}
	one := &ebpf.CollectionSpec{
		Maps:      o.spec.Maps,
		Programs:  map[string]*ebpf.ProgramSpec{name: ps},
		Variables: o.spec.Variables,
		Types:     o.spec.Types,
	}
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: o.shared, Programs: opts})
	if err != nil {
		return nil, err
	}
	defer coll.Close() // the map clones; the program is detached first
	return coll.DetachProgram(name), nil
}

// loadOptional loads an optional program. When the kernel refuses it, the
// refusal goes to Variant's notes with what is used instead, and nil is
// returned. The verifier keeps only its statistics: a refusal then costs
// one pass of the verifier, where the retries with its whole log took up
// to 30 s for a program at its complexity limit, at every start.
func (o *Objects) loadOptional(name, feature, instead string) *ebpf.Program {
	p, err := o.loadProgramWith(name, ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats})
	if err != nil {
		o.Variant.note("the kernel refused %s (%s): %s; using %s", name, feature, oneLine(kernel.Explain(err)), instead)
		return nil
	}
	return p
}

func (o *Objects) loadXDPIngress() {
	if r := kernel.Check(kernel.XDP); !r.OK() {
		o.Variant.note("XDP %s: --ingress-hook tc only", r.Status)
		return
	}
	o.RttscopeXdpIngress = o.loadOptional("rttscope_xdp_ingress", "XDP", "--ingress-hook tc only")
}

func (o *Objects) loadXDPReplay() {
	if r := kernel.Check(kernel.XDPTestRunMeta); !r.OK() {
		o.Variant.note("XDP test runs with metadata %s: replay runs the tc programs", r.Status)
		return
	}
	const instead = "the tc programs for replay"
	o.RttscopeXdpReplay = o.loadOptional("rttscope_xdp_replay", "XDP replay", instead)
	if o.RttscopeXdpReplay != nil {
		o.RttscopeXdpReplayBatch = o.loadOptional("rttscope_xdp_replay_batch", "XDP batched replay", "one packet per run")
	}
}

// dataPathError explains why the tc programs, without which rttscope
// cannot measure, did not load.
func dataPathError(name string, err error) error {
	var verr *ebpf.VerifierError
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return fmt.Errorf("the kernel refused the data path program %s: %s; nothing was attached (`rttscope doctor` lists what this kernel allows)",
			name, oneLine(kernel.Explain(err)))
	case errors.As(err, &verr):
		// %w formats as %v: the last lines of the verifier log, on one line.
		return fmt.Errorf("the kernel's verifier rejected the data path program %s (kernels before 5.10 are not supported; otherwise please report this with `uname -r` and `rttscope doctor`): %w",
			name, verr)
	}
	return fmt.Errorf("load the data path program %s: %s", name, oneLine(kernel.Explain(err)))
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// Close releases every map and program.
func (o *Objects) Close() error {
	for _, p := range []*ebpf.Program{o.RttscopeTcEgress, o.RttscopeTcIngress, o.RttscopeXdpIngress,
		o.RttscopeXdpReplay, o.RttscopeXdpReplayBatch, o.RttscopeCleanupFlows,
		o.RttscopeCleanupTimestamps, o.RttscopeCleanupRun, o.RttscopeFlowSummaries, o.RttscopeAggFold} {
		if p != nil {
			p.Close()
		}
	}
	if o.data != nil {
		o.data.Close()
	}
	o.RttscopeMaps.Close()
	o.RttscopeVariables = probe.RttscopeVariables{}
	return nil
}

// configure writes cfg into the spec's constants and map sizes through the
// generated specs, so a renamed constant or map fails to compile.
func configure(spec *ebpf.CollectionSpec, cfg Config, aggFold bool) error {
	var s probe.RttscopeSpecs
	if err := spec.Assign(&s); err != nil {
		return fmt.Errorf("embedded BPF object does not match its bindings: %w", err)
	}
	v := &s.RttscopeVariableSpecs
	seed, err := flowSeed(cfg.Replay)
	if err != nil {
		return err
	}
	steps := cfg.Steps
	if steps == StepAll {
		steps = StepCounters
	}
	for _, c := range []struct {
		spec  *ebpf.VariableSpec
		value any
	}{
		{v.CfgRateLimitNs, uint64(cfg.RateLimit)},
		{v.CfgRttRateMilli, uint64(cfg.RTTRate * 1000)},
		{v.CfgRttRateUseSrtt, cfg.RTTRateUseSRTT},
		{v.CfgTrackTcp, cfg.TrackTCP},
		{v.CfgTrackIcmp, cfg.TrackICMP},
		{v.CfgTcpMode, uint32(cfg.TCPMode)},
		{v.CfgTrackTcpHandshake, cfg.TrackTCPHandshake},
		{v.CfgTrackDns, cfg.TrackDNS},
		{v.CfgDnsPorts, cfg.DNSPorts},
		{v.CfgDnsNames, cfg.DNSNames},
		{v.CfgTrackQuic, cfg.TrackQUIC},
		{v.CfgQuicPorts, cfg.QUICPorts},
		{v.CfgIncludeSyn, cfg.IncludeSYN},
		{v.CfgSampleFirstTsval, cfg.SampleFirstTSval},
		{v.CfgLocalFilter, !cfg.IncludeLocal && !cfg.Replay},
		{v.CfgReplay, cfg.Replay},
		{v.CfgHaveL3Ifaces, cfg.HaveL3Ifaces},
		{v.CfgTcpFlowTimeoutNs, uint64(cfg.TCPFlowTimeout)},
		{v.CfgOtherFlowTimeoutNs, uint64(cfg.OtherFlowTimeout)},
		{v.CfgTsTimeoutNs, uint64(cfg.TimestampTimeout)},
		{v.CfgFlowBuckets, flowBuckets(cfg.FlowMapSize)},
		{v.CfgFlowSeed, seed},
		{v.CfgAggregate, cfg.Aggregate},
		{v.CfgAggPrefixV4, uint32(cfg.AggPrefixV4)},
		{v.CfgAggPrefixV6, uint32(cfg.AggPrefixV6)},
		{v.CfgAggReverse, cfg.AggReverse},
		{v.CfgAggFold, aggFold},
		{v.CfgFlowSummary, cfg.FlowSummary},
		{v.CfgSteps, uint32(steps)},
		{v.CfgFastPath, !cfg.GeneralPathOnly},
		{v.CfgEventWakeupBytes, cfg.EventWakeupBytes},
	} {
		if err := c.spec.Set(c.value); err != nil {
			return fmt.Errorf("set %s: %w", c.spec.Name, err)
		}
	}
	m := &s.RttscopeMapSpecs
	m.FlowMap.MaxEntries = FlowTableSlots(cfg.FlowMapSize)
	m.FlowUsed.MaxEntries = flowUsedWords(FlowTableSlots(cfg.FlowMapSize))
	m.TsMap.MaxEntries = cfg.TimestampMapSize
	m.Events.MaxEntries = cfg.RingbufSize
	// Without aggregation the prefix maps are never written: one entry.
	// The backup entries (0.0.0.0/0, ::/0) have an array of their own.
	prefixes, backups := uint32(1), uint32(1)
	if cfg.Aggregate {
		prefixes, backups = cfg.PrefixMapSize, m.AggBackup.MaxEntries
	}
	m.AggMap0.MaxEntries = prefixes
	m.AggMap1.MaxEntries = prefixes
	m.AggBackup.MaxEntries = backups
	// Summaries exist for the flows in the flow map; their ring holds
	// about a thousand records between two reads.
	summaries, ring := uint32(1), uint32(4096)
	if cfg.FlowSummary {
		summaries, ring = cfg.FlowMapSize, 1<<20
	}
	m.SummaryMap.MaxEntries = summaries
	m.Summaries.MaxEntries = ring
	// Last: the values of every constant set above go into the code.
	if _, err := inlineConstants(spec); err != nil {
		return err
	}
	return nil
}

// MarkL3Interface tells the programs that ifindex has no Ethernet header.
func (o *Objects) MarkL3Interface(ifindex uint32) error {
	return o.L3Ifaces.Put(ifindex, uint8(1))
}
