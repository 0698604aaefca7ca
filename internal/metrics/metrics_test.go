package metrics

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/hist"
)

// aggregate is a record of prefix p whose samples are the given RTTs,
// binned as the kernel does (internal/hist).
func aggregate(p string, rtts ...time.Duration) *events.Aggregate {
	a := &events.Aggregate{Prefix: netip.MustParsePrefix(p), Count: uint64(len(rtts))}
	// The first sample from sequence numbers, the others timestamps.
	if len(rtts) > 0 {
		a.BySource[events.SourceTCPSeq] = 1
		a.BySource[events.SourceTCPTS] = uint64(len(rtts) - 1)
	}
	a.RX.Packets[events.ClassTCP] = uint64(10 * len(rtts))
	a.TX.Bytes[events.ClassUDP] = 1500
	a.RX.ECN[3] = 2
	bins := map[int]uint64{}
	for _, r := range rtts {
		bins[hist.Bin(uint64(r))]++
		a.Sum += r
	}
	for _, b := range slices.Sorted(func(yield func(int) bool) {
		for b := range bins {
			if !yield(b) {
				return
			}
		}
	}) {
		up := hist.Upper(b)
		if b == hist.Overflow {
			up = 0
		}
		a.Histogram = append(a.Histogram, events.HistBin{Lower: hist.Lower(b), Upper: up, Count: bins[b]})
	}
	return a
}

// scrape gets /metrics in the protobuf format (classic and native
// buckets) and in the text format.
func scrape(t *testing.T, s *Sink) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	url := "http://" + s.Addr().String() + "/metrics"
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	fams := map[string]*dto.MetricFamily{}
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		fams[f.GetName()] = &f
	}
	tresp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tresp.Body.Close() }()
	text, _ := io.ReadAll(tresp.Body)
	return fams, string(text)
}

// series returns the metric of family name with label prefix=p.
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no %s", name)
	}
next:
	for _, m := range f.Metric {
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		return m
	}
	t.Fatalf("no %s%v", name, labels)
	return nil
}

// nativeBuckets expands a native histogram's spans and deltas to
// index -> count.
func nativeBuckets(h *dto.Histogram) map[int]int64 {
	out := map[int]int64{}
	idx, k := 0, 0
	var count int64
	for _, sp := range h.PositiveSpan {
		idx += int(sp.GetOffset())
		for range sp.GetLength() {
			count += h.PositiveDelta[k]
			out[idx] = count
			idx++
			k++
		}
	}
	return out
}

// TestMetricsHistogramsAndOverflow feeds aggregated records of three
// prefixes to a sink allowed two and checks what /metrics serves: counts
// and sums equal the records', each kernel bin in the classic and the
// native bucket that holds its midpoint, the third prefix in the
// overflow series, traffic counters summed over records.
func TestMetricsHistogramsAndOverflow(t *testing.T) {
	s, err := New(Options{Addr: "127.0.0.1:0", MaxPrefixes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ms := time.Millisecond
	recs := []*events.Aggregate{
		aggregate("10.1.0.0/24", 3*ms, 3*ms, 12*ms, 700*time.Microsecond),
		aggregate("2001:db8::/48", 40*ms),
		aggregate("10.1.0.0/24", 3*ms, 90*time.Second, 5*time.Microsecond),
		aggregate("192.0.2.0/24", 20*ms, 21*ms),
	}
	for _, a := range recs {
		if err := s.WriteAggregate(a); err != nil {
			t.Fatal(err)
		}
	}
	fams, text := scrape(t, s)
	for _, tc := range []struct {
		label string
		recs  []*events.Aggregate
	}{
		{"10.1.0.0/24", []*events.Aggregate{recs[0], recs[2]}},
		{"2001:db8::/48", recs[1:2]},
		{OverflowPrefix, recs[3:4]},
	} {
		h := series(t, fams, "rttscope_rtt_seconds", "prefix", tc.label).GetHistogram()
		var count uint64
		var sum time.Duration
		classic := make([]uint64, len(DefaultBuckets))
		native := map[int]int64{}
		for _, a := range tc.recs {
			count += a.Count
			sum += a.Sum
			for _, b := range a.Histogram {
				mid := (float64(b.Lower) + float64(b.Upper)) / 2e9
				if b.Upper == 0 {
					mid = float64(b.Lower) / 1e9
				}
				for i, ub := range DefaultBuckets {
					if mid <= ub {
						classic[i] += b.Count
					}
				}
				// The bucket (2^((i-1)/16), 2^(i/16)] holding mid.
				i := int(math.Ceil(math.Log2(mid) * 16))
				if lo, up := math.Pow(2, float64(i-1)/16), math.Pow(2, float64(i)/16); mid <= lo || mid > up {
					t.Fatalf("bucket %d (%g, %g] does not hold %g", i, lo, up, mid)
				}
				native[i] += int64(b.Count)
			}
		}
		if h.GetSampleCount() != count || math.Abs(h.GetSampleSum()-sum.Seconds()) > 1e-12 {
			t.Errorf("%s: count %d sum %g, want %d %g", tc.label, h.GetSampleCount(), h.GetSampleSum(), count, sum.Seconds())
		}
		for i, b := range h.Bucket {
			if b.GetUpperBound() != DefaultBuckets[i] || b.GetCumulativeCount() != classic[i] {
				t.Errorf("%s: classic bucket le=%g has %d, want le=%g %d", tc.label, b.GetUpperBound(), b.GetCumulativeCount(), DefaultBuckets[i], classic[i])
			}
		}
		if got := nativeBuckets(h); fmt.Sprint(got) != fmt.Sprint(native) || h.GetSchema() != NativeSchema {
			t.Errorf("%s: native buckets (schema %d) %v, want %v", tc.label, h.GetSchema(), got, native)
		}
	}
	if v := series(t, fams, "rttscope_metrics_overflow_records_total").GetCounter().GetValue(); v != 1 {
		t.Errorf("overflow records %g, want 1", v)
	}
	if v := series(t, fams, "rttscope_metrics_prefixes").GetGauge().GetValue(); v != 2 {
		t.Errorf("prefixes %g, want 2", v)
	}
	if v := series(t, fams, "rttscope_prefix_packets_total", "prefix", "10.1.0.0/24", "direction", "rx", "protocol", "tcp").GetCounter().GetValue(); v != 70 {
		t.Errorf("rx tcp packets %g, want 70", v)
	}
	if v := series(t, fams, "rttscope_prefix_ecn_packets_total", "prefix", "10.1.0.0/24", "direction", "rx", "ecn", "ce").GetCounter().GetValue(); v != 4 {
		t.Errorf("rx CE packets %g, want 4", v)
	}
	for src, want := range map[string]float64{"tcp_seq": 2, "tcp_ts": 5} {
		if v := series(t, fams, "rttscope_prefix_samples_total", "prefix", "10.1.0.0/24", "source", src).GetCounter().GetValue(); v != want {
			t.Errorf("%s samples %g, want %g", src, v, want)
		}
	}
	if strings.Contains(text, `source="dns"`) {
		t.Error("a series of a source without samples")
	}
	// The text format (what a server without native histograms reads)
	// has the classic buckets.
	if want := `rttscope_rtt_seconds_bucket{prefix="10.1.0.0/24",le="0.005"} 5`; !strings.Contains(text, want) {
		t.Errorf("text exposition lacks %s:\n%s", want, text)
	}
}

// TestMetricsSelfTelemetry: the last stats record's counters, process,
// BPF and sink figures are served under their Prometheus names.
func TestMetricsSelfTelemetry(t *testing.T) {
	s, err := New(Options{Addr: "127.0.0.1:0", MaxPrefixes: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	st := &events.Stats{Packets: 1234, RingbufFull: 5, FlowMapFull: 6, FlowsEvicted: 7, Flows: 8,
		Process: &events.ProcessStats{CPUUser: 1500 * time.Millisecond, RSS: 40 << 20},
		BPF:     &events.BPFStats{Enabled: true, Programs: []events.ProgramStats{{Name: "tc_ingress", RunCount: 10, RunTime: 2 * time.Microsecond, IntervalRunCount: 4, IntervalRunTime: 800 * time.Nanosecond}}},
		Sinks:   &events.SinkReport{List: []events.SinkStats{{Name: "kafka", Policy: "spool", Records: 100, Dropped: 3, Produced: 97, Acked: 90, Spooled: 20}}}}
	if err := s.WriteStats(st); err != nil {
		t.Fatal(err)
	}
	st.Packets = 0 // the sink keeps a copy
	fams, _ := scrape(t, s)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"rttscope_packets_total", nil, 1234},
		{"rttscope_ringbuf_full_total", nil, 5},
		{"rttscope_flow_map_full_total", nil, 6},
		{"rttscope_flows_evicted_total", nil, 7},
		{"rttscope_flows", nil, 8},
		{"rttscope_process_cpu_seconds_total", []string{"mode", "user"}, 1.5},
		{"rttscope_process_resident_memory_bytes", nil, 40 << 20},
		{"rttscope_bpf_runs_total", []string{"program", "tc_ingress"}, 10},
		{"rttscope_bpf_ns_per_packet", []string{"program", "tc_ingress"}, 200},
		{"rttscope_sink_dropped_total", []string{"sink", "kafka"}, 3},
		{"rttscope_kafka_acked_total", nil, 90},
		{"rttscope_kafka_spooled_total", nil, 20},
	} {
		m := series(t, fams, c.name, c.labels...)
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
		if v != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, v, c.want)
		}
	}
}

// TestMetricsAddressTaken: a taken port is an error at start.
func TestMetricsAddressTaken(t *testing.T) {
	s, err := New(Options{Addr: "127.0.0.1:0", MaxPrefixes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := New(Options{Addr: s.Addr().String(), MaxPrefixes: 1}); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Fatalf("second sink on %s: %v", s.Addr(), err)
	}
}
