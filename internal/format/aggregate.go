package format

import (
	"strconv"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// Aggregated mode records (docs/aggregation.md, docs/epping.md). Every
// field that has an ePPing name has ePPing's meaning and shape and comes
// first, in ePPing's order: ip_prefix, rx_stats and tx_stats (ePPing's
// traffic classes), count_rtt, min_rtt, mean_rtt, median_rtt, p95_rtt,
// max_rtt, histogram (ePPing's 4 ms bins); the global record's
// protocol_counters, ecn_counters, errors. rttscope's own fields follow,
// with names of their own.

// WriteAggregate writes one prefix's summary of one interval, or the
// interval's global record (left out by --minimal: it has nothing but
// counters). ppviz has no such records and skips them.
func (w *writer) WriteAggregate(a *events.Aggregate) error {
	if a.Meta != nil {
		return record(w, a, appendMetaStandard, nil, appendMetaJSON)
	}
	if a.Global != nil && w.style.minimal {
		return nil // nothing but counters
	}
	if a.Global != nil {
		return record(w, a, appendGlobalStandard, nil, appendGlobalJSON)
	}
	return record(w, a, appendAggregateStandard, nil, appendAggregateJSON)
}

// appendAggregateStandard appends ePPing's line, then rttscope's p90/p99:
//
//	HH:MM:SS.nnnnnnnnn: PREFIX -> rxpkts=N, rxbytes=N, txpkts=N, txbytes=N, rtt-count=N, min=X ms, mean=X ms, median=X ms, p95=X ms, max=X ms, p90=X ms, p99=X ms [tcp_ts=N ...]
//
// (no rtt part without samples; the bracket counts the samples of each
// source that has some; minimal output has no traffic part; a
// prefix dropped by --anonymize drop shows as "#ID").
func appendAggregateStandard(b []byte, a *events.Aggregate, st *style) []byte {
	b = appendTimeOfDay(b, a.Time, st.loc)
	b = append(b, ": "...)
	b = appendPrefix(b, a)
	b = append(b, " ->"...)
	sep := " "
	if !st.minimal {
		rxp, rxb := a.RX.EPPTotals()
		txp, txb := a.TX.EPPTotals()
		for _, f := range [...]struct {
			name string
			v    uint64
		}{{"rxpkts", rxp}, {"rxbytes", rxb}, {"txpkts", txp}, {"txbytes", txb}} {
			b = append(b, sep...)
			b = append(b, f.name...)
			b = append(b, '=')
			b = strconv.AppendUint(b, f.v, 10)
			sep = ", "
		}
	}
	if a.Count == 0 {
		return append(b, '\n')
	}
	b = append(b, sep...)
	b = append(b, "rtt-count="...)
	b = strconv.AppendUint(b, a.Count, 10)
	for _, f := range [...]struct {
		name string
		v    time.Duration
	}{{"min", a.Min}, {"mean", a.Mean}, {"median", a.P50}, {"p95", a.P95}, {"max", a.Max}, {"p90", a.P90}, {"p99", a.P99}} {
		b = append(b, ", "...)
		b = append(b, f.name...)
		b = append(b, '=')
		b = appendMillis(b, f.v)
		b = append(b, " ms"...)
	}
	b = appendSourcesStandard(b, &a.BySource)
	return append(b, '\n')
}

// appendPrefix appends the prefix, or "#ID" for one that was dropped.
func appendPrefix(b []byte, a *events.Aggregate) []byte {
	if a.PrefixID != 0 && !a.Prefix.IsValid() {
		return strconv.AppendUint(append(b, '#'), a.PrefixID, 10)
	}
	return a.Prefix.AppendTo(b)
}

// appendPktBytes appends ePPing's "NAME":{"packets":N,"bytes":N}, leaving
// out zero counters, and nothing at all without packets. It returns
// whether it wrote.
func appendPktBytes(b []byte, first bool, name string, pkts, bytes uint64) ([]byte, bool) {
	if pkts == 0 {
		return b, first
	}
	if !first {
		b = append(b, ',')
	}
	b = appendKey(b, name)
	b = append(b, '{')
	b = appendUint(b, "packets", pkts)
	if bytes > 0 {
		b = append(b, ',')
		b = appendUint(b, "bytes", bytes)
	}
	return append(b, '}'), false
}

// appendEPPStats appends ePPing's rx_stats or tx_stats object.
func appendEPPStats(b []byte, key string, t *events.Traffic) []byte {
	b = appendKey(b, key)
	b = append(b, '{')
	first := true
	for i, name := range events.EPPClassNames {
		b, first = appendPktBytes(b, first, name, t.EPPPackets[i], t.EPPBytes[i])
	}
	return append(b, '}')
}

// appendProtocols appends rttscope's counters of one direction: packets
// and IP bytes in total and by protocol class, and packets by ECN
// codepoint.
func appendProtocols(b []byte, key string, t *events.Traffic) []byte {
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

// appendAggregateJSON appends an aggregate object: ePPing's fields, then
// rttscope's (type, interval_start, count_by_source (the samples of
// each source that has some), p90_rtt, p99_rtt, rtt_histogram as
// [lower_ns, upper_ns, count] of the non-empty log-linear bins with
// upper_ns null for the overflow bin, rx_protocols, tx_protocols). The RTT
// fields are present only with samples, as in ePPing. A prefix dropped by
// --anonymize drop has prefix_id in place of ip_prefix; minimal output
// has no traffic counters.
func appendAggregateJSON(b []byte, a *events.Aggregate, st *style) []byte {
	b = append(b, '{')
	b = appendInt(b, "timestamp", a.Time)
	b = append(b, ',')
	if a.PrefixID != 0 && !a.Prefix.IsValid() {
		b = appendUint(b, "prefix_id", a.PrefixID)
	} else {
		b = appendKey(b, "ip_prefix")
		b = append(b, '"')
		b = a.Prefix.AppendTo(b)
		b = append(b, '"')
	}
	if !st.minimal {
		b = append(b, ',')
		b = appendEPPStats(b, "rx_stats", &a.RX)
		b = append(b, ',')
		b = appendEPPStats(b, "tx_stats", &a.TX)
	}
	if a.Count > 0 {
		b = append(b, ',')
		b = appendUint(b, "count_rtt", a.Count)
		for _, f := range [...]struct {
			name string
			v    time.Duration
		}{{"min_rtt", a.Min}, {"mean_rtt", a.Mean}, {"median_rtt", a.P50}, {"p95_rtt", a.P95}, {"max_rtt", a.Max}} {
			b = append(b, ',')
			b = appendInt(b, f.name, int64(f.v))
		}
		b = append(b, ',')
		b = appendKey(b, "histogram")
		b = append(b, '[')
		for i, n := range a.LinHist {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(n), 10)
		}
		b = append(b, ']')
	}
	b = append(b, ',')
	b = appendStr(b, "type", "aggregate")
	b = append(b, ',')
	b = appendInt(b, "interval_start", a.Start)
	if a.Count > 0 {
		b = append(b, ',')
		b = appendSourcesJSON(b, &a.BySource)
		b = append(b, ',')
		b = appendInt(b, "p90_rtt", int64(a.P90))
		b = append(b, ',')
		b = appendInt(b, "p99_rtt", int64(a.P99))
		b = append(b, ',')
		b = appendHistogramJSON(b, "rtt_histogram", a.Histogram)
	}
	if !st.minimal {
		b = append(b, ',')
		b = appendProtocols(b, "rx_protocols", &a.RX)
		b = append(b, ',')
		b = appendProtocols(b, "tx_protocols", &a.TX)
	}
	return append(b, '}')
}

// appendHistogramJSON appends "key":[[lower_ns,upper_ns,count],...] of
// the non-empty bins (upper_ns null for the overflow bin).
func appendHistogramJSON(b []byte, key string, bins []events.HistBin) []byte {
	b = appendKey(b, key)
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

// appendMetaStandard appends ePPing's first line of aggregated output:
//
//	Aggregating RTTs in histograms with 250 4 ms wide bins every 10 seconds
func appendMetaStandard(b []byte, a *events.Aggregate, _ *style) []byte {
	b = append(b, "Aggregating RTTs in histograms with "...)
	b = strconv.AppendInt(b, events.LinBins, 10)
	b = append(b, ' ')
	b = appendMillis(b, events.LinBinWidth)
	b = append(b, " ms wide bins every "...)
	b = strconv.AppendFloat(b, a.Meta.Interval.Seconds(), 'g', 9, 64)
	return append(b, " seconds\n"...)
}

// appendMetaJSON appends ePPing's first record of aggregated output, then
// rttscope's type.
func appendMetaJSON(b []byte, a *events.Aggregate, _ *style) []byte {
	m := a.Meta
	b = append(b, '{')
	b = appendInt(b, "timestamp", a.Time)
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"bins", events.LinBins}, {"bin_width_ns", int64(events.LinBinWidth)}, {"aggregation_interval_ns", int64(m.Interval)},
		{"timeout_interval_ns", int64(m.Timeout)}, {"ipv4_prefix_len", int64(m.PrefixV4)}, {"ipv6_prefix_len", int64(m.PrefixV6)}} {
		b = append(b, ',')
		b = appendInt(b, f.name, f.v)
	}
	b = append(b, ',')
	b = appendStr(b, "type", "aggregate_meta")
	return append(b, '}')
}

// protoName is ePPing's name of an IP protocol: TCP, UDP, ICMP, ICMPv6,
// or the number.
func protoName(b []byte, p int) []byte {
	switch p {
	case 6:
		return append(b, "TCP"...)
	case 17:
		return append(b, "UDP"...)
	case 1:
		return append(b, "ICMP"...)
	case 58:
		return append(b, "ICMPv6"...)
	}
	return strconv.AppendInt(b, int64(p), 10)
}

// globalProtos lists the protocols in ePPing's order: TCP, UDP, ICMP,
// ICMPv6, then the others by number.
var globalProtos = func() []int {
	l := []int{6, 17, 1, 58}
	for p := range 256 {
		if p != 6 && p != 17 && p != 1 && p != 58 {
			l = append(l, p)
		}
	}
	return l
}()

// appendGlobalJSON appends ePPing's global record, then rttscope's type
// and interval_start. Zero counters are left out, as ePPing does.
func appendGlobalJSON(b []byte, a *events.Aggregate, _ *style) []byte {
	g := a.Global
	b = append(b, '{')
	b = appendInt(b, "timestamp", a.Time)
	b = append(b, ',')
	b = appendKey(b, "protocol_counters")
	b = append(b, '{')
	first := true
	b, first = appendPktBytes(b, first, "non_IP", g.NonIPPackets, g.NonIPBytes)
	var name []byte
	for _, p := range globalProtos {
		name = protoName(name[:0], p)
		b, first = appendPktBytes(b, first, string(name), g.ProtoPackets[p], g.ProtoBytes[p])
	}
	b = append(b, "},"...)
	b = appendKey(b, "ecn_counters")
	b = appendCounters(b, []string{"no_ECT", "ECT1", "ECT0", "CE"}, g.ECN[:])
	b = append(b, ',')
	b = appendKey(b, "errors")
	b = appendCounters(b, []string{"store_packet_ts", "create_flow_state", "create_agg_subnet_state"},
		[]uint64{g.PacketTSStore, g.FlowCreate, g.AggSubnetCreate})
	b = append(b, ',')
	b = appendStr(b, "type", "aggregate_global")
	b = append(b, ',')
	b = appendInt(b, "interval_start", a.Start)
	return append(b, '}')
}

// appendCounters appends {"name":N,...} without the zero ones.
func appendCounters(b []byte, names []string, v []uint64) []byte {
	b = append(b, '{')
	first := true
	for i, n := range names {
		if v[i] == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendUint(b, n, v[i])
	}
	return append(b, '}')
}

// appendGlobalStandard appends ePPing's global line:
//
//	HH:MM:SS.nnnnnnnnn: TCP=(pkts=N, bytes=N), ICMP=(pkts=N, bytes=N), ECN=(Not-ECT=N), errors=(store-packet-ts=N)
func appendGlobalStandard(b []byte, a *events.Aggregate, st *style) []byte {
	g := a.Global
	b = appendTimeOfDay(b, a.Time, st.loc)
	b = append(b, ": "...)
	first := true
	tuple := func(name []byte, pkts, bytes uint64) {
		if pkts == 0 {
			return
		}
		if !first {
			b = append(b, ", "...)
		}
		first = false
		b = append(b, name...)
		b = append(b, "=(pkts="...)
		b = strconv.AppendUint(b, pkts, 10)
		if bytes > 0 {
			b = append(b, ", bytes="...)
			b = strconv.AppendUint(b, bytes, 10)
		}
		b = append(b, ')')
	}
	tuple([]byte("non-IP"), g.NonIPPackets, g.NonIPBytes)
	var name []byte
	for _, p := range globalProtos {
		name = protoName(name[:0], p)
		tuple(name, g.ProtoPackets[p], g.ProtoBytes[p])
	}
	if first {
		b = append(b, "pkts=0, bytes=0"...)
	}
	b = appendCountersStandard(b, "ECN", []string{"Not-ECT", "ECT1", "ECT0", "CE"}, g.ECN[:])
	b = appendCountersStandard(b, "errors", []string{"store-packet-ts", "create-flow-state", "create-agg-subnet-state"},
		[]uint64{g.PacketTSStore, g.FlowCreate, g.AggSubnetCreate})
	return append(b, '\n')
}

// appendCountersStandard appends ", NAME=(a=N, b=N)" without the zero
// counters, and nothing when all are zero.
func appendCountersStandard(b []byte, group string, names []string, v []uint64) []byte {
	first := true
	for i, n := range names {
		if v[i] == 0 {
			continue
		}
		if first {
			b = append(b, ", "...)
			b = append(b, group...)
			b = append(b, "=("...)
		} else {
			b = append(b, ", "...)
		}
		first = false
		b = append(b, n...)
		b = append(b, '=')
		b = strconv.AppendUint(b, v[i], 10)
	}
	if !first {
		b = append(b, ')')
	}
	return b
}
