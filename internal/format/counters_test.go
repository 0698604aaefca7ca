package format

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/probe"
)

// TestEveryKernelCounterReported reads enum counter from the BTF of the
// embedded BPF object, so a counter added in bpf/counters.h fails here
// until it has a name in events.StatsCounters and reaches the stats
// record of every format.
func TestEveryKernelCounterReported(t *testing.T) {
	spec, err := probe.LoadRttscope()
	if err != nil {
		t.Fatal(err)
	}
	var enum *btf.Enum
	if err := spec.Types.TypeByName("counter", &enum); err != nil {
		t.Fatalf("embedded object lacks enum counter: %v", err)
	}
	var last btf.EnumValue
	if n := len(enum.Values); n > 0 {
		last = enum.Values[n-1]
	}
	if last.Name != "COUNTER_NR" || last.Value != uint64(events.NumCounters) {
		t.Fatalf("enum counter ends with %s = %d, want COUNTER_NR = %d (run make generate)", last.Name, last.Value, events.NumCounters)
	}

	// Each counter a value of its own, falling (inserts above deletes).
	var c events.Counters
	for i := range c {
		c[i] = 1000 + uint64(len(c)-i)
	}
	var s events.Stats
	s.SetCounters(&c)
	js := string(appendStatsJSON(nil, &s))
	line := string(appendStatsLine(nil, &s, time.UTC)) // ppviz writes the same line
	words := strings.Fields(line)

	for _, v := range enum.Values[:len(enum.Values)-1] {
		var names []string
		for _, sc := range events.StatsCounters {
			if uint64(sc.Kernel) == v.Value {
				names = append(names, sc.Name)
			}
		}
		if len(names) != 1 {
			t.Errorf("%s (%d) has %d names in events.StatsCounters, want one: %v", v.Name, v.Value, len(names), names)
			continue
		}
		want := c[v.Value]
		if v.Name == "COUNTER_PACKETS" { // the general path's; packets is both paths'
			want += c[probe.RttscopeCounterCOUNTER_FAST_PATH]
		}
		if j := fmt.Sprintf(`,"%s":%d`, names[0], want); !strings.Contains(js, j+",") && !strings.Contains(js, j+"}") {
			t.Errorf("%s: json stats record lacks %s\n%s", v.Name, j, js)
		}
		if l := fmt.Sprintf("%s=%d", names[0], want); !slices.Contains(words, l) {
			t.Errorf("%s: stats line lacks %s\n%s", v.Name, l, line)
		}
	}

	// The occupancies are inserts minus deletes.
	flows := c[probe.RttscopeCounterCOUNTER_FLOWS_CREATED] - c[probe.RttscopeCounterCOUNTER_FLOWS_DELETED]
	ts := c[probe.RttscopeCounterCOUNTER_TS_CREATED] - c[probe.RttscopeCounterCOUNTER_TS_DELETED]
	if !strings.Contains(js, fmt.Sprintf(`"flows":%d,"timestamps":%d,`, flows, ts)) {
		t.Errorf("occupancy: want flows %d, timestamps %d:\n%s", flows, ts, js)
	}
}
