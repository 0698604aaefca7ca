package format

import (
	"math"
	"strconv"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// The append* functions below render one record into b and return the
// extended slice. None of them allocates when b has room.

// appendFlowName appends "SRC:SPORT+DST:DPORT" (IPv6 without brackets).
// A flow whose addresses were dropped (--anonymize drop) shows its number
// in their place: "#ID:SPORT+#ID:DPORT", which scripts that split on '+'
// and the last ':' still take apart.
func appendFlowName(b []byte, f *events.Flow) []byte {
	b = appendHost(b, f, &f.Src)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(f.Src.Port), 10)
	b = append(b, '+')
	b = appendHost(b, f, &f.Dst)
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(f.Dst.Port), 10)
}

func appendHost(b []byte, f *events.Flow, e *events.Endpoint) []byte {
	if f.AddressesDropped() {
		return strconv.AppendUint(append(b, '#'), f.ID, 10)
	}
	return e.IP.AppendTo(b)
}

// appendTimeOfDay appends "HH:MM:SS.nnnnnnnnn" for Unix time ns in loc, as
// ePPing's print_ns_datetime (localtime_r + strftime "%H:%M:%S" + ".%09llu").
func appendTimeOfDay(b []byte, ns int64, loc *time.Location) []byte {
	t := time.Unix(0, ns).In(loc)
	h, m, s := t.Clock()
	b = append2(b, h)
	b = append(b, ':')
	b = append2(b, m)
	b = append(b, ':')
	b = append2(b, s)
	b = append(b, '.')
	return appendFrac9(b, uint64(t.Nanosecond()))
}

// append2 appends v (0..99) as two digits.
func append2(b []byte, v int) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10))
}

// appendFrac9 appends v (0..999999999) as exactly nine digits.
func appendFrac9(b []byte, v uint64) []byte {
	var d [9]byte
	for i := 8; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:]...)
}

// appendSeconds appends ns as decimal seconds with exactly nine digits after
// the point, using integer arithmetic only (ppviz: nine decimals always,
// README.md "Output formats"; %g would switch to exponents).
func appendSeconds(b []byte, ns int64) []byte {
	u := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		u = -u // two's complement: correct for math.MinInt64 too
	}
	b = strconv.AppendUint(b, u/1e9, 10)
	b = append(b, '.')
	return appendFrac9(b, u%1e9)
}

// appendMillis appends d in milliseconds as C's printf("%.6g") does:
// ePPing prints (double)rtt / NS_PER_MS with "%.6g". strconv's 'g' with
// precision 6 uses the same rules (exponent form when the rounded decimal
// exponent is < -4 or >= 6, trailing zeros removed, at least two exponent
// digits).
func appendMillis(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, float64(d)/1e6, 'g', 6, 64)
}

func appendRTTStandard(b []byte, e *events.RTT, st *style) []byte {
	b = appendTimeOfDay(b, e.Time, st.loc)
	b = append(b, ' ')
	b = appendMillis(b, e.RTT)
	b = append(b, " ms "...)
	b = appendMillis(b, e.MinRTT)
	b = append(b, " ms "...)
	b = append(b, e.Flow.Proto.String()...)
	b = append(b, ' ')
	b = appendFlowName(b, &e.Flow)
	if tag := e.Source.Tag(); tag != "" {
		b = append(b, ' ')
		b = append(b, tag...)
	}
	if e.Source == events.SourceDNS {
		b = append(b, ' ')
		b = e.DNS.AppendQType(b)
		b = append(b, ' ')
		b = e.DNS.AppendRCode(b)
		if e.DNS.Truncated {
			b = append(b, " TC"...)
		}
		if e.DNS.Name != "" {
			b = append(b, ' ')
			b = append(b, e.DNS.Name...)
		}
	}
	return append(b, '\n')
}

// appendFlowLineStart appends "HH:MM:SS.nnnnnnnnn PROTO SRC:SPORT+DST:DPORT",
// the start of the standard lines about a flow.
func appendFlowLineStart(b []byte, t int64, f *events.Flow, st *style) []byte {
	b = appendTimeOfDay(b, t, st.loc)
	b = append(b, ' ')
	b = append(b, f.Proto.String()...)
	b = append(b, ' ')
	return appendFlowName(b, f)
}

func appendFlowStandard(b []byte, e *events.FlowEvent, st *style) []byte {
	b = appendFlowLineStart(b, e.Time, &e.Flow, st)
	b = append(b, ' ')
	b = append(b, e.Type.String()...)
	b = append(b, " due to "...)
	b = append(b, e.Reason.String()...)
	b = append(b, " from "...)
	b = append(b, e.Source.String()...)
	return append(b, '\n')
}

func appendRTTPPViz(b []byte, e *events.RTT) []byte {
	b = appendSeconds(b, e.Time)
	b = append(b, ' ')
	b = appendSeconds(b, int64(e.RTT))
	b = append(b, ' ')
	b = appendSeconds(b, int64(e.MinRTT))
	b = append(b, ' ')
	b = appendFlowName(b, &e.Flow)
	return append(b, '\n')
}

// appendStatsLine appends the human-readable stats line of the standard and
// ppviz formats: "HH:MM:SS.nnnnnnnnn stats: packets=N rtt_events=N ...".
func appendStatsLine(b []byte, s *events.Stats, loc *time.Location) []byte {
	b = appendTimeOfDay(b, s.Time, loc)
	b = append(b, " stats:"...)
	for i := range events.StatsCounters {
		c := &events.StatsCounters[i]
		b = append(b, ' ')
		b = append(b, c.Name...)
		b = append(b, '=')
		b = strconv.AppendUint(b, *c.Field(s), 10)
	}
	if s.Variant != "" {
		b = append(b, ' ')
		b = append(b, s.Variant...)
	}
	if p := s.Process; p != nil {
		b = append(b, " cpu_user="...)
		b = appendMicros(b, p.CPUUser)
		b = append(b, "s cpu_sys="...)
		b = appendMicros(b, p.CPUSystem)
		b = append(b, "s cpu_share="...)
		b = appendFloat(b, p.CPUShare*100, 2)
		b = append(b, "% rss="...)
		b = appendMiB(b, p.RSS)
		b = append(b, " max_rss="...)
		b = appendMiB(b, p.MaxRSS)
	}
	if bs := s.BPF; bs != nil {
		if !bs.Enabled {
			b = append(b, " bpf_stats=off"...)
		}
		for i := range bs.Programs {
			p := &bs.Programs[i]
			b = append(b, ' ')
			b = append(b, p.Name...)
			b = append(b, "_runs="...)
			b = strconv.AppendUint(b, p.RunCount, 10)
			b = append(b, ' ')
			b = append(b, p.Name...)
			b = append(b, "_ns_per_pkt="...)
			v, ok := p.NsPerPacket()
			b = appendNsOrDash(b, v, ok)
			b = append(b, ' ')
			b = append(b, p.Name...)
			b = append(b, "_interval_ns_per_pkt="...)
			v, ok = p.IntervalNsPerPacket()
			b = appendNsOrDash(b, v, ok)
		}
	}
	sinks := s.SinkList()
	for i := range sinks {
		k := &sinks[i]
		for _, c := range sinkCounters(k) {
			b = append(b, ' ')
			b = append(b, k.Name...)
			b = append(b, '_')
			b = append(b, c.name...)
			b = append(b, '=')
			b = strconv.AppendUint(b, c.v, 10)
		}
	}
	return append(b, '\n')
}

// appendMicros appends d in seconds with exactly six decimals (d rounded
// down to the microsecond), in integer arithmetic.
func appendMicros(b []byte, d time.Duration) []byte {
	u := uint64(d)
	if d < 0 {
		b = append(b, '-')
		u = -u
	}
	u /= 1e3
	b = strconv.AppendUint(b, u/1e6, 10)
	b = append(b, '.')
	var frac [6]byte
	for i, v := 5, u%1e6; i >= 0; i-- {
		frac[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, frac[:]...)
}

// appendFloat appends v with prec decimals; NaN and infinities (which
// JSON cannot hold) as 0.
func appendFloat(b []byte, v float64, prec int) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	return strconv.AppendFloat(b, v, 'f', prec, 64)
}

// appendMiB appends n bytes in MiB with one decimal and the unit.
func appendMiB(b []byte, n uint64) []byte {
	b = appendFloat(b, float64(n)/(1<<20), 1)
	return append(b, "MiB"...)
}

// appendNsOrDash appends a run time per packet with one decimal, or "-"
// when there is none.
func appendNsOrDash(b []byte, v float64, ok bool) []byte {
	if !ok {
		return append(b, '-')
	}
	return appendFloat(b, v, 1)
}

// JSON. Keys are fixed ASCII; the only strings with outside content are IP
// addresses, whose IPv6 zone is escaped.

func appendKey(b []byte, key string) []byte {
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendStr(b []byte, key, val string) []byte {
	b = appendKey(b, key)
	b = append(b, '"')
	b = append(b, val...)
	return append(b, '"')
}

func appendInt(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, key), v, 10)
}

func appendUint(b []byte, key string, v uint64) []byte {
	return strconv.AppendUint(appendKey(b, key), v, 10)
}

func appendBool(b []byte, key string, v bool) []byte {
	return strconv.AppendBool(appendKey(b, key), v)
}

const hexDigits = "0123456789abcdef"

// appendIP appends "key":"addr". Only a zone (interface name) can contain
// characters that need escaping; they are escaped in place.
func appendIP(b []byte, key string, e *events.Endpoint) []byte {
	b = appendKey(b, key)
	b = append(b, '"')
	start := len(b)
	b = e.IP.AppendTo(b)
	if e.IP.Zone() != "" {
		for i := start; i < len(b); i++ {
			if c := b[i]; c < 0x20 || c == '"' || c == '\\' {
				// Rare: re-encode the zone from here on.
				rest := string(b[i:])
				b = b[:i]
				for j := 0; j < len(rest); j++ {
					c := rest[j]
					switch {
					case c == '"' || c == '\\':
						b = append(b, '\\', c)
					case c < 0x20:
						b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
					default:
						b = append(b, c)
					}
				}
				break
			}
		}
	}
	return append(b, '"')
}

// appendCommonJSON appends the fields every json event starts with:
// timestamp, src_ip, src_port, dest_ip, dest_port, protocol. A flow whose
// addresses were dropped (--anonymize drop) has flow_id in place of src_ip
// and dest_ip.
func appendCommonJSON(b []byte, ts int64, f *events.Flow) []byte {
	b = append(b, '{')
	b = appendInt(b, "timestamp", ts)
	b = append(b, ',')
	if f.AddressesDropped() {
		b = appendUint(b, "flow_id", f.ID)
		b = append(b, ',')
		b = appendUint(b, "src_port", uint64(f.Src.Port))
		b = append(b, ',')
	} else {
		b = appendIP(b, "src_ip", &f.Src)
		b = append(b, ',')
		b = appendUint(b, "src_port", uint64(f.Src.Port))
		b = append(b, ',')
		b = appendIP(b, "dest_ip", &f.Dst)
		b = append(b, ',')
	}
	b = appendUint(b, "dest_port", uint64(f.Dst.Port))
	b = append(b, ',')
	return appendStr(b, "protocol", f.Proto.String())
}

// appendRTTJSON appends an RTT object: ePPing's fields in ePPing's order,
// then rttscope's own (smoothed_rtt, source, and for DNS samples
// dns_qtype, dns_rcode, dns_truncated and with --dns-names dns_name).
// Minimal output has no counters.
func appendRTTJSON(b []byte, e *events.RTT, st *style) []byte {
	b = appendCommonJSON(b, e.Time, &e.Flow)
	b = append(b, ',')
	b = appendInt(b, "rtt", int64(e.RTT))
	b = append(b, ',')
	b = appendInt(b, "min_rtt", int64(e.MinRTT))
	b = append(b, ',')
	if !st.minimal {
		b = appendUint(b, "sent_packets", e.SentPackets)
		b = append(b, ',')
		b = appendUint(b, "sent_bytes", e.SentBytes)
		b = append(b, ',')
		b = appendUint(b, "rec_packets", e.RecPackets)
		b = append(b, ',')
		b = appendUint(b, "rec_bytes", e.RecBytes)
		b = append(b, ',')
	}
	b = appendBool(b, "match_on_egress", e.MatchOnEgress)
	b = append(b, ',')
	b = appendInt(b, "smoothed_rtt", int64(e.SmoothedRTT))
	b = append(b, ',')
	b = appendStr(b, "source", e.Source.String())
	if e.Source == events.SourceDNS {
		b = append(b, ",\"dns_qtype\":\""...)
		b = e.DNS.AppendQType(b)
		b = append(b, "\",\"dns_rcode\":\""...)
		b = e.DNS.AppendRCode(b)
		b = append(b, "\","...)
		b = appendBool(b, "dns_truncated", e.DNS.Truncated)
		if e.DNS.Name != "" {
			// Presentation format: printable ASCII, whose only
			// character JSON escapes is the backslash of \DDD.
			b = append(b, ",\"dns_name\":\""...)
			for i := 0; i < len(e.DNS.Name); i++ {
				if c := e.DNS.Name[i]; c == '\\' || c == '"' {
					b = append(b, '\\', c)
				} else {
					b = append(b, c)
				}
			}
			b = append(b, '"')
		}
	}
	return append(b, '}')
}

func appendFlowJSON(b []byte, e *events.FlowEvent, _ *style) []byte {
	b = appendCommonJSON(b, e.Time, &e.Flow)
	b = append(b, ',')
	b = appendStr(b, "flow_event", e.Type.String())
	b = append(b, ',')
	b = appendStr(b, "reason", e.Reason.String())
	b = append(b, ',')
	b = appendStr(b, "triggered_by", e.Source.String())
	return append(b, '}')
}

func appendStatsJSON(b []byte, s *events.Stats) []byte {
	b = append(b, '{')
	b = appendInt(b, "timestamp", s.Time)
	b = append(b, ',')
	b = appendStr(b, "type", "stats")
	for i := range events.StatsCounters {
		c := &events.StatsCounters[i]
		b = append(b, ',')
		b = appendUint(b, c.Name, *c.Field(s))
	}
	if s.Variant != "" {
		b = append(b, ',')
		b = appendStr(b, "variant", s.Variant)
	}
	if p := s.Process; p != nil {
		b = append(b, ',')
		b = appendKey(b, "process")
		b = append(b, '{')
		b = appendKey(b, "cpu_user_s")
		b = appendMicros(b, p.CPUUser)
		b = append(b, ',')
		b = appendKey(b, "cpu_system_s")
		b = appendMicros(b, p.CPUSystem)
		b = append(b, ',')
		b = appendUint(b, "rss_bytes", p.RSS)
		b = append(b, ',')
		b = appendUint(b, "max_rss_bytes", p.MaxRSS)
		b = append(b, ',')
		b = appendKey(b, "cpu_share")
		b = appendFloat(b, p.CPUShare, 6)
		b = append(b, '}')
	}
	if bs := s.BPF; bs != nil {
		b = append(b, ',')
		b = appendBool(b, "bpf_stats_enabled", bs.Enabled)
		if bs.Enabled {
			b = append(b, ',')
			b = appendKey(b, "programs")
			b = append(b, '[')
			for i := range bs.Programs {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendProgramJSON(b, &bs.Programs[i])
			}
			b = append(b, ']')
		}
	}
	if sinks := s.SinkList(); len(sinks) > 0 {
		b = append(b, ',')
		b = appendKey(b, "sinks")
		b = append(b, '[')
		for i := range sinks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSinkJSON(b, &sinks[i])
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendSinkJSON appends one sink's counters (docs/sinks.md).
func appendSinkJSON(b []byte, k *events.SinkStats) []byte {
	b = append(b, '{')
	b = appendStr(b, "name", k.Name)
	b = append(b, ',')
	b = appendStr(b, "policy", k.Policy)
	for _, c := range sinkCounters(k) {
		b = append(b, ',')
		b = appendUint(b, c.name, c.v)
	}
	return append(b, '}')
}

// sinkCounter is a counter of a sink's stats, as named in json and on the
// standard line.
type sinkCounter struct {
	name string
	v    uint64
}

// sinkCounters lists k's counters in output order; the Kafka ones only
// for the Kafka sink.
func sinkCounters(k *events.SinkStats) []sinkCounter {
	c := []sinkCounter{{"records", k.Records}, {"queued", k.Queued}, {"dropped", k.Dropped}}
	if k.Name == "kafka" {
		c = append(c, sinkCounter{"produced", k.Produced}, sinkCounter{"acked", k.Acked}, sinkCounter{"spooled", k.Spooled})
	}
	return c
}

// appendProgramJSON appends one program's run time accounting; the per
// packet figures are left out when the program did not run.
func appendProgramJSON(b []byte, p *events.ProgramStats) []byte {
	b = append(b, '{')
	b = appendStr(b, "name", p.Name)
	b = append(b, ',')
	b = appendUint(b, "run_count", p.RunCount)
	b = append(b, ',')
	b = appendInt(b, "run_time_ns", int64(p.RunTime))
	if v, ok := p.NsPerPacket(); ok {
		b = append(b, ',')
		b = appendKey(b, "ns_per_packet")
		b = appendFloat(b, v, 1)
	}
	b = append(b, ',')
	b = appendUint(b, "interval_run_count", p.IntervalRunCount)
	b = append(b, ',')
	b = appendInt(b, "interval_run_time_ns", int64(p.IntervalRunTime))
	if v, ok := p.IntervalNsPerPacket(); ok {
		b = append(b, ',')
		b = appendKey(b, "interval_ns_per_packet")
		b = appendFloat(b, v, 1)
	}
	return append(b, '}')
}

// appendSourcesStandard appends " [tcp_ts=N tcp_seq=M]": the sources with
// samples among counts (indexed by events.Source); nothing without any.
func appendSourcesStandard(b []byte, counts *[events.NumSources]uint64) []byte {
	first := true
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if first {
			b = append(b, " ["...)
			first = false
		} else {
			b = append(b, ' ')
		}
		b = append(b, events.Source(i).String()...)
		b = append(b, '=')
		b = strconv.AppendUint(b, n, 10)
	}
	if !first {
		b = append(b, ']')
	}
	return b
}

// appendSourcesJSON appends "count_by_source":{"tcp_ts":N,...} with the
// sources that have samples.
func appendSourcesJSON(b []byte, counts *[events.NumSources]uint64) []byte {
	b = appendKey(b, "count_by_source")
	b = append(b, '{')
	first := true
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendUint(b, events.Source(i).String(), n)
	}
	return append(b, '}')
}

// appendAnonKeyLine appends the standard and ppviz formats' line for an
// anonymization key: "HH:MM:SS.nnnnnnnnn anonymization: scheme=pfx
// key_id=0a1b2c3d first|rotated".
func appendAnonKeyLine(b []byte, k *events.AnonKey, loc *time.Location) []byte {
	b = appendTimeOfDay(b, k.Time, loc)
	b = append(b, " anonymization: scheme="...)
	b = append(b, k.Scheme...)
	b = append(b, " key_id="...)
	b = append(b, k.KeyID...)
	b = append(b, ' ')
	b = append(b, anonKeyWhen(k)...)
	return append(b, '\n')
}

func anonKeyWhen(k *events.AnonKey) string {
	if k.Rotated {
		return "rotated"
	}
	return "first"
}

// appendAnonKeyJSON appends {"timestamp":T,"type":"anonymization",
// "scheme":S,"key_id":ID,"key":"first"|"rotated"}.
func appendAnonKeyJSON(b []byte, k *events.AnonKey) []byte {
	b = append(b, '{')
	b = appendInt(b, "timestamp", k.Time)
	b = append(b, ',')
	b = appendStr(b, "type", "anonymization")
	b = append(b, ',')
	b = appendStr(b, "scheme", k.Scheme)
	b = append(b, ',')
	b = appendStr(b, "key_id", k.KeyID)
	b = append(b, ',')
	b = appendStr(b, "key", anonKeyWhen(k))
	return append(b, '}')
}
