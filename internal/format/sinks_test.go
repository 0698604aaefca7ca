package format

import (
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// TestStatsSinks: a stats record with the sinks' counters (docs/sinks.md)
// follows the JSON Schema in json and jsonl, and the standard line names
// each counter after its sink (the Kafka ones only for Kafka).
func TestStatsSinks(t *testing.T) {
	sch := compileSchema(t)
	s := &events.Stats{Time: 1, Packets: 9, Sinks: &events.SinkReport{List: []events.SinkStats{
		{Name: "files", Policy: "block", Records: 10, Queued: 2},
		{Name: "kafka", Policy: "spool", Records: 10, Dropped: 1, Produced: 9, Acked: 8, Spooled: 4},
		{Name: "metrics", Policy: "drop", Records: 1},
	}}}
	for _, f := range []string{"json", "jsonl"} {
		out, _ := render(t, f, []any{s})
		obj := strings.TrimSpace(string(out))
		if f == "json" {
			obj = strings.TrimSuffix(strings.TrimPrefix(obj, "["), "]")
		}
		checkObject(t, sch, []byte(strings.TrimSpace(obj)), s)
	}
	line := string(appendStatsLine(nil, s, time.UTC))
	for _, w := range []string{" files_records=10 files_queued=2 files_dropped=0 ", " kafka_dropped=1 kafka_produced=9 kafka_acked=8 kafka_spooled=4 ", " metrics_dropped=0\n"} {
		if !strings.Contains(line, w) {
			t.Errorf("stats line lacks %q:\n%s", w, line)
		}
	}
	if strings.Contains(line, "files_acked") {
		t.Errorf("stats line has Kafka counters for files:\n%s", line)
	}
}
