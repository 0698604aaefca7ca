package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// TestDashboardUsesServedMetrics reads the Grafana dashboard of the
// repository and checks that every metric its queries name is one the
// sink serves (a histogram also as _bucket, _count and _sum), so a renamed
// metric cannot leave the dashboard empty.
func TestDashboardUsesServedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana/rttscope-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Addr: "127.0.0.1:0", MaxPrefixes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	_ = s.WriteAggregate(aggregate("10.1.0.0/24", time.Millisecond))
	_ = s.WriteStats(&events.Stats{Process: &events.ProcessStats{},
		BPF:   &events.BPFStats{Enabled: true, Programs: []events.ProgramStats{{Name: "tc_ingress", RunCount: 1, IntervalRunCount: 1}}},
		Sinks: &events.SinkReport{List: []events.SinkStats{{Name: "kafka"}}}})
	fams, _ := scrape(t, s)
	served := map[string]bool{}
	for name, f := range fams {
		served[name] = true
		if f.GetType().String() == "HISTOGRAM" {
			served[name+"_bucket"], served[name+"_count"], served[name+"_sum"] = true, true, true
		}
	}
	names := regexp.MustCompile(`rttscope_[a-z0-9_]+`)
	used := 0
	check := func(where, expr string) {
		for _, n := range names.FindAllString(expr, -1) {
			used++
			if !served[n] {
				t.Errorf("%s: %s is not a metric the sink serves", where, n)
			}
		}
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			check(p.Title, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			check("variable", q)
		}
	}
	if used < 20 {
		t.Fatalf("only %d metric references in the dashboard", used)
	}
}
