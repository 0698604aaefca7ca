package main

// Aggregated mode against ePPing's own aggregated output (agg.* in
// testdata/epping). ePPing's instances each ran their own 2 s timer; the
// replay lines its intervals up with the instance compared
// (--aggregate-offset) and uses ePPing's flags (-a 2, seconds).
//
// Known differences, checked below:
//   - A sample within the capture-versus-hook tolerance of a 4 ms bin
//     boundary can fall into the neighbouring bin: histogram counts may
//     move across a boundary, at most by the number of rttscope's samples
//     that lie that close to it (from a per-sample replay of the same
//     capture).
//   - mean_rtt, median_rtt and p95_rtt: ePPing estimates them from its
//     4 ms bins (bin middles: a 30 µs RTT has a mean of 2 ms), its
//     quantiles interpolated between ranks; rttscope gives the exact mean
//     and nearest-rank quantiles of its log-linear histogram (within
//     1.6%). Checked: the mean within half a bin of ePPing's, each
//     quantile within the bins of the two ranks ePPing interpolates.
//   - min_rtt, max_rtt: compared within the tolerance of epping_test.go.
//   - rttscope starts its intervals at the first packet and reports no
//     interval without packets; ePPing's first interval began before its
//     programs were attached: compared from ePPing's second interval on.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/testutil"
)

const (
	eppingAggInterval = 2 * int64(time.Second)
	eppingAggMAC      = "a2:40:fb:f6:b0:d9"
	eppingBinWidth    = 4_000_000
)

// aggRecord is a prefix or global record of ePPing's json (or rttscope's
// ePPing fields).
type aggRecord struct {
	Timestamp     int64                      `json:"timestamp"`
	Bins          int                        `json:"bins"`
	BinWidth      int64                      `json:"bin_width_ns"`
	Interval      int64                      `json:"aggregation_interval_ns"`
	Timeout       int64                      `json:"timeout_interval_ns"`
	V4Len         int                        `json:"ipv4_prefix_len"`
	V6Len         int                        `json:"ipv6_prefix_len"`
	Prefix        string                     `json:"ip_prefix"`
	RX            map[string]map[string]int  `json:"rx_stats"`
	TX            map[string]map[string]int  `json:"tx_stats"`
	Count         int                        `json:"count_rtt"`
	Min           int64                      `json:"min_rtt"`
	Mean          float64                    `json:"mean_rtt"`
	Median        float64                    `json:"median_rtt"`
	P95           float64                    `json:"p95_rtt"`
	Max           int64                      `json:"max_rtt"`
	Histogram     []int                      `json:"histogram"`
	Protocols     map[string]map[string]int  `json:"protocol_counters"`
	ECN           map[string]int             `json:"ecn_counters"`
	Errors        map[string]int             `json:"errors"`
	IntervalStart *int64                     `json:"interval_start"`
	Other         map[string]json.RawMessage `json:"-"`
}

func (r *aggRecord) global() bool { return r.Protocols != nil }

// gridEnd is the end of the interval a record reports: ePPing writes its
// records a few ms after its timer fired at the boundary.
func gridEnd(ts, offset int64) int64 {
	n := math.Round(float64(ts-offset) / float64(eppingAggInterval))
	return offset + int64(n)*eppingAggInterval
}

func TestEPPingAggregated(t *testing.T) {
	testutil.RequireRoot(t)
	withUTC(t)
	capture := filepath.Join(eppingDir, "agg.pcap.gz")
	var want []aggRecord
	if err := json.Unmarshal(readFixture(t, "agg.json"), &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 3 || want[0].Bins != 250 {
		t.Fatalf("ePPing's agg.json: want a metadata record and intervals, got %d records", len(want))
	}
	epMeta := want[0]
	want = want[1:]
	offset := want[0].Timestamp % eppingAggInterval
	first := gridEnd(want[0].Timestamp, offset) // ePPing's first interval: skipped
	args := []string{"-T", "-C", "-a", "2", "--local-mac", eppingAggMAC,
		"--aggregate-offset", time.Duration(offset).String()}
	out, err := runReplay(t, append(append([]string{"-F", "json"}, args...), capture)...)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	var got []aggRecord
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("rttscope's json: %v", err)
	}
	// The first record describes the aggregation: equal but for its time.
	meta := func(r aggRecord) string {
		return fmt.Sprint(r.Bins, r.BinWidth, r.Interval, r.Timeout, r.V4Len, r.V6Len)
	}
	if len(got) == 0 || meta(got[0]) != meta(epMeta) || got[0].Bins != 250 {
		t.Fatalf("rttscope's first record %+v, ePPing's %+v", got[0], epMeta)
	}
	got = got[1:]
	near := nearBoundaries(t)

	// Index rttscope's records by interval end (start + interval: its
	// last interval ends at the last packet) and prefix.
	type key struct {
		end    int64
		prefix string
	}
	gotBy := map[key]*aggRecord{}
	for i := range got {
		r := &got[i]
		if r.IntervalStart == nil {
			t.Fatalf("rttscope record without interval_start: %+v", r)
		}
		k := key{*r.IntervalStart + eppingAggInterval, r.Prefix}
		if gotBy[k] != nil {
			t.Fatalf("two rttscope records for %v", k)
		}
		gotBy[k] = r
	}
	compared := 0
	for i := range want {
		w := &want[i]
		end := gridEnd(w.Timestamp, offset)
		if end <= first {
			continue
		}
		k := key{end, w.Prefix}
		g := gotBy[k]
		delete(gotBy, k)
		name := fmt.Sprintf("interval ending %s, %s", time.Unix(0, end).UTC().Format("15:04:05.000"), w.Prefix)
		if w.global() {
			name = fmt.Sprintf("interval ending %s, global record", time.Unix(0, end).UTC().Format("15:04:05.000"))
		}
		if g == nil {
			t.Errorf("%s: not in rttscope's output", name)
			continue
		}
		compared++
		if w.global() {
			for _, f := range []struct {
				name string
				w, g any
			}{{"protocol_counters", w.Protocols, g.Protocols}, {"ecn_counters", w.ECN, g.ECN}, {"errors", w.Errors, g.Errors}} {
				if fmt.Sprint(f.w) != fmt.Sprint(f.g) {
					t.Errorf("%s: %s: ePPing %v, rttscope %v", name, f.name, f.w, f.g)
				}
			}
			continue
		}
		comparePrefix(t, name, w, g, near[nearKey{end, w.Prefix}])
	}
	for k, g := range gotBy {
		if k.end > first {
			t.Errorf("rttscope's record for the interval ending %d, %q (%+v): not in ePPing's output", k.end, k.prefix, g)
		}
	}
	if compared < 12 {
		t.Errorf("only %d records compared", compared)
	}
	t.Logf("%d aggregated records compared", compared)
}

// comparePrefix compares one prefix's record of one interval. amb[k] is
// the number of samples within the tolerance of boundary k (between bins
// k-1 and k).
func comparePrefix(t *testing.T, name string, w, g *aggRecord, amb map[int]int) {
	t.Helper()
	if fmt.Sprint(w.RX) != fmt.Sprint(g.RX) || fmt.Sprint(w.TX) != fmt.Sprint(g.TX) {
		t.Errorf("%s: rx_stats/tx_stats: ePPing %v %v, rttscope %v %v", name, w.RX, w.TX, g.RX, g.TX)
	}
	if w.Count != g.Count {
		t.Errorf("%s: count_rtt: ePPing %d, rttscope %d", name, w.Count, g.Count)
		return
	}
	if w.Count == 0 {
		return
	}
	if absDiff(w.Min, g.Min) > eppingRTTTolNS || absDiff(w.Max, g.Max) > eppingRTTTolNS {
		t.Errorf("%s: min/max: ePPing %d/%d, rttscope %d/%d", name, w.Min, w.Max, g.Min, g.Max)
	}
	// ePPing's mean puts every sample in its bin's middle: the exact mean
	// is within half a bin of it.
	if math.Abs(w.Mean-g.Mean) > eppingBinWidth/2+eppingRTTTolNS {
		t.Errorf("%s: mean_rtt: ePPing's estimate %g, rttscope %g: more than half a bin apart", name, w.Mean, g.Mean)
	}
	// ePPing's quantiles interpolate between the samples of rank
	// floor(p(n-1)) and the next (numpy's default); rttscope's take the
	// sample of rank ceil(pn): it must lie in the bins of those two.
	for _, f := range []struct {
		name string
		p    float64
		g    float64
	}{{"median_rtt", 0.5, g.Median}, {"p95_rtt", 0.95, g.P95}} {
		r := int(f.p * float64(w.Count-1))
		lo := float64(rankBin(w.Histogram, r)) * eppingBinWidth
		hi := float64(rankBin(w.Histogram, min(r+1, w.Count-1))+1) * eppingBinWidth
		if f.g < lo-eppingRTTTolNS || f.g > hi+eppingRTTTolNS {
			t.Errorf("%s: %s: rttscope %g, outside ePPing's bins of ranks %d and %d [%g, %g] (ePPing's estimate %g)",
				name, f.name, f.g, r, r+1, lo, hi, map[string]float64{"median_rtt": w.Median, "p95_rtt": w.P95}[f.name])
		}
	}
	// Histograms: the same total; what moved across boundary k (the
	// difference of the counts below it) at most amb[k].
	n := max(len(w.Histogram), len(g.Histogram))
	var carry, total int
	for b := range n {
		var wb, gb int
		if b < len(w.Histogram) {
			wb = w.Histogram[b]
		}
		if b < len(g.Histogram) {
			gb = g.Histogram[b]
		}
		total += gb
		if abs(carry) > amb[b] {
			t.Errorf("%s: histogram: ePPing %v, rttscope %v: %d samples across the %d ms boundary, %d near it",
				name, w.Histogram, g.Histogram, carry, b*4, amb[b])
			return
		}
		carry += wb - gb
	}
	if carry != 0 || total != g.Count {
		t.Errorf("%s: histogram: ePPing %v, rttscope %v (count %d)", name, w.Histogram, g.Histogram, g.Count)
	}
}

// rankBin is the bin holding the sample of rank r (from 0) of hist.
func rankBin(hist []int, r int) int {
	for b, n := range hist {
		if r < n {
			return b
		}
		r -= n
	}
	return len(hist) - 1
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

type nearKey struct {
	end    int64
	prefix string
}

// nearBoundaries replays agg.pcap.gz per sample and counts, per interval
// end (ePPing's first instance's grid) and prefix of the reply's source,
// the samples within the RTT tolerance of each 4 ms boundary.
func nearBoundaries(t *testing.T) map[nearKey]map[int]int {
	t.Helper()
	var recs []aggRecord
	if err := json.Unmarshal(readFixture(t, "agg.json"), &recs); err != nil {
		t.Fatal(err)
	}
	offset := recs[1].Timestamp % eppingAggInterval
	out, err := runReplay(t, "-T", "-C", "-F", "json", "--local-mac", eppingAggMAC, filepath.Join(eppingDir, "agg.pcap.gz"))
	if err != nil {
		t.Fatal(err)
	}
	samples, _, err := parseJSONEvents(out, false)
	if err != nil {
		t.Fatal(err)
	}
	near := map[nearKey]map[int]int{}
	for _, s := range samples {
		if !s.rtt {
			continue
		}
		src := s.flow[:strings.IndexByte(s.flow, '+')]
		addr, err := netip.ParseAddr(src[:strings.LastIndexByte(src, ':')])
		if err != nil {
			t.Fatal(err)
		}
		bits := 24
		if addr.Is6() {
			bits = 48
		}
		p, _ := addr.Prefix(bits)
		end := s.time - (s.time-offset)%eppingAggInterval + eppingAggInterval
		k := nearKey{end, p.String()}
		for b := 1; b < 250; b++ {
			if absDiff(s.rttNS, int64(b)*eppingBinWidth) <= eppingRTTTolNS {
				if near[k] == nil {
					near[k] = map[int]int{}
				}
				near[k][b]++
			}
		}
	}
	return near
}

var (
	// HH:MM:SS.nnnnnnnnn: PREFIX -> rxpkts=N, rxbytes=N, txpkts=N, txbytes=N[, rtt-count=N, min=X ms, mean=X ms, median=X ms, p95=X ms, max=X ms]
	epAggStd = regexp.MustCompile(`^(\d\d:\d\d:\d\d\.\d{9}): (\S+) -> rxpkts=(\d+), rxbytes=(\d+), txpkts=(\d+), txbytes=(\d+)(?:, rtt-count=(\d+), min=(\S+) ms, mean=(\S+) ms, median=(\S+) ms, p95=(\S+) ms, max=(\S+) ms)?(.*)$`)
	// HH:MM:SS.nnnnnnnnn: NAME=(pkts=N, bytes=N), ...[, ECN=(...)][, errors=(...)]
	epGlobalStd = regexp.MustCompile(`^(\d\d:\d\d:\d\d\.\d{9}): ((?:[A-Za-z0-9-]+=\((?:pkts=\d+(?:, bytes=\d+)?|[A-Za-z0-9-]+=\d+(?:, [A-Za-z0-9-]+=\d+)*)\)(?:, )?)+|pkts=0, bytes=0(?:, .*)?)$`)
)

// stdAgg is one parsed aggregated standard line: the fields that must be
// equal as text, and the RTTs.
type stdAgg struct {
	clock   int64
	key     string // prefix, or "global"
	fields  string // rx/tx counters, rtt-count; or the global line's body
	min     int64
	max     int64
	extra   string
	hasRTTs bool
}

func parseAggStandard(b []byte) ([]stdAgg, error) {
	var out []stdAgg
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if n == 1 && strings.HasPrefix(l, "Aggregating RTTs") {
			out = append(out, stdAgg{key: "meta", fields: l})
			continue
		}
		if m := epAggStd.FindStringSubmatch(l); m != nil {
			c, err := parseClock(m[1])
			if err != nil {
				return nil, err
			}
			r := stdAgg{clock: c, key: m[2], fields: fmt.Sprintf("rx %s/%s tx %s/%s n %s", m[3], m[4], m[5], m[6], m[7]), extra: m[13]}
			if m[7] != "" {
				mn, err1 := strconv.ParseFloat(m[8], 64)
				mx, err2 := strconv.ParseFloat(m[12], 64)
				if err1 != nil || err2 != nil {
					return nil, fmt.Errorf("line %d: %q", n, l)
				}
				r.min, r.max, r.hasRTTs = int64(mn*1e6), int64(mx*1e6), true
			}
			out = append(out, r)
			continue
		}
		if m := epGlobalStd.FindStringSubmatch(l); m != nil {
			c, err := parseClock(m[1])
			if err != nil {
				return nil, err
			}
			out = append(out, stdAgg{clock: c, key: "global", fields: m[2]})
			continue
		}
		return nil, fmt.Errorf("line %d is not an ePPing aggregated line: %q", n, l)
	}
	return out, sc.Err()
}

// TestEPPingAggregatedStandard compares the standard format of aggregated
// mode: ePPing's lines and rttscope's have the same layout (rttscope adds
// ", p90=X ms, p99=X ms [tcp_ts=N icmp=N]" at the end), equal counters and equal global
// lines.
func TestEPPingAggregatedStandard(t *testing.T) {
	testutil.RequireRoot(t)
	withUTC(t)
	want, err := parseAggStandard(readFixture(t, "agg.standard"))
	if err != nil {
		t.Fatalf("ePPing's agg.standard: %v", err)
	}
	if len(want) < 2 || want[0].key != "meta" {
		t.Fatalf("ePPing's agg.standard does not start with its metadata line")
	}
	wantMeta := want[0].fields
	want = want[1:]
	day := int64(24 * time.Hour)
	// Times of day: the recording's date is the capture's.
	base := int64(1795511219000000000) - int64(1795511219000000000)%day
	offset := (base + want[0].clock) % eppingAggInterval
	first := gridEnd(base+want[0].clock, offset)
	out, err := runReplay(t, "-T", "-C", "-a", "2", "--local-mac", eppingAggMAC, "--aggregate-offset",
		time.Duration(offset).String(), "-F", "standard", filepath.Join(eppingDir, "agg.pcap.gz"))
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	got, err := parseAggStandard(out)
	if err != nil {
		t.Fatalf("rttscope's standard: %v\n%s", err, out)
	}
	if len(got) == 0 || got[0].fields != wantMeta {
		t.Fatalf("rttscope's first line %+v, want ePPing's %q", got, wantMeta)
	}
	got = got[1:]
	type key struct {
		end int64
		key string
	}
	gotBy := map[key]stdAgg{}
	for _, g := range got {
		// rttscope's times are the interval ends, the last one's its
		// last packet: the grid point at or after it.
		t := base + g.clock
		end := t + (eppingAggInterval-(t-offset)%eppingAggInterval)%eppingAggInterval
		gotBy[key{end, g.key}] = g
	}
	compared := 0
	for _, w := range want {
		end := gridEnd(base+w.clock, offset)
		if end <= first {
			continue
		}
		g, ok := gotBy[key{end, w.key}]
		if !ok {
			t.Errorf("ePPing's %s line of the interval ending %d: not in rttscope's output", w.key, end)
			continue
		}
		compared++
		if w.fields != g.fields {
			t.Errorf("%s, interval ending %d: ePPing %q, rttscope %q", w.key, end, w.fields, g.fields)
		}
		if w.hasRTTs && (absDiff(w.min, g.min) > eppingRTTTolNS || absDiff(w.max, g.max) > eppingRTTTolNS) {
			t.Errorf("%s, interval ending %d: min/max ePPing %d/%d, rttscope %d/%d", w.key, end, w.min, w.max, g.min, g.max)
		}
		if w.hasRTTs && !regexp.MustCompile(`^, p90=\S+ ms, p99=\S+ ms \[(tcp_ts|icmp)=\d+( icmp=\d+)?\]$`).MatchString(g.extra) {
			t.Errorf("%s: rttscope's additions %q: want , p90=X ms, p99=X ms [tcp_ts=N icmp=N]", w.key, g.extra)
		}
	}
	if compared < 12 {
		t.Errorf("only %d lines compared", compared)
	}
	t.Logf("%d aggregated lines compared", compared)
}
