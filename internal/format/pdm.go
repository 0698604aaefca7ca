package format

import (
	"strconv"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// Records of rttscope pdm (docs/pdm.md). json/jsonl start with the common
// flow fields (the sender of the option as source), then "type" ("pdm" or
// "pdm_interval"); the option's wire fields keep tshark's names
// (ipv6.opt.pdm.*). ppviz has no such records and skips them.

// WritePDM writes one PDM option.
func (w *writer) WritePDM(p *events.PDM) error {
	return record(w, p, appendPDMStandard, nil, appendPDMJSON)
}

// WritePDMInterval writes one 5-tuple's PDM summary of an interval.
func (w *writer) WritePDMInterval(p *events.PDMInterval) error {
	return record(w, p, appendPDMIntervalStandard, nil, appendPDMIntervalJSON)
}

// appendPDMStandard appends one line:
//
//	HH:MM:SS.nnnnnnnnn PROTO SRC:SPORT+DST:DPORT pdm DIRECTION dtlr=X ms dtls=X ms [round_trip=X ms] [network_rtt=X ms] psn=N psnlr=N
//
// (minimal output has no psn and psnlr).
func appendPDMStandard(b []byte, p *events.PDM, st *style) []byte {
	b = appendPDMLineStart(b, p.Time, &p.Flow, " pdm ", p.Direction(), st)
	b = appendMillisField(b, " dtlr=", p.DTLR)
	b = appendMillisField(b, " dtls=", p.DTLS)
	if p.HasRoundTrip {
		b = appendMillisField(b, " round_trip=", p.RoundTrip)
	}
	if p.HasNetworkRTT {
		b = appendMillisField(b, " network_rtt=", p.NetworkRTT)
	}
	if !st.minimal {
		b = append(b, " psn="...)
		b = strconv.AppendUint(b, uint64(p.PSNThisPkt), 10)
		b = append(b, " psnlr="...)
		b = strconv.AppendUint(b, uint64(p.PSNLastRecv), 10)
	}
	return append(b, '\n')
}

// appendPDMLineStart appends "HH:MM:SS.nnnnnnnnn PROTO FLOW KIND DIRECTION".
func appendPDMLineStart(b []byte, t int64, f *events.Flow, kind, dir string, st *style) []byte {
	b = appendFlowLineStart(b, t, f, st)
	b = append(b, kind...)
	return append(b, dir...)
}

func appendMillisField(b []byte, name string, d time.Duration) []byte {
	b = append(b, name...)
	b = appendMillis(b, d)
	return append(b, " ms"...)
}

// appendPDMJSON appends a PDM object. Minimal output has no ifindex and
// none of the option's wire fields (psn_this_pkt ... delta_last_sent):
// only the decoded delays.
func appendPDMJSON(b []byte, p *events.PDM, st *style) []byte {
	b = appendCommonJSON(b, p.Time, &p.Flow)
	b = append(b, ',')
	b = appendStr(b, "type", "pdm")
	b = append(b, ',')
	b = appendStr(b, "direction", p.Direction())
	if !st.minimal {
		b = append(b, ',')
		b = appendUint(b, "ifindex", uint64(p.Ifindex))
		for _, f := range [...]struct {
			name string
			v    uint16
		}{{"psn_this_pkt", p.PSNThisPkt}, {"psn_last_recv", p.PSNLastRecv}, {"scale_dtlr", uint16(p.ScaleDTLR)},
			{"delta_last_recv", p.DeltaLastRecv}, {"scale_dtls", uint16(p.ScaleDTLS)}, {"delta_last_sent", p.DeltaLastSent}} {
			b = append(b, ',')
			b = appendUint(b, f.name, uint64(f.v))
		}
	}
	b = append(b, ',')
	b = appendInt(b, "dtlr", int64(p.DTLR))
	b = append(b, ',')
	b = appendInt(b, "dtls", int64(p.DTLS))
	if p.HasRoundTrip {
		b = append(b, ',')
		b = appendInt(b, "round_trip", int64(p.RoundTrip))
	}
	if p.HasNetworkRTT {
		b = append(b, ',')
		b = appendInt(b, "network_rtt", int64(p.NetworkRTT))
	}
	return append(b, '}')
}

// appendPDMIntervalStandard appends one line:
//
//	HH:MM:SS.nnnnnnnnn PROTO SRC:SPORT+DST:DPORT pdm_interval DIRECTION dtlr n=N min=X ... max=X ms dtls n=N ... network_rtt n=N ...
func appendPDMIntervalStandard(b []byte, p *events.PDMInterval, st *style) []byte {
	b = appendPDMLineStart(b, p.Time, &p.Flow, " pdm_interval ", p.Direction(), st)
	for _, d := range [...]struct {
		name string
		d    *events.Distribution
	}{{" dtlr", &p.DTLR}, {" dtls", &p.DTLS}, {" network_rtt", &p.NetworkRTT}} {
		b = append(b, d.name...)
		b = appendDistStandard(b, d.d)
	}
	return append(b, '\n')
}

// appendDistStandard appends " n=N min=X mean=X p50=X p90=X p95=X
// p99=X max=X ms", or " n=0" without samples.
func appendDistStandard(b []byte, d *events.Distribution) []byte {
	b = append(b, " n="...)
	b = strconv.AppendUint(b, d.Count, 10)
	if d.Count == 0 {
		return b
	}
	for _, f := range [...]struct {
		name string
		v    time.Duration
	}{{"min", d.Min}, {"mean", d.Mean}, {"p50", d.P50}, {"p90", d.P90}, {"p95", d.P95}, {"p99", d.P99}, {"max", d.Max}} {
		b = append(b, ' ')
		b = append(b, f.name...)
		b = append(b, '=')
		b = appendMillis(b, f.v)
	}
	return append(b, " ms"...)
}

// appendPDMIntervalJSON appends a PDM interval object: the common fields,
// type, interval_start, direction, and per delay an object of count, then
// (when count > 0) min, mean, median, p90, p95, p99, max and the
// histogram's non-empty bins, as aggregated records have them.
func appendPDMIntervalJSON(b []byte, p *events.PDMInterval, _ *style) []byte {
	b = appendCommonJSON(b, p.Time, &p.Flow)
	b = append(b, ',')
	b = appendStr(b, "type", "pdm_interval")
	b = append(b, ',')
	b = appendInt(b, "interval_start", p.Start)
	b = append(b, ',')
	b = appendStr(b, "direction", p.Direction())
	for _, d := range [...]struct {
		name string
		d    *events.Distribution
	}{{"dtlr", &p.DTLR}, {"dtls", &p.DTLS}, {"network_rtt", &p.NetworkRTT}} {
		b = append(b, ',')
		b = appendDistributionJSON(b, d.name, d.d)
	}
	return append(b, '}')
}

func appendDistributionJSON(b []byte, key string, d *events.Distribution) []byte {
	b = appendKey(b, key)
	b = append(b, '{')
	b = appendUint(b, "count", d.Count)
	if d.Count > 0 {
		for _, f := range [...]struct {
			name string
			v    time.Duration
		}{{"min", d.Min}, {"mean", d.Mean}, {"median", d.P50}, {"p90", d.P90}, {"p95", d.P95}, {"p99", d.P99}, {"max", d.Max}} {
			b = append(b, ',')
			b = appendInt(b, f.name, int64(f.v))
		}
		b = append(b, ',')
		b = appendHistogramJSON(b, "histogram", d.Histogram)
	}
	return append(b, '}')
}
