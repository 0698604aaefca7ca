// Package loader loads rttscope's BPF programs with a configuration and
// attaches them to interfaces (TCX, legacy clsact, XDP).
package loader

import (
	"fmt"
	"math"
	"time"
)

// Config is the load-time configuration of the BPF programs.
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
	// IncludeSYN timestamps SYNs and lets them open flows.
	IncludeSYN bool
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
}

// DefaultConfig returns ePPing's defaults: TCP only, 100 ms rate limit.
func DefaultConfig() Config {
	return Config{
		RateLimit:        100 * time.Millisecond,
		TrackTCP:         true,
		TCPFlowTimeout:   300 * time.Second,
		OtherFlowTimeout: 30 * time.Second,
		TimestampTimeout: 10 * time.Second,
		FlowMapSize:      65536,
		TimestampMapSize: 131072,
		RingbufSize:      4 << 20,
	}
}

// Validate reports the first bad value, phrased for a command-line user.
func (c Config) Validate() error {
	switch {
	case c.RateLimit < 0:
		return fmt.Errorf("rate limit must be >= 0, got %v", c.RateLimit)
	case c.RTTRate < 0 || math.IsNaN(c.RTTRate) || c.RTTRate > 1e6:
		return fmt.Errorf("rtt rate must be between 0 and 1e6, got %v", c.RTTRate)
	case !c.TrackTCP && !c.TrackICMP:
		return fmt.Errorf("nothing to track: enable TCP and/or ICMP")
	case c.TCPFlowTimeout <= 0 || c.OtherFlowTimeout <= 0 || c.TimestampTimeout <= 0:
		return fmt.Errorf("timeouts must be > 0")
	case c.FlowMapSize == 0 || c.TimestampMapSize == 0:
		return fmt.Errorf("map sizes must be > 0")
	case c.RingbufSize < 4096 || c.RingbufSize&(c.RingbufSize-1) != 0:
		return fmt.Errorf("ring buffer size must be a power of two >= 4096, got %d", c.RingbufSize)
	}
	return nil
}
