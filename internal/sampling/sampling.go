// Package sampling holds what rttscope samples and how it reports it: the
// options that monitor, replay and demo share, with their command-line
// flags (defined once, in AddFlags, for every command). The options have
// two halves: what the BPF programs see (loader.Config), and what only user
// space does with their results (Report).
//
// A flag writes straight into the field it sets, and a value that needs
// parsing (rate limits, choices) is checked when the flag is parsed
// (internal/flagval). What depends on several fields is checked once
// parsing is done, by Validate.
package sampling

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/flagval"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/loader"
)

// Options are the sampling choices of one run.
type Options struct {
	// BPF is what the programs see.
	BPF loader.Config
	// Report is how often user space reports what they aggregate.
	Report Report
}

// Default returns the defaults of every command: ePPing's (TCP only,
// 100 ms rate limit) and per-sample records.
func Default() Options {
	return Options{BPF: loader.DefaultConfig(), Report: Report{AggregateTimeout: loader.DefaultAggregateTimeout}}
}

// Validate reports the first choice that cannot work, in the words of the
// command line: the report against the programs' configuration, then the
// configuration itself (loader.Config.Validate).
func (o Options) Validate() error {
	if err := o.Report.Check(o.BPF); err != nil {
		return err
	}
	return o.BPF.Validate()
}

// Report says how often user space reports what the programs aggregate.
type Report struct {
	// AggregateInterval is the length of an interval of aggregated mode
	// (BPF.Aggregate); each prefix's record is written at its end.
	AggregateInterval time.Duration
	// FlowSummaryInterval, when > 0, also writes the summary of every
	// live flow this often (BPF.FlowSummary); 0 = only when flows end.
	FlowSummaryInterval time.Duration
	// AggregateTimeout is how long a prefix without traffic keeps its
	// entry (ePPing's --aggregate-timeout); 0 = for ever.
	AggregateTimeout time.Duration
}

// Check reports what in r does not fit the programs' configuration bpf.
func (r Report) Check(bpf loader.Config) error {
	switch {
	case r.AggregateInterval < 0:
		return errors.New("--aggregate must be >= 0")
	case bpf.Aggregate && r.AggregateInterval == 0:
		return errors.New("aggregation interval must be > 0")
	case r.AggregateTimeout < 0:
		return errors.New("--aggregate-timeout must be >= 0")
	case r.FlowSummaryInterval < 0 || (r.FlowSummaryInterval > 0 && !bpf.FlowSummary):
		return errors.New("--flow-summary-interval needs --flow-summary and must be >= 0")
	}
	return nil
}

// AggregateMeta describes an aggregated run (ePPing's first record).
func AggregateMeta(bpf loader.Config, r Report) *events.AggregateMeta {
	return &events.AggregateMeta{Interval: r.AggregateInterval, Timeout: r.AggregateTimeout,
		PrefixV4: bpf.AggPrefixV4, PrefixV6: bpf.AggPrefixV6}
}

// Needs returns what the output writer must be able to write for the
// records the programs configured by bpf produce (see format.Require).
func Needs(bpf loader.Config) format.Capability {
	var c format.Capability
	if bpf.Aggregate {
		c |= format.Aggregates
	}
	if bpf.FlowSummary {
		c |= format.FlowSummaries
	}
	return c
}

// AddFlags defines the sampling flags on fs, bound to o: o's values are the
// defaults --help shows. keep, if not nil, picks by name the flags a
// command takes (replay has no --include-local, demo only --rate-limit);
// the others are not defined and leave o as it is.
func (o *Options) AddFlags(fs *pflag.FlagSet, keep func(name string) bool) {
	all := pflag.NewFlagSet("sampling", pflag.ContinueOnError)
	c, r := &o.BPF, &o.Report
	all.VarP(flagval.NewMillis(&c.RateLimit), "rate-limit", "r", "minimum time between two timestamps of one flow direction: milliseconds (ePPing style, e.g. 100) or a duration (e.g. 250us); 0 samples every new identifier")
	all.Float64VarP(&c.RTTRate, "rtt-rate", "R", c.RTTRate, "rate-limit by RTT instead: at most one timestamp per RTT-RATE times the flow's RTT (e.g. 1 = once per RTT); 0 = off")
	all.VarP(flagval.Choice(&c.RTTRateUseSRTT, []string{"min", "smoothed"}, []bool{false, true}).Alias("srtt", true),
		"rtt-type", "t", "RTT the --rtt-rate applies to: min or smoothed")
	o.addSourceFlags(all)
	all.Var(flagval.Choice(&c.TCPMode, loader.TCPModeNames, []loader.TCPMode{loader.TCPAuto, loader.TCPTimestamps, loader.TCPSequence}),
		"tcp-mode", "where TCP samples come from: ts (timestamp option, as ePPing), seq (sequence and ACK numbers, Karn's rule) or auto (timestamps where a segment has the option, sequence numbers where it does not)")
	all.Var(flagval.NewPorts(c.DNSPorts[:]), "dns-ports", "server ports of --dns, comma-separated (at most 4)")
	all.BoolVar(&c.DNSNames, "dns-names", c.DNSNames, "with --dns, also report the question's name (off: names are never read; they are personal data, see docs/privacy.md)")
	all.Var(flagval.NewPorts(c.QUICPorts[:]), "quic-ports", "UDP ports of --quic, comma-separated (at most 4)")
	all.BoolVarP(&c.IncludeSYN, "include-syn", "s", c.IncludeSYN, "also timestamp SYNs, so handshakes open flows and give samples (can fill state under SYN floods)")
	// ePPing's spelling of the same flag.
	all.BoolVar(&c.IncludeSYN, "include-SYN", c.IncludeSYN, "same as --include-syn (ePPing's spelling)")
	_ = all.MarkHidden("include-SYN")
	all.BoolVar(&c.SampleFirstTSval, "sample-first-tsval", c.SampleFirstTSval, "also timestamp the TSval a TCP flow is first seen with (ePPing waits for the next one, since an unseen earlier packet may have carried it; short flows then give no sample for their first exchange)")
	all.BoolVarP(&c.IncludeLocal, "include-local", "l", c.IncludeLocal, "also timestamp packets addressed to this host, giving samples of its own response time (matched on egress)")
	all.DurationVar(&c.TCPFlowTimeout, "tcp-flow-timeout", c.TCPFlowTimeout, "forget TCP flows idle this long (reported as closing due to flow timeout)")
	all.DurationVar(&c.OtherFlowTimeout, "icmp-flow-timeout", c.OtherFlowTimeout, "forget ICMP and UDP (DNS, QUIC) flows idle this long")
	all.DurationVar(&c.TimestampTimeout, "timestamp-timeout", c.TimestampTimeout, "drop timestamps not answered within this time")
	all.Uint32Var(&c.FlowMapSize, "flow-map-size", c.FlowMapSize, "concurrent flows the kernel's flow table is sized for (two slots each, in buckets of 4: a few flows may find their bucket full)")
	all.Uint32Var(&c.TimestampMapSize, "timestamp-map-size", c.TimestampMapSize, "maximum number of outstanding timestamps in the kernel")
	all.Uint32Var(&c.RingbufSize, "ringbuf-size", c.RingbufSize, "size of the kernel-to-user event ring buffer in bytes (power of two)")
	all.VarP(&switchedInterval{every: &r.AggregateInterval, on: &c.Aggregate}, "aggregate", "a", "aggregated mode: summarise RTTs (histograms, quantiles) and traffic per IP prefix in the kernel and report every INTERVAL, in seconds (ePPing style, e.g. 10) or a duration (e.g. 500ms), instead of per-sample and flow events; 0 = off")
	all.Uint8VarP(&c.AggPrefixV4, "aggregate-subnets-v4", "4", c.AggPrefixV4, "prefix length of IPv4 aggregation prefixes (0-32)")
	all.Uint8VarP(&c.AggPrefixV6, "aggregate-subnets-v6", "6", c.AggPrefixV6, "prefix length of IPv6 aggregation prefixes (0-128)")
	all.BoolVar(&c.AggReverse, "aggregate-reverse", c.AggReverse, "aggregate RTTs on the destination of the reply (the host that sent the timestamped packet) instead of its source")
	all.Var(flagval.NewSeconds(&r.AggregateTimeout), "aggregate-timeout", "with --aggregate, forget a prefix after this long without traffic: seconds or a duration (0 = never)")
	all.BoolP("force", "f", false, "accepted for ePPing's command lines; no effect (deprecated in ePPing too)")
	all.BoolVar(&c.FlowSummary, "flow-summary", c.FlowSummary, "report one summary per flow when it ends (FIN, RST, timeout): packets and bytes each way, duration, RTT count, min, mean, p50, p99, max (kernel memory: see docs/aggregation.md)")
	all.DurationVar(&r.FlowSummaryInterval, "flow-summary-interval", r.FlowSummaryInterval, "with --flow-summary, also report every live flow this often (0 = only at the end)")
	all.Uint32Var(&c.PrefixMapSize, "prefix-map-size", c.PrefixMapSize, "maximum number of prefixes per aggregation interval (kernel memory: see docs/aggregation.md)")
	all.VisitAll(func(f *pflag.Flag) {
		if keep == nil || keep(f.Name) {
			fs.AddFlag(f)
		}
	})
}

// addSourceFlags defines one flag per RTT source (bpf/id_<source>.h). The
// sources whose flag is given true are tracked; while none is, the
// defaults are (TCP).
func (o *Options) addSourceFlags(fs *pflag.FlagSet) {
	g := &sourceGroup{}
	for _, s := range []struct {
		name, short string
		on          *bool
		usage       string
	}{
		{"tcp", "T", &o.BPF.TrackTCP, "report TCP RTTs of data segments, see --tcp-mode (the default when no source flag is given)"},
		{"tcp-handshake", "", &o.BPF.TrackTCPHandshake, "report TCP handshake RTTs: SYN to SYN-ACK and SYN-ACK to ACK (SYNs then open flows, which can fill state under SYN floods)"},
		{"icmp", "C", &o.BPF.TrackICMP, "report ICMP and ICMPv6 echo RTTs"},
		{"quic", "", &o.BPF.TrackQUIC, "report the end-to-end RTT that the QUIC spin bit shows, from 1-RTT packets (ports: --quic-ports; flows whose bit is constant or random give none)"},
		{"dns", "", &o.BPF.TrackDNS, "report DNS query -> response times over UDP and TCP, with rcode, query type and TC bit; the name only with --dns-names (server ports: --dns-ports)"},
	} {
		g.on, g.defaults, g.given = append(g.on, s.on), append(g.defaults, *s.on), append(g.given, false)
		f := fs.VarPF(&sourceFlag{g: g, i: len(g.on) - 1}, s.name, s.short, s.usage)
		f.NoOptDefVal = "true"
	}
}

// sourceGroup is the state the RTT source flags share.
type sourceGroup struct {
	on       []*bool // each source's switch in the configuration
	defaults []bool  // the switches before any flag
	given    []bool  // each flag's value on the command line
}

// sourceFlag is the flag of source i of its group.
type sourceFlag struct {
	g *sourceGroup
	i int
}

// Set records the flag's value and sets every switch of the group: to the
// flags' values if any is true, else to the defaults.
func (f *sourceFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	g := f.g
	g.given[f.i] = v
	picked := slices.Contains(g.given, true)
	for i, on := range g.on {
		*on = g.defaults[i]
		if picked {
			*on = g.given[i]
		}
	}
	return nil
}

func (f *sourceFlag) String() string   { return strconv.FormatBool(f.g.given[f.i]) }
func (f *sourceFlag) Type() string     { return "bool" }
func (f *sourceFlag) IsBoolFlag() bool { return true }

// switchedInterval is a duration flag that also switches a mode on when it
// is > 0 (and off otherwise): --aggregate INTERVAL.
type switchedInterval struct {
	every *time.Duration
	on    *bool
}

// Set takes seconds (ePPing's -a 10) or a duration (10s).
func (s *switchedInterval) Set(v string) error {
	if err := flagval.NewSeconds(s.every).Set(v); err != nil {
		return err
	}
	*s.on = *s.every > 0
	return nil
}

// String gives the interval in seconds; "0" is off.
func (s *switchedInterval) String() string { return flagval.NewSeconds(s.every).String() }

func (s *switchedInterval) Type() string { return "string" }
