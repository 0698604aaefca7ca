// Package loader loads rttscope's BPF programs with a configuration and
// attaches them to interfaces (TCX, legacy clsact, XDP).
package loader

import (
	"fmt"
	"math"
	"time"
)

// Config is the load-time configuration of the BPF programs: what they see
// (constants, map sizes), nothing that only user space uses. The command
// line's flags set it through sampling.Options.
type Config struct {
	// RateLimit is the minimum time between two timestamps of one flow
	// direction (0 = timestamp every new identifier).
	RateLimit time.Duration
	// RTTRate, when > 0, replaces RateLimit by RTTRate times the flow's
	// RTT (minimum, or smoothed with RTTRateUseSRTT) once one is known.
	RTTRate        float64
	RTTRateUseSRTT bool
	TrackTCP       bool
	TrackICMP      bool
	// TCPMode says where TCP data samples (TrackTCP) come from:
	// timestamps, sequence numbers, or each where it can (docs/sources.md).
	TCPMode TCPMode
	// TrackTCPHandshake reports handshake samples (SYN -> SYN-ACK,
	// SYN-ACK -> ACK); SYNs then open flows.
	TrackTCPHandshake bool
	// TrackDNS reports DNS query -> response times over UDP and TCP to
	// and from the server ports DNSPorts (0: unused slot).
	TrackDNS bool
	DNSPorts [DNSPortSlots]uint16
	// DNSNames reports the question's name with each DNS sample; off, the
	// programs never read it.
	DNSNames bool
	// TrackQUIC reports the end-to-end RTT the QUIC spin bit shows, on
	// UDP to and from the ports QUICPorts (0: unused slot).
	TrackQUIC bool
	QUICPorts [QUICPortSlots]uint16
	// IncludeSYN timestamps SYNs and lets them open flows.
	IncludeSYN bool
	// SampleFirstTSval also timestamps the TSval a TCP flow is first seen
	// with; by default (ePPing's rule) a flow seen after its handshake
	// waits for the next TSval, since an earlier, unseen packet may have
	// carried the first.
	SampleFirstTSval bool
	// IncludeLocal also timestamps packets addressed to this host, so the
	// replies this host sends give samples (matched on egress).
	IncludeLocal bool
	// Replay takes "now" from the packet's tstamp (BPF_PROG_TEST_RUN).
	Replay bool
	// HaveL3Ifaces enables the lookup of interfaces without Ethernet.
	HaveL3Ifaces bool
	// Expiry of idle state.
	TCPFlowTimeout, OtherFlowTimeout, TimestampTimeout time.Duration
	// Map sizes (entries) and ring buffer size (bytes, power of 2).
	FlowMapSize, TimestampMapSize, RingbufSize uint32
	// EventWakeupBytes: 0, every event wakes a reader blocked on the ring
	// buffer (the kernel's default); otherwise an event wakes it only when
	// at least this many bytes wait in the ring, and the reader must poll
	// (the live monitor does, every 50 ms). A wake-up costs the program
	// microseconds (an irq_work, an interrupt in a VM).
	EventWakeupBytes uint32
	// Aggregate switches to aggregated mode: per-prefix histograms and
	// traffic counters in the kernel, no per-sample or flow events.
	Aggregate bool
	// AggPrefixV4 and AggPrefixV6 are the prefix lengths of the
	// aggregation keys; AggReverse keys RTTs on the reply's destination.
	AggPrefixV4, AggPrefixV6 uint8
	AggReverse               bool
	// PrefixMapSize is how many prefixes one interval holds (two maps of
	// this size exist when Aggregate is set).
	PrefixMapSize uint32
	// FlowSummary keeps per-flow RTT summaries, reported when a flow ends
	// (and, if user space asks, for every live flow).
	FlowSummary bool
	// GeneralPathOnly, for tests and benchmarks, turns the fast path off
	// (bpf/fastpath.h): every packet takes the general path, which gives
	// the same results.
	GeneralPathOnly bool
	// Steps, for benchmarks only, runs the data path up to and including
	// one step (StepParse ... StepCounters) and prunes the rest, to
	// measure what each step costs (rttscope bench --only steps). The
	// zero value is the whole program, the only one with the fast path
	// (bpf/fastpath.h): the cuts run the general path.
	Steps Step
}

// TCPMode is where TCP data samples come from (enum tcp_mode in
// bpf/config.h).
type TCPMode uint32

// The TCP modes.
const (
	// TCPAuto uses the timestamps of segments that carry the option and
	// the sequence numbers of those that do not.
	TCPAuto       TCPMode = 0
	TCPTimestamps TCPMode = 1 // timestamps only (ePPing)
	TCPSequence   TCPMode = 2 // sequence and ACK numbers only
)

// DNSPortSlots and QUICPortSlots are how many DNS server and QUIC ports
// the programs compare with.
const (
	DNSPortSlots  = 4
	QUICPortSlots = 4
)

// TCPModeNames name the modes in flag order (--tcp-mode).
var TCPModeNames = []string{"auto", "ts", "seq"}

// Step is a step of the data path, in the order the steps add cost (enum
// step in bpf/config.h).
type Step uint32

// The data path's steps; each includes the ones before it.
const (
	StepAll       Step = 0 // the whole program (= StepCounters)
	StepParse     Step = 1 // parse down to the identifiers
	StepFlow      Step = 2 // + flow lookup or creation, flow counters
	StepTimestamp Step = 3 // + timestamp insert and match
	StepLocal     Step = 4 // + local-destination check
	StepEvents    Step = 5 // + events (or aggregation, summaries)
	StepCounters  Step = 6 // + the counters map: the whole program
)

// StepNames name the steps from StepParse on, in order.
var StepNames = []string{"parse", "flow", "timestamp", "local", "events", "counters"}

// Default map sizes: together they hold 100,000 concurrent flows in less
// than 64 MiB of kernel memory on a 2-CPU machine (see MemoryUsage and
// docs/aggregation.md).
const (
	DefaultFlowMapSize      = 102400
	DefaultTimestampMapSize = 131072
	DefaultPrefixMapSize    = 1024
)

// DefaultConfig returns ePPing's defaults: TCP only, 100 ms rate limit.
func DefaultConfig() Config {
	return Config{
		RateLimit:        100 * time.Millisecond,
		TrackTCP:         true,
		TCPFlowTimeout:   300 * time.Second,
		OtherFlowTimeout: 30 * time.Second,
		TimestampTimeout: 10 * time.Second,
		FlowMapSize:      DefaultFlowMapSize,
		TimestampMapSize: DefaultTimestampMapSize,
		RingbufSize:      4 << 20,
		AggPrefixV4:      24,
		AggPrefixV6:      48,
		PrefixMapSize:    DefaultPrefixMapSize,
		DNSPorts:         [DNSPortSlots]uint16{53},
		QUICPorts:        [QUICPortSlots]uint16{443},
	}
}

// Validate reports the first bad value, phrased for a command-line user.
func (c Config) Validate() error {
	switch {
	case c.RateLimit < 0:
		return fmt.Errorf("rate limit must be >= 0, got %v", c.RateLimit)
	case c.RTTRate < 0 || math.IsNaN(c.RTTRate) || c.RTTRate > 1e6:
		return fmt.Errorf("rtt rate must be between 0 and 1e6, got %v", c.RTTRate)
	case !c.TrackTCP && !c.TrackICMP && !c.TrackTCPHandshake && !c.TrackDNS && !c.TrackQUIC:
		return fmt.Errorf("nothing to track: enable TCP, the TCP handshake, ICMP, DNS and/or QUIC")
	case c.TrackQUIC && c.QUICPorts == [QUICPortSlots]uint16{}:
		return fmt.Errorf("QUIC tracking needs at least one QUIC port")
	case c.DNSNames && !c.TrackDNS:
		return fmt.Errorf("--dns-names needs --dns")
	case c.TrackDNS && c.DNSPorts == [DNSPortSlots]uint16{}:
		return fmt.Errorf("DNS tracking needs at least one DNS port")
	case c.TCPMode > TCPSequence:
		return fmt.Errorf("unknown TCP mode %d", c.TCPMode)
	case c.TCPFlowTimeout <= 0 || c.OtherFlowTimeout <= 0 || c.TimestampTimeout <= 0:
		return fmt.Errorf("timeouts must be > 0")
	case c.FlowMapSize == 0 || c.TimestampMapSize == 0:
		return fmt.Errorf("map sizes must be > 0")
	case c.AggPrefixV4 > 32 || c.AggPrefixV6 > 128:
		return fmt.Errorf("aggregation prefix lengths must be <= 32 (IPv4) and <= 128 (IPv6)")
	case c.Aggregate && c.PrefixMapSize == 0:
		return fmt.Errorf("prefix map size must be > 0")
	case c.Steps > StepCounters:
		return fmt.Errorf("steps must be between %d and %d, got %d", StepAll, StepCounters, c.Steps)
	case c.RingbufSize < 4096 || c.RingbufSize&(c.RingbufSize-1) != 0:
		return fmt.Errorf("ring buffer size must be a power of two >= 4096, got %d", c.RingbufSize)
	}
	return nil
}
