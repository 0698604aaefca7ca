package format

import (
	"strconv"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// WriteFlowSummary writes a per-flow summary (--flow-summary). ppviz has no
// such record and skips it.
func (w *writer) WriteFlowSummary(s *events.FlowSummary) error {
	return record(w, s, appendSummaryStandard, nil, appendSummaryJSON)
}

func summaryWhat(s *events.FlowSummary) string {
	if s.Reason == 0 {
		return "interval"
	}
	return "closing"
}

// appendSummaryStandard appends one line:
//
//	HH:MM:SS.nnnnnnnnn TCP SRC:SPORT+DST:DPORT summary closing due to FIN, duration 12.3 s; src: P pkts B bytes, rtt n=N [tcp_ts=N ...] min=X mean=X p50=X p99=X max=X ms; dest: ...
//
// Minimal output leaves out the "P pkts B bytes, " parts.
func appendSummaryStandard(b []byte, s *events.FlowSummary, st *style) []byte {
	b = appendFlowLineStart(b, s.Time, &s.Flow, st)
	b = append(b, " summary "...)
	b = append(b, summaryWhat(s)...)
	if s.Reason != 0 {
		b = append(b, " due to "...)
		b = append(b, s.Reason.String()...)
	}
	b = append(b, ", duration "...)
	b = strconv.AppendFloat(b, float64(s.Time-s.Start)/1e9, 'g', 6, 64)
	b = append(b, " s"...)
	for i, d := range [2]*events.FlowDirSummary{&s.Src, &s.Dst} {
		if i == 0 {
			b = append(b, "; src: "...)
		} else {
			b = append(b, "; dest: "...)
		}
		if !st.minimal {
			b = strconv.AppendUint(b, d.Packets, 10)
			b = append(b, " pkts "...)
			b = strconv.AppendUint(b, d.Bytes, 10)
			b = append(b, " bytes, "...)
		}
		b = append(b, "rtt n="...)
		b = strconv.AppendUint(b, d.Count, 10)
		b = appendSourcesStandard(b, &d.BySource)
		if d.Count > 0 {
			for _, f := range [...]struct {
				name string
				v    time.Duration
			}{{"min", d.Min}, {"mean", d.Mean}, {"p50", d.P50}, {"p99", d.P99}, {"max", d.Max}} {
				b = append(b, ' ')
				b = append(b, f.name...)
				b = append(b, '=')
				b = appendMillis(b, f.v)
			}
			b = append(b, " ms"...)
		}
	}
	return append(b, '\n')
}

func appendDirSummaryJSON(b []byte, key string, d *events.FlowDirSummary, st *style) []byte {
	b = appendKey(b, key)
	b = append(b, '{')
	if !st.minimal {
		b = appendUint(b, "packets", d.Packets)
		b = append(b, ',')
		b = appendUint(b, "bytes", d.Bytes)
		b = append(b, ',')
	}
	b = appendUint(b, "count_rtt", d.Count)
	if d.Count > 0 {
		b = append(b, ',')
		b = appendSourcesJSON(b, &d.BySource)
		for _, f := range [...]struct {
			name string
			v    time.Duration
		}{{"min_rtt", d.Min}, {"mean_rtt", d.Mean}, {"median_rtt", d.P50}, {"p99_rtt", d.P99}, {"max_rtt", d.Max}} {
			b = append(b, ',')
			b = appendInt(b, f.name, int64(f.v))
		}
	}
	return append(b, '}')
}

// appendSummaryJSON appends a flow summary object: the common fields (flow
// in the opener's direction), then "type":"flow_summary", "flow_summary"
// ("closing" or "interval"), "reason" (closing only), "start" and
// "duration" (ns), and src_stats/dest_stats: what each end sent and the RTTs
// of its packets (minimal output: the RTTs only).
func appendSummaryJSON(b []byte, s *events.FlowSummary, st *style) []byte {
	b = appendCommonJSON(b, s.Time, &s.Flow)
	b = append(b, ',')
	b = appendStr(b, "type", "flow_summary")
	b = append(b, ',')
	b = appendStr(b, "flow_summary", summaryWhat(s))
	if s.Reason != 0 {
		b = append(b, ',')
		b = appendStr(b, "reason", s.Reason.String())
	}
	b = append(b, ',')
	b = appendInt(b, "start", s.Start)
	b = append(b, ',')
	b = appendInt(b, "duration", s.Time-s.Start)
	b = append(b, ',')
	b = appendDirSummaryJSON(b, "src_stats", &s.Src, st)
	b = append(b, ',')
	b = appendDirSummaryJSON(b, "dest_stats", &s.Dst, st)
	return append(b, '}')
}
