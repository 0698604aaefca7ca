package format

import (
	"strconv"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// Aggregated mode records (docs/aggregation.md). json/jsonl use ePPing's
// field names where the meaning is the same (ip_prefix, rx_stats, tx_stats,
// count_rtt, min_rtt, mean_rtt, median_rtt, p95_rtt, max_rtt, histogram)
// and the same style for the rest.

// WriteAggregate writes one prefix's summary of one interval. ppviz has no
// such record and skips it.
func (w *writer) WriteAggregate(a *events.Aggregate) error {
	return record(w, a, appendAggregateStandard, nil, appendAggregateJSON)
}

// appendAggregateStandard appends one line:
//
//	HH:MM:SS.nnnnnnnnn PREFIX rtt n=N [tcp_ts=N ...] min=X mean=X p50=X p90=X p95=X p99=X max=X ms rx=P pkts B bytes tx=P pkts B bytes
//
// (the bracket counts the samples of each source that has some; the rtt
// part is "rtt n=0" without samples; minimal output has no rx and
// tx part; a prefix dropped by --anonymize drop shows as "#ID").
func appendAggregateStandard(b []byte, a *events.Aggregate, st *style) []byte {
	b = appendTimeOfDay(b, a.Time, st.loc)
	b = append(b, ' ')
	b = appendPrefix(b, a)
	b = append(b, " rtt"...)
	b = appendDistStandard(b, a.Count, [7]time.Duration{a.Min, a.Mean, a.P50, a.P90, a.P95, a.P99, a.Max}, &a.BySource)
	if st.minimal {
		return append(b, '\n')
	}
	b = append(b, " rx="...)
	b = strconv.AppendUint(b, a.RX.TotalPackets(), 10)
	b = append(b, " pkts "...)
	b = strconv.AppendUint(b, a.RX.TotalBytes(), 10)
	b = append(b, " bytes tx="...)
	b = strconv.AppendUint(b, a.TX.TotalPackets(), 10)
	b = append(b, " pkts "...)
	b = strconv.AppendUint(b, a.TX.TotalBytes(), 10)
	return append(b, " bytes\n"...)
}

// appendDistStandard appends " n=N min=X mean=X p50=X p90=X p95=X
// p99=X max=X ms" for the minimum, mean, quantiles and maximum in v, or
// " n=0" without samples.
func appendDistStandard(b []byte, n uint64, v [7]time.Duration, bySource *[events.NumSources]uint64) []byte {
	b = append(b, " n="...)
	b = strconv.AppendUint(b, n, 10)
	if bySource != nil {
		b = appendSourcesStandard(b, bySource)
	}
	if n == 0 {
		return b
	}
	for i, name := range [...]string{"min", "mean", "p50", "p90", "p95", "p99", "max"} {
		b = append(b, ' ')
		b = append(b, name...)
		b = append(b, '=')
		b = appendMillis(b, v[i])
	}
	return append(b, " ms"...)
}

// appendPrefix appends the prefix, or "#ID" for one that was dropped.
func appendPrefix(b []byte, a *events.Aggregate) []byte {
	if a.PrefixID != 0 && !a.Prefix.IsValid() {
		return strconv.AppendUint(append(b, '#'), a.PrefixID, 10)
	}
	return a.Prefix.AppendTo(b)
}

func appendTrafficJSON(b []byte, key string, t *events.Traffic) []byte {
	b = appendKey(b, key)
	b = append(b, '{')
	b = appendUint(b, "packets", t.TotalPackets())
	b = append(b, ',')
	b = appendUint(b, "bytes", t.TotalBytes())
	for i, name := range events.ClassNames {
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, "_packets\":"...)
		b = strconv.AppendUint(b, t.Packets[i], 10)
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, "_bytes\":"...)
		b = strconv.AppendUint(b, t.Bytes[i], 10)
	}
	for i, name := range events.ECNNames {
		b = append(b, ",\"ecn_"...)
		b = append(b, name...)
		b = append(b, '"', ':')
		b = strconv.AppendUint(b, t.ECN[i], 10)
	}
	return append(b, '}')
}

// appendAggregateJSON appends an aggregate object. The RTT statistics are
// present only when count_rtt > 0, count_by_source (the samples of each
// source that has some) first. histogram lists the non-empty bins as
// [lower_ns, upper_ns, count] (upper_ns null for the overflow bin). A
// prefix dropped by --anonymize drop has prefix_id in place of ip_prefix;
// minimal output has no rx_stats and tx_stats.
func appendAggregateJSON(b []byte, a *events.Aggregate, st *style) []byte {
	b = append(b, '{')
	b = appendInt(b, "timestamp", a.Time)
	b = append(b, ',')
	b = appendStr(b, "type", "aggregate")
	b = append(b, ',')
	b = appendInt(b, "interval_start", a.Start)
	b = append(b, ',')
	if a.PrefixID != 0 && !a.Prefix.IsValid() {
		b = appendUint(b, "prefix_id", a.PrefixID)
	} else {
		b = appendKey(b, "ip_prefix")
		b = append(b, '"')
		b = a.Prefix.AppendTo(b)
		b = append(b, '"')
	}
	b = append(b, ',')
	if !st.minimal {
		b = appendTrafficJSON(b, "rx_stats", &a.RX)
		b = append(b, ',')
		b = appendTrafficJSON(b, "tx_stats", &a.TX)
		b = append(b, ',')
	}
	b = appendUint(b, "count_rtt", a.Count)
	if a.Count == 0 {
		return append(b, '}')
	}
	b = append(b, ',')
	b = appendSourcesJSON(b, &a.BySource)
	for _, f := range [...]struct {
		name string
		v    time.Duration
	}{{"min_rtt", a.Min}, {"mean_rtt", a.Mean}, {"median_rtt", a.P50}, {"p90_rtt", a.P90},
		{"p95_rtt", a.P95}, {"p99_rtt", a.P99}, {"max_rtt", a.Max}} {
		b = append(b, ',')
		b = appendInt(b, f.name, int64(f.v))
	}
	b = append(b, ',')
	b = appendHistogramJSON(b, a.Histogram)
	return append(b, '}')
}

// appendHistogramJSON appends "histogram":[[lower_ns,upper_ns,count],...]
// of the non-empty bins (upper_ns null for the overflow bin).
func appendHistogramJSON(b []byte, bins []events.HistBin) []byte {
	b = appendKey(b, "histogram")
	b = append(b, '[')
	for i, hb := range bins {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendUint(b, hb.Lower, 10)
		b = append(b, ',')
		if hb.Upper == 0 {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendUint(b, hb.Upper, 10)
		}
		b = append(b, ',')
		b = strconv.AppendUint(b, hb.Count, 10)
		b = append(b, ']')
	}
	return append(b, ']')
}
