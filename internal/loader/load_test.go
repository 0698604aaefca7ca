package loader

import (
	"os"
	"testing"
	"time"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to load BPF programs")
	}
}

// Every configuration must pass the verifier, since constants prune code.
func TestLoadPassesVerifier(t *testing.T) {
	requireRoot(t)
	variants := map[string]func(*Config){
		"default":   func(*Config) {},
		"icmp":      func(c *Config) { c.TrackICMP = true },
		"all":       func(c *Config) { c.TrackICMP, c.IncludeSYN, c.IncludeLocal, c.HaveL3Ifaces = true, true, true, true },
		"replay":    func(c *Config) { c.Replay, c.TrackICMP = true, true },
		"rtt-rate":  func(c *Config) { c.RTTRate, c.RTTRateUseSRTT = 0.5, true },
		"rate-zero": func(c *Config) { c.RateLimit = 0 },
		"aggregate": func(c *Config) { c.Aggregate, c.AggregateInterval, c.TrackICMP = true, time.Second, true },
		"aggregate-replay-reverse": func(c *Config) {
			c.Aggregate, c.AggregateInterval, c.Replay, c.AggReverse, c.AggPrefixV4, c.AggPrefixV6 = true, time.Second, true, true, 32, 0
		},
		"flow-summary": func(c *Config) { c.FlowSummary, c.TrackICMP = true, true },
		"flow-summary-aggregate-replay": func(c *Config) {
			c.FlowSummary, c.Aggregate, c.AggregateInterval, c.Replay = true, true, time.Second, true
		},
		"aggregate-all": func(c *Config) {
			c.Aggregate, c.AggregateInterval, c.TrackICMP, c.IncludeSYN, c.IncludeLocal, c.HaveL3Ifaces = true, time.Second, true, true, true, true
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
			objs.Close()
		})
	}
}
