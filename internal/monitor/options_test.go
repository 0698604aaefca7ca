package monitor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/sampling"
)

// TestRunRefusesBeforeLoading: options that cannot work, an output writer
// without the capabilities the programs' records need included, are
// refused in one line before anything is loaded (no BPF object is open
// when Run returns). Needs no privileges.
func TestRunRefusesBeforeLoading(t *testing.T) {
	ok := func() Options {
		return Options{Interfaces: []string{"lo"}, BPF: loader.DefaultConfig(), CleanupInterval: time.Second, Output: &collector{}, Log: &strings.Builder{}}
	}
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"no output", func(o *Options) { o.Output = nil }, "no output writer"},
		{"no interface", func(o *Options) { o.Interfaces = nil }, "no interface given"},
		{"cleanup interval", func(o *Options) { o.CleanupInterval = -time.Second }, "--cleanup-interval, --stats-interval and --duration must be >= 0"},
		{"duration", func(o *Options) { o.Duration = -time.Second }, "--cleanup-interval, --stats-interval and --duration must be >= 0"},
		{"tc mode", func(o *Options) { o.Attach.TCMode = "new" }, `invalid --tc-mode "new"`},
		{"ring buffer", func(o *Options) { o.BPF.RingbufSize = 5000 }, "ring buffer size must be a power of two"},
		{"aggregate without interval", func(o *Options) { o.BPF.Aggregate = true }, "aggregation interval must be > 0"},
		{"summary interval without summaries", func(o *Options) { o.Report.FlowSummaryInterval = time.Second }, "--flow-summary-interval needs --flow-summary"},
		{"writer without aggregates", func(o *Options) {
			o.BPF.Aggregate, o.Report = true, sampling.Report{AggregateInterval: time.Second}
		}, "the output writer cannot write aggregated records"},
		{"writer without summaries", func(o *Options) { o.BPF.FlowSummary = true }, "the output writer cannot write flow summaries"},
	} {
		o := ok()
		tc.change(&o)
		err := Run(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %q", tc.name, err, tc.want)
		}
		checkNoBPFFds(t)
	}
	if err := ok().Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
