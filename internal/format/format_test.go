package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rttscope/rttscope/internal/events"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// t0 is 2023-11-14 22:13:20.123456789 UTC.
const t0 = int64(1700000000_123456789)

func ep(addr string, port uint16) events.Endpoint {
	return events.Endpoint{IP: netip.MustParseAddr(addr), Port: port}
}

// fixture is the fixed event sequence behind the golden files.
func fixture() []any {
	tcp4 := events.Flow{Src: ep("10.0.0.1", 40000), Dst: ep("10.0.0.2", 443), Proto: events.ProtoTCP}
	icmp6 := events.Flow{Src: ep("2001:db8::2", 4660), Dst: ep("2001:db8::1", 4660), Proto: events.ProtoICMPv6}
	icmp4 := events.Flow{Src: ep("192.0.2.1", 7), Dst: ep("192.168.1.10", 7), Proto: events.ProtoICMP}
	dns4 := events.Flow{Src: ep("192.0.2.53", 53), Dst: ep("10.0.0.1", 40053), Proto: events.ProtoUDP}
	return []any{
		// Flow opening on the SYN from the client.
		&events.FlowEvent{Time: t0, Flow: tcp4, Type: events.FlowOpening, Reason: events.ReasonSYN, Source: events.SourceSrc},
		// IPv4 TCP RTT, matched on ingress: 40 ms prints as "40".
		&events.RTT{Time: t0 + 40_000_000, Flow: tcp4.Reverse(), RTT: 40 * time.Millisecond, MinRTT: 40 * time.Millisecond,
			SmoothedRTT: 40 * time.Millisecond, SentPackets: 1, SentBytes: 74, RecPackets: 1, RecBytes: 74},
		// IPv6 ICMPv6 echo RTT, matched on egress.
		&events.RTT{Time: t0 + 1_000_000_001, Flow: icmp6, RTT: 12_345_678, MinRTT: 10 * time.Millisecond,
			SmoothedRTT: 11_234_567, SentPackets: 3, SentBytes: 312, RecPackets: 3, RecBytes: 312, MatchOnEgress: true,
			Source: events.SourceICMP},
		// A large RTT (1234.567890123 s): exponent form in standard.
		&events.RTT{Time: t0 + 2_000_000_000, Flow: tcp4.Reverse(), RTT: 1_234_567_890_123, MinRTT: 40 * time.Millisecond,
			SmoothedRTT: 154_356_000_000, SentPackets: 9, SentBytes: 1_000_000, RecPackets: 7, RecBytes: 9_000},
		// Sub-microsecond RTT and a 1 ns minimum.
		&events.RTT{Time: t0 + 2_000_000_500, Flow: icmp4, RTT: 500, MinRTT: 1, SmoothedRTT: 999,
			SentPackets: 2, SentBytes: 168, RecPackets: 2, RecBytes: 168, MatchOnEgress: true, Source: events.SourceICMP},
		// A TCP sample from sequence numbers: tagged in standard.
		&events.RTT{Time: t0 + 2_500_000_000, Flow: tcp4, RTT: 21_000_000, MinRTT: 20 * time.Millisecond,
			SmoothedRTT: 20_125_000, SentPackets: 5, SentBytes: 7000, RecPackets: 4, RecBytes: 220,
			Source: events.SourceTCPSeq},
		// Stats record with self-telemetry, BPF run time statistics on;
		// tc_ingress did not run in the interval.
		&events.Stats{Time: t0 + 3_000_000_000, Packets: 123456, RTTEvents: 4, FlowEvents: 3, FlowMapFull: 1,
			TimestampMapFull: 2, RingbufFull: 0, FlowsTimedOut: 1, TimestampsExpired: 17, Flows: 2, Timestamps: 5,
			FlowsCreated: 3, FlowsDeleted: 1, TimestampsCreated: 24, TimestampsDeleted: 19, SummariesSent: 1,
			Samples: [events.NumSources]uint64{3, 2, 1, 0, 1}, TCPSeqRetransmissions: 2, TCPSeqAmbiguous: 1,
			DNSDuplicateQueries: 1, DNSUnmatchedResponses: 4, QUICSpinRejected: 5, QUICSpinRandom: 2,
			Process: &events.ProcessStats{CPUUser: 123_456_789, CPUSystem: 2*time.Second + 5*time.Microsecond,
				RSS: 24_535_040, MaxRSS: 26_214_400, CPUShare: 0.0123456789},
			BPF: &events.BPFStats{Enabled: true, Programs: []events.ProgramStats{
				{Name: "tc_egress", RunCount: 61728, RunTime: 12_962_880, IntervalRunCount: 1000, IntervalRunTime: 205_100},
				{Name: "tc_ingress", RunCount: 61728, RunTime: 15_123_361},
			}}},
		// Closing on the FIN from the server (dest of the opening direction).
		&events.FlowEvent{Time: t0 + 4_000_000_000, Flow: tcp4, Type: events.FlowClosing, Reason: events.ReasonFIN},
		// ICMPv6 flow: first observed packet, then timeout.
		&events.FlowEvent{Time: t0 + 5_000_000_000, Flow: icmp6.Reverse(), Type: events.FlowOpening,
			Reason: events.ReasonFirstObserved, Source: events.SourceSrc},
		&events.FlowEvent{Time: t0 + 65_000_000_000, Flow: icmp6.Reverse(), Type: events.FlowClosing,
			Reason: events.ReasonTimeout, Source: events.SourceGC},
		// Aggregated mode: a prefix with samples (one in the overflow
		// bin) and one with traffic only.
		&events.Aggregate{Time: t0 + 70_000_000_000, Start: t0 + 60_000_000_000,
			Prefix: netip.MustParsePrefix("10.0.0.0/24"),
			RX: events.Traffic{Packets: [4]uint64{10, 1, 2, 0}, Bytes: [4]uint64{15000, 80, 168, 0}, ECN: [4]uint64{11, 0, 1, 1},
				EPPPackets: [3]uint64{8, 2, 3}, EPPBytes: [3]uint64{14832, 308, 290}},
			TX: events.Traffic{Packets: [4]uint64{9, 0, 0, 1}, Bytes: [4]uint64{600, 0, 0, 40}, ECN: [4]uint64{10, 0, 0, 0},
				EPPPackets: [3]uint64{9, 0, 1}, EPPBytes: [3]uint64{726, 0, 54}},
			LinHist: append([]uint32{3}, append(make([]uint32, 248), 1)...),
			Count:   4, Min: 1_000_000, Mean: 17_250_500_000, P50: 1_015_808, P90: 69_000_000_000, P95: 69_000_000_000,
			P99: 69_000_000_000, Max: 69_000_000_000,
			Histogram: []events.HistBin{{Lower: 983_040, Upper: 1_015_808, Count: 1}, {Lower: 1_015_808, Upper: 1_048_576, Count: 2},
				{Lower: 68_719_476_736, Count: 1}},
			BySource: [events.NumSources]uint64{events.SourceTCPTS: 3, events.SourceTCPSeq: 1}},
		// Per-flow summaries: at close, and periodic without samples.
		&events.FlowSummary{Time: t0 + 4_000_000_000, Start: t0, Flow: tcp4, Reason: events.ReasonFIN,
			Src: events.FlowDirSummary{Packets: 10, Bytes: 15000, Count: 3, Min: 40_000_000, Mean: 41_000_000,
				Max: 43_000_000, P50: 40_370_176, P99: 42_991_616, BySource: [events.NumSources]uint64{events.SourceTCPSeq: 2, events.SourceTCPSYN: 1}},
			Dst: events.FlowDirSummary{Packets: 8, Bytes: 600}},
		&events.FlowSummary{Time: t0 + 2_000_000_000, Start: t0 + 1_000_000_000, Flow: icmp6, Src: events.FlowDirSummary{Packets: 1, Bytes: 104}},
		&events.Aggregate{Time: t0 + 70_000_000_000, Start: t0 + 60_000_000_000,
			Prefix: netip.MustParsePrefix("2001:db8::/48"),
			RX: events.Traffic{Packets: [4]uint64{0, 0, 3, 0}, Bytes: [4]uint64{0, 0, 312, 0}, ECN: [4]uint64{3, 0, 0, 0},
				EPPPackets: [3]uint64{0, 0, 3}, EPPBytes: [3]uint64{0, 0, 354}}},
		// ePPing's first record of an aggregated run, and its global
		// record of the interval.
		&events.Aggregate{Time: t0 + 60_000_000_000, Meta: &events.AggregateMeta{Interval: 10 * time.Second, Timeout: 30 * time.Second, PrefixV4: 24, PrefixV6: 48}},
		&events.Aggregate{Time: t0 + 70_000_000_000, Start: t0 + 60_000_000_000, Global: &events.GlobalCounters{
			ProtoPackets: func() (p [256]uint64) { p[6], p[17], p[1], p[58], p[47] = 19, 1, 2, 3, 1; return }(),
			ProtoBytes:   func() (p [256]uint64) { p[6], p[17], p[1], p[58], p[47] = 15866, 94, 196, 354, 54; return }(),
			NonIPPackets: 2, NonIPBytes: 84, ECN: [4]uint64{24, 0, 1, 1}, FlowCreate: 1}},
		// DNS samples: an AAAA answered with NXDOMAIN, a truncated
		// answer of a type without a mnemonic and an unknown rcode.
		&events.RTT{Time: t0 + 71_000_000_000, Flow: dns4, RTT: 12_300_000, MinRTT: 12_300_000, SmoothedRTT: 12_300_000,
			SentPackets: 1, SentBytes: 43, RecPackets: 1, RecBytes: 104, Source: events.SourceDNS,
			DNS: events.DNSInfo{QType: 28, RCode: 3}},
		&events.RTT{Time: t0 + 72_000_000_000, Flow: dns4, RTT: 9_000_000, MinRTT: 9_000_000, SmoothedRTT: 11_887_500,
			SentPackets: 2, SentBytes: 86, RecPackets: 2, RecBytes: 1544, Source: events.SourceDNS,
			DNS: events.DNSInfo{QType: 99, RCode: 11, Truncated: true, Name: `big\032txt.example.`}},
		// Stats at exit with BPF run time statistics off.
		&events.Stats{Time: t0 + 75_000_000_000, Packets: 123500, RTTEvents: 4, FlowEvents: 4,
			FlowsCreated: 2, FlowsDeleted: 2, TimestampsCreated: 4, TimestampsDeleted: 4,
			Process: &events.ProcessStats{CPUUser: 130_000_000, CPUSystem: 2_100_000_000, RSS: 24_600_000, MaxRSS: 26_214_400},
			BPF:     &events.BPFStats{}},
	}
}

func writeAll(t testing.TB, w Writer, evs []any) {
	t.Helper()
	for _, ev := range evs {
		var err error
		switch e := ev.(type) {
		case *events.RTT:
			err = w.WriteRTT(e)
		case *events.FlowEvent:
			err = w.WriteFlow(e)
		case *events.Stats:
			err = w.WriteStats(e)
		case *events.Aggregate:
			err = w.WriteAggregate(e)
		case *events.FlowSummary:
			err = w.WriteFlowSummary(e)
		case *events.PDM:
			err = w.WritePDM(e)
		case *events.PDMInterval:
			err = w.WritePDMInterval(e)
		default:
			t.Fatalf("unexpected fixture type %T", ev)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// render writes evs in the named format, returning the main stream and
// what went to Options.StatsTo.
func render(t testing.TB, name string, evs []any) (out, stats []byte) {
	t.Helper()
	var o, s bytes.Buffer
	w, err := New(name, &o, Options{Location: time.UTC, StatsTo: &s})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, evs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return o.Bytes(), s.Bytes()
}

func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s mismatch (run go test -update if intended)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestGolden(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			out, stats := render(t, name, fixture())
			checkGolden(t, name+".golden", out)
			switch name {
			case "standard", "ppviz":
				checkGolden(t, name+".stats.golden", stats)
			default:
				if len(stats) != 0 {
					t.Errorf("%s wrote to StatsTo: %q", name, stats)
				}
			}
		})
	}
}

func TestNew(t *testing.T) {
	want := []string{"standard", "ppviz", "json", "jsonl"}
	if got := Names(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	Names()[0] = "mutated"
	if Names()[0] != "standard" {
		t.Error("Names returns a shared slice")
	}
	_, err := New("csv", io.Discard, Options{})
	if err == nil {
		t.Fatal("New(csv) succeeded")
	}
	for _, n := range want {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list %q", err, n)
		}
	}
	if _, err := New("json", nil, Options{}); err == nil {
		t.Error("New with nil writer succeeded")
	}
}

// eventsOnlyWriter has the EventWriter methods and nothing else.
type eventsOnlyWriter struct{ rtts int }

func (e *eventsOnlyWriter) WriteRTT(*events.RTT) error        { e.rtts++; return nil }
func (e *eventsOnlyWriter) WriteFlow(*events.FlowEvent) error { return nil }
func (e *eventsOnlyWriter) WriteStats(*events.Stats) error    { return nil }
func (e *eventsOnlyWriter) Flush() error                      { return nil }
func (e *eventsOnlyWriter) Close() error                      { return nil }

// TestCapabilities: writers from New state every capability; Extend
// completes a bare EventWriter to a Writer that states none, refuses the
// optional records, and restarts by only reopening; Require names what is
// missing.
func TestCapabilities(t *testing.T) {
	for _, name := range Names() {
		w, err := New(name, io.Discard, Options{StatsTo: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Capabilities(); got != All {
			t.Errorf("%s: capabilities %v, want all", name, got)
		}
		if Extend(w) != w {
			t.Errorf("%s: Extend did not return the writer itself", name)
		}
		if err := Require(w, All); err != nil {
			t.Errorf("%s: Require(All) = %v", name, err)
		}
	}

	bare := &eventsOnlyWriter{}
	w := Extend(bare)
	if w.Capabilities() != 0 {
		t.Errorf("extended bare writer states %v", w.Capabilities())
	}
	if err := w.WriteRTT(fixture()[1].(*events.RTT)); err != nil || bare.rtts != 1 {
		t.Errorf("WriteRTT through Extend: %v, %d samples arrived", err, bare.rtts)
	}
	if err := w.WriteAggregate(&events.Aggregate{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("WriteAggregate: %v, want ErrUnsupported", err)
	}
	if err := w.WriteFlowSummary(&events.FlowSummary{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("WriteFlowSummary: %v, want ErrUnsupported", err)
	}
	reopened := false
	if err := w.Restart(func() error { reopened = true; return nil }); err != nil || !reopened {
		t.Errorf("Restart: %v, reopen called %v", err, reopened)
	}
	if err := Require(w, 0); err != nil {
		t.Errorf("Require(0) = %v", err)
	}
	err := Require(w, Aggregates|FlowSummaries)
	if want := "the output writer cannot write aggregated records or flow summaries"; err == nil || err.Error() != want {
		t.Errorf("Require = %v, want %q", err, want)
	}
	if err := Require(w, FlowSummaries); err == nil || strings.Contains(err.Error(), "aggregated") {
		t.Errorf("Require(FlowSummaries) = %v, want it to name flow summaries only", err)
	}
	if Extend(nil) != nil {
		t.Error("Extend(nil) is not nil")
	}
}

// TestMillisLikeC checks the standard format's numbers against the output
// of C's printf("%.6g", (double)ns / 1000000UL) (glibc, x86_64).
func TestMillisLikeC(t *testing.T) {
	for _, c := range []struct {
		ns   int64
		want string
	}{
		{0, "0"}, {1, "1e-06"}, {5, "5e-06"}, {49, "4.9e-05"}, {50, "5e-05"},
		{500, "0.0005"}, {999, "0.000999"}, {1000, "0.001"}, {1234, "0.001234"},
		{12345, "0.012345"}, {99999, "0.099999"}, {100000, "0.1"}, {123456, "0.123456"},
		{999999, "0.999999"}, {1000000, "1"}, {1000001, "1"}, {1234565, "1.23456"},
		{1234567, "1.23457"}, {1500000, "1.5"}, {9999994, "9.99999"}, {9999995, "10"},
		{10000000, "10"}, {12345678, "12.3457"}, {40000000, "40"}, {123456789, "123.457"},
		{999994999, "999.995"}, {999995000, "999.995"}, {999999499, "999.999"},
		{999999500, "1000"}, {1234567890, "1234.57"}, {2500000000, "2500"},
		{99999949999, "99999.9"}, {99999950000, "99999.9"}, {100000000000, "100000"},
		{999999499999, "999999"}, {999999500000, "1e+06"}, {999999999999, "1e+06"},
		{1234567000000, "1.23457e+06"}, {9223372036854775807, "9.22337e+12"},
		{-1500000, "-1.5"},
	} {
		if got := string(appendMillis(nil, time.Duration(c.ns))); got != c.want {
			t.Errorf("%d ns: got %q, want %q", c.ns, got, c.want)
		}
	}
}

func TestStandardTimeOfDay(t *testing.T) {
	e := &events.RTT{Time: 1700000000_000000001, RTT: 40 * time.Millisecond, MinRTT: 40 * time.Millisecond,
		Flow: events.Flow{Src: ep("2001:db8::1", 443), Dst: ep("::1", 1), Proto: events.ProtoTCP}}
	for _, c := range []struct {
		loc  *time.Location
		want string
	}{
		{time.UTC, "22:13:20.000000001 40 ms 40 ms TCP 2001:db8::1:443+::1:1\n"},
		{time.FixedZone("X", 5*3600+30*60), "03:43:20.000000001 40 ms 40 ms TCP 2001:db8::1:443+::1:1\n"},
	} {
		if got := string(appendRTTStandard(nil, e, &style{loc: c.loc})); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
	// Before the epoch: the time of day is still that of the floor second.
	if got := string(appendTimeOfDay(nil, -1, time.UTC)); got != "23:59:59.999999999" {
		t.Errorf("Unix -1 ns: got %q", got)
	}
}

func TestPPVizNineDigits(t *testing.T) {
	for _, c := range []struct {
		ns   int64
		want string
	}{
		{1700000000_000000001, "1700000000.000000001"},
		{1700000000_123456789, "1700000000.123456789"},
		{1, "0.000000001"},
		{12_345_678_900, "12.345678900"},
		{0, "0.000000000"},
		{999_999_999, "0.999999999"},
		{1_000_000_000, "1.000000000"},
		{-1, "-0.000000001"},
		{-1_500_000_000, "-1.500000000"},
		{-9223372036854775808, "-9223372036.854775808"},
	} {
		if got := string(appendSeconds(nil, c.ns)); got != c.want {
			t.Errorf("%d ns: got %q, want %q", c.ns, got, c.want)
		}
	}
	e := &events.RTT{Time: 1700000000_000000001, RTT: 1, MinRTT: 12_345_678_900,
		Flow: events.Flow{Src: ep("10.1.1.1", 80), Dst: ep("10.2.2.2", 5555), Proto: events.ProtoTCP}}
	out, _ := render(t, "ppviz", []any{e,
		&events.FlowEvent{Time: 1, Flow: e.Flow, Type: events.FlowOpening, Reason: events.ReasonSYN}})
	want := "1700000000.000000001 0.000000001 12.345678900 10.1.1.1:80+10.2.2.2:5555\n"
	if string(out) != want {
		t.Errorf("ppviz: got %q, want %q", out, want)
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "event.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("event.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	commonKeys = []string{"timestamp", "src_ip", "src_port", "dest_ip", "dest_port", "protocol"}
	rttKeys    = append(append([]string(nil), commonKeys...),
		"rtt", "min_rtt", "sent_packets", "sent_bytes", "rec_packets", "rec_bytes", "match_on_egress", "smoothed_rtt", "source")
	flowKeys  = append(append([]string(nil), commonKeys...), "flow_event", "reason", "triggered_by")
	statsKeys = []string{"timestamp", "type", "packets", "rtt_events", "flow_events", "flow_map_full",
		"timestamp_map_full", "ringbuf_full", "flows_timed_out", "timestamps_expired", "flows", "timestamps", "flows_evicted", "timestamps_evicted", "aggregated_samples", "prefix_map_full",
		"flows_created", "flows_deleted", "timestamps_created", "timestamps_deleted", "summary_map_full", "summary_ringbuf_full", "summaries_sent",
		"samples_tcp_ts", "samples_icmp", "samples_tcp_seq", "samples_tcp_syn", "samples_dns", "samples_quic_spin",
		"tcp_seq_retransmissions", "tcp_seq_ambiguous", "dns_duplicate_queries", "dns_unmatched_responses",
		"quic_spin_rejected", "quic_spin_random", "fast_path_packets", "agg_folded_packets"}
)

// wantStatsKeys returns the top-level keys of s's json record in order.
func wantStatsKeys(s *events.Stats) []string {
	keys := append([]string(nil), statsKeys...)
	if s.Process != nil {
		keys = append(keys, "process")
	}
	if s.BPF != nil {
		keys = append(keys, "bpf_stats_enabled")
		if s.BPF.Enabled {
			keys = append(keys, "programs")
		}
	}
	if s.Sinks != nil {
		keys = append(keys, "sinks")
	}
	return keys
}

// objectKeys returns the keys of the flat JSON object obj in order.
func objectKeys(t *testing.T, obj []byte) []string {
	t.Helper()
	return topKeys(t, obj, false)
}

// topKeys returns the keys of the JSON object obj in order; nested
// objects and arrays fail the test unless nested is true.
func topKeys(t *testing.T, obj []byte, nested bool) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("object does not start with '{': %v %v", tok, err)
	}
	var keys []string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		if tok, err = d.Token(); err != nil {
			t.Fatal(err)
		}
		if _, ok := tok.(json.Delim); ok {
			if !nested {
				t.Fatalf("key %q has a non-scalar value", keys[len(keys)-1])
			}
			for depth := 1; depth > 0; {
				tok, err := d.Token()
				if err != nil {
					t.Fatal(err)
				}
				switch tok {
				case json.Delim('{'), json.Delim('['):
					depth++
				case json.Delim('}'), json.Delim(']'):
					depth--
				}
			}
		}
	}
	if tok, err := d.Token(); err != nil || tok != json.Delim('}') {
		t.Fatalf("object does not end with '}': %v %v", tok, err)
	}
	return keys
}

// checkObject validates one json/jsonl object: schema, key order, and that
// it is the kind of record ev is.
func checkObject(t *testing.T, sch *jsonschema.Schema, obj []byte, ev any) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(obj))
	if err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s: schema: %v", obj, err)
	}
	var want []string
	switch ev := ev.(type) {
	case *events.RTT:
		want = rttKeys
		if ev.Source == events.SourceDNS {
			want = append(append([]string(nil), rttKeys...), "dns_qtype", "dns_rcode", "dns_truncated")
			if ev.DNS.Name != "" {
				want = append(want, "dns_name")
			}
		}
	case *events.FlowEvent:
		want = flowKeys
	case *events.Stats:
		if got, want := topKeys(t, obj, true), wantStatsKeys(ev); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: key order\n got %v\nwant %v", obj, got, want)
		}
		return
	case *events.Aggregate, *events.FlowSummary:
		var top map[string]json.RawMessage
		if err := json.Unmarshal(obj, &top); err != nil {
			t.Fatal(err)
		}
		want := `"aggregate"`
		if _, ok := ev.(*events.FlowSummary); ok {
			want = `"flow_summary"`
		}
		if a, ok := ev.(*events.Aggregate); ok {
			// ePPing's fields first, in ePPing's order.
			epp := aggregateKeys
			if a.Meta != nil {
				want, epp = `"aggregate_meta"`, metaKeys
			} else if a.Global != nil {
				want, epp = `"aggregate_global"`, globalKeys
			} else if a.Count == 0 {
				epp = epp[:4]
			}
			if got := topKeys(t, obj, true); len(got) < len(epp) || fmt.Sprint(got[:len(epp)]) != fmt.Sprint(epp) {
				t.Errorf("%s: key order\n got %v\nwant %v first", obj, got, epp)
			}
		}
		if string(top["type"]) != want {
			t.Errorf("%s: not a %s record", obj, want)
		}
		return
	}
	if got := objectKeys(t, obj); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: key order\n got %v\nwant %v", obj, got, want)
	}
}

// ePPing's keys of its aggregated and global records, in its order.
var (
	aggregateKeys = []string{"timestamp", "ip_prefix", "rx_stats", "tx_stats", "count_rtt", "min_rtt", "mean_rtt", "median_rtt", "p95_rtt", "max_rtt", "histogram"}
	globalKeys    = []string{"timestamp", "protocol_counters", "ecn_counters", "errors"}
	metaKeys      = []string{"timestamp", "bins", "bin_width_ns", "aggregation_interval_ns", "timeout_interval_ns", "ipv4_prefix_len", "ipv6_prefix_len"}
)

func TestJSONSchemaAndOrder(t *testing.T) {
	sch := compileSchema(t)
	evs := fixture()

	out, _ := render(t, "json", evs)
	var arr []json.RawMessage
	if err := json.Unmarshal(out, &arr); err != nil {
		t.Fatalf("json output is not an array: %v\n%s", err, out)
	}
	if len(arr) != len(evs) {
		t.Fatalf("json array has %d elements, want %d", len(arr), len(evs))
	}
	for i, obj := range arr {
		checkObject(t, sch, obj, evs[i])
	}

	out, _ = render(t, "jsonl", evs)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(evs) {
		t.Fatalf("jsonl has %d lines, want %d", len(lines), len(evs))
	}
	for i, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("line %d is not JSON: %s", i, l)
		}
		checkObject(t, sch, []byte(l), evs[i])
	}

	// The schema is not vacuous.
	for _, bad := range []string{
		`{"timestamp":1,"src_ip":"1.2.3.4","src_port":1,"dest_ip":"1.2.3.4","dest_port":1,"protocol":"SCTP","flow_event":"opening","reason":"SYN","triggered_by":"src"}`,
		`{"timestamp":1,"src_ip":"1.2.3.4","src_port":1,"dest_ip":"1.2.3.4","dest_port":1,"protocol":"TCP","flow_event":"opening","reason":"SYN","triggered_by":"both"}`,
		`{"timestamp":1,"src_ip":"nope","src_port":1,"dest_ip":"1.2.3.4","dest_port":1,"protocol":"TCP","flow_event":"opening","reason":"SYN","triggered_by":"src"}`,
		`{"timestamp":1,"src_ip":"1.2.3.4","src_port":1,"dest_ip":"1.2.3.4","dest_port":1,"protocol":"TCP","rtt":1}`,
		`{"timestamp":1,"type":"stats","packets":1}`,
		statsWith(`"bpf_stats_enabled":false,"programs":[]`),
		statsWith(`"bpf_stats_enabled":true`),
		statsWith(`"programs":[]`),
		statsWith(`"bpf_stats_enabled":true,"programs":[{"name":"tc_egress","run_count":1,"run_time_ns":-1,"interval_run_count":0,"interval_run_time_ns":0}]`),
		statsWith(`"bpf_stats_enabled":true,"programs":[{"name":"kprobe","run_count":1,"run_time_ns":1,"interval_run_count":0,"interval_run_time_ns":0}]`),
		statsWith(`"process":{"cpu_user_s":0.1,"cpu_system_s":0.1,"rss_bytes":1,"max_rss_bytes":1}`),
		statsWith(`"process":{"cpu_user_s":-0.1,"cpu_system_s":0.1,"rss_bytes":1,"max_rss_bytes":1,"cpu_share":0}`),
		`{"timestamp":1,"type":"aggregate","interval_start":0,"ip_prefix":"10.0.0.0/24","prefix_id":3,"count_rtt":0}`,
		`{"timestamp":1,"type":"aggregate","interval_start":0,"ip_prefix":"10.0.0.0/24","rx_stats":{"packets":0},"count_rtt":0}`,
	} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(inst) == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
}

func TestJSONEmpty(t *testing.T) {
	out, _ := render(t, "json", nil)
	var arr []any
	if err := json.Unmarshal(out, &arr); err != nil || len(arr) != 0 {
		t.Fatalf("empty json output %q: %v %v", out, arr, err)
	}
	out, _ = render(t, "jsonl", nil)
	if len(out) != 0 {
		t.Errorf("empty jsonl output %q", out)
	}
}

func TestIPv6ZoneEscaped(t *testing.T) {
	e := &events.RTT{Flow: events.Flow{
		Src: events.Endpoint{IP: netip.MustParseAddr("fe80::1").WithZone(`we"ird\`), Port: 1},
		Dst: ep("fe80::2", 2), Proto: events.ProtoTCP}}
	b := appendRTTJSON(nil, e, &style{})
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if got := m["src_ip"]; got != `fe80::1%we"ird\` {
		t.Errorf("src_ip = %q", got)
	}
}

func TestClose(t *testing.T) {
	for _, name := range Names() {
		w, err := New(name, io.Discard, Options{StatsTo: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("%s: second Close: %v", name, err)
		}
		if err := w.WriteRTT(&events.RTT{}); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: WriteRTT after Close: %v", name, err)
		}
		if err := w.WriteFlow(&events.FlowEvent{}); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: WriteFlow after Close: %v", name, err)
		}
		if err := w.WriteStats(&events.Stats{}); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: WriteStats after Close: %v", name, err)
		}
	}
}

// writeLog records each Write call separately.
type writeLog struct {
	mu     sync.Mutex
	writes [][]byte
}

func (l *writeLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, append([]byte(nil), p...))
	return len(p), nil
}

// TestWholeRecords checks that no record is split across two writes to
// the underlying writer, even when the buffer fills up many times.
func TestWholeRecords(t *testing.T) {
	evs := fixture()
	for _, name := range []string{"standard", "ppviz", "jsonl"} {
		var l writeLog
		w, err := New(name, &l, Options{StatsTo: io.Discard, Location: time.UTC})
		if err != nil {
			t.Fatal(err)
		}
		for range 2000 {
			writeAll(t, w, evs)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if len(l.writes) < 10 {
			t.Errorf("%s: only %d writes; the test needs the buffer to fill", name, len(l.writes))
		}
		for i, p := range l.writes {
			if len(p) == 0 || p[len(p)-1] != '\n' {
				t.Fatalf("%s: write %d does not end a record: ...%q", name, i, p[max(0, len(p)-40):])
			}
		}
	}
}

// TestRestart switches the destination of a json writer between two
// buffers: each must hold one complete document.
func TestRestart(t *testing.T) {
	sch := compileSchema(t)
	evs := fixture()
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			var a, b bytes.Buffer
			sw := &switchWriter{w: &a}
			w, err := New(name, sw, Options{StatsTo: io.Discard, Location: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			writeAll(t, w, evs[:4])
			if err := w.Restart(func() error { sw.w = &b; return nil }); err != nil {
				t.Fatal(err)
			}
			writeAll(t, w, evs[4:])
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			whole, _ := render(t, name, evs)
			if got := a.String() + b.String(); name != "json" && got != string(whole) {
				t.Errorf("restarted output differs from uninterrupted output:\n%s---\n%s", got, whole)
			}
			if name != "json" {
				return
			}
			for i, doc := range []*bytes.Buffer{&a, &b} {
				var arr []json.RawMessage
				if err := json.Unmarshal(doc.Bytes(), &arr); err != nil {
					t.Fatalf("document %d: %v\n%s", i, err, doc)
				}
				part := evs[:4]
				if i == 1 {
					part = evs[4:]
				}
				if len(arr) != len(part) {
					t.Fatalf("document %d has %d elements, want %d", i, len(arr), len(part))
				}
				for j, obj := range arr {
					checkObject(t, sch, obj, part[j])
				}
			}
		})
	}
}

func TestRestartClearsError(t *testing.T) {
	var good bytes.Buffer
	sw := &switchWriter{w: failWriter{}}
	w, _ := New("jsonl", sw, Options{})
	e := fixture()[1].(*events.RTT)
	_ = w.WriteRTT(e)
	if err := w.Flush(); err == nil {
		t.Fatal("Flush to a failing writer succeeded")
	}
	err := w.Restart(func() error { sw.w = &good; return nil })
	if err == nil {
		t.Error("Restart did not report the failed flush")
	}
	if err := w.WriteRTT(e); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Count(good.String(), "\n") != 1 {
		t.Errorf("after Restart: %q", good.String())
	}
}

type switchWriter struct{ w io.Writer }

func (s *switchWriter) Write(p []byte) (int, error) { return s.w.Write(p) }

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestConcurrentWrites(t *testing.T) {
	var out bytes.Buffer
	w, _ := New("jsonl", &out, Options{})
	evs := fixture()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				writeAll(t, w, evs)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4*200*len(evs) {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("invalid line %q", l)
		}
	}
}

// TestNoAllocs asserts that writing an event does not allocate.
func TestNoAllocs(t *testing.T) {
	evs := fixture()
	rtt := evs[2].(*events.RTT) // IPv6
	rtt4 := evs[1].(*events.RTT)
	fe := evs[0].(*events.FlowEvent)
	st := evs[6].(*events.Stats)
	stOff := evs[len(evs)-1].(*events.Stats)
	for _, name := range Names() {
		for _, loc := range []*time.Location{time.UTC, nil} {
			w, err := New(name, io.Discard, Options{Location: loc, StatsTo: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			for what, f := range map[string]func(){
				"WriteRTT(v6)":              func() { _ = w.WriteRTT(rtt) },
				"WriteRTT(v4)":              func() { _ = w.WriteRTT(rtt4) },
				"WriteFlow":                 func() { _ = w.WriteFlow(fe) },
				"WriteStats":                func() { _ = w.WriteStats(st) },
				"WriteStats(bpf_stats off)": func() { _ = w.WriteStats(stOff) },
				"Flush":                     func() { _ = w.Flush() },
			} {
				if n := testing.AllocsPerRun(1000, f); n != 0 {
					t.Errorf("%s %s (loc %v): %v allocs per call, want 0", name, what, loc, n)
				}
			}
		}
	}
}

func BenchmarkWriteRTT(b *testing.B) {
	e := fixture()[2].(*events.RTT)
	for _, name := range Names() {
		b.Run(name, func(b *testing.B) {
			w, _ := New(name, io.Discard, Options{Location: time.UTC})
			b.ReportAllocs()
			for b.Loop() {
				_ = w.WriteRTT(e)
			}
		})
	}
}

// statsWith returns a schema-valid stats record (no telemetry) with extra
// members appended.
func statsWith(extra string) string {
	return `{"timestamp":1,"type":"stats","packets":1,"rtt_events":0,"flow_events":0,"flow_map_full":0,` +
		`"timestamp_map_full":0,"ringbuf_full":0,"flows_timed_out":0,"timestamps_expired":0,"flows":0,` +
		`"timestamps":0,"flows_evicted":0,"timestamps_evicted":0,"aggregated_samples":0,"prefix_map_full":0,` +
		`"flows_created":0,"flows_deleted":0,"timestamps_created":0,"timestamps_deleted":0,"summary_map_full":0,` +
		`"summary_ringbuf_full":0,"summaries_sent":0,"samples_tcp_ts":0,"samples_icmp":0,"samples_tcp_seq":0,` +
		`"samples_tcp_syn":0,"samples_dns":0,"samples_quic_spin":0,"tcp_seq_retransmissions":0,"tcp_seq_ambiguous":0,` +
		`"dns_duplicate_queries":0,"dns_unmatched_responses":0,"quic_spin_rejected":0,"quic_spin_random":0,` +
		`"fast_path_packets":0,"agg_folded_packets":0,` +
		extra + `}`
}

// TestStatsTelemetry checks the self-telemetry parts of the stats record:
// values in json, the standard line, and their absence in records without
// telemetry (replay).
func TestStatsTelemetry(t *testing.T) {
	sch := compileSchema(t)
	for _, ok := range []string{
		statsWith(`"bpf_stats_enabled":false`),
		statsWith(`"bpf_stats_enabled":true,"programs":[]`),
		statsWith(`"process":{"cpu_user_s":0,"cpu_system_s":0.000001,"rss_bytes":1,"max_rss_bytes":1,"cpu_share":1.5}`),
	} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(ok))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("schema rejected %s: %v", ok, err)
		}
	}

	evs := fixture()
	on, off := evs[6].(*events.Stats), evs[len(evs)-1].(*events.Stats)
	var rec struct {
		Process struct {
			CPUUser   json.Number `json:"cpu_user_s"`
			CPUSystem json.Number `json:"cpu_system_s"`
			RSS       uint64      `json:"rss_bytes"`
			MaxRSS    uint64      `json:"max_rss_bytes"`
			CPUShare  json.Number `json:"cpu_share"`
		} `json:"process"`
		Enabled  *bool `json:"bpf_stats_enabled"`
		Programs []map[string]json.RawMessage
	}
	if err := json.Unmarshal(appendStatsJSON(nil, on), &rec); err != nil {
		t.Fatal(err)
	}
	p := rec.Process
	if p.CPUUser != "0.123456" || p.CPUSystem != "2.000005" || p.RSS != 24_535_040 || p.MaxRSS != 26_214_400 || p.CPUShare != "0.012346" {
		t.Errorf("process: %+v", p)
	}
	if rec.Enabled == nil || !*rec.Enabled || len(rec.Programs) != 2 {
		t.Fatalf("bpf_stats_enabled %v, programs %v", rec.Enabled, rec.Programs)
	}
	eg, in := rec.Programs[0], rec.Programs[1]
	str := func(m map[string]json.RawMessage, k string) string { return string(m[k]) }
	if str(eg, "name") != `"tc_egress"` || str(eg, "run_count") != "61728" || str(eg, "run_time_ns") != "12962880" ||
		str(eg, "ns_per_packet") != "210.0" || str(eg, "interval_run_count") != "1000" || str(eg, "interval_ns_per_packet") != "205.1" {
		t.Errorf("tc_egress: %s", appendStatsJSON(nil, on))
	}
	if str(in, "name") != `"tc_ingress"` || str(in, "ns_per_packet") != "245.0" || str(in, "interval_run_count") != "0" {
		t.Errorf("tc_ingress: %s", appendStatsJSON(nil, on))
	}
	if _, has := in["interval_ns_per_packet"]; has {
		t.Errorf("tc_ingress did not run in the interval but has interval_ns_per_packet: %v", in)
	}

	line := string(appendStatsLine(nil, on, time.UTC))
	for _, want := range []string{" cpu_user=0.123456s cpu_sys=2.000005s cpu_share=1.23% rss=23.4MiB max_rss=25.0MiB",
		" tc_egress_runs=61728 tc_egress_ns_per_pkt=210.0 tc_egress_interval_ns_per_pkt=205.1",
		" tc_ingress_runs=61728 tc_ingress_ns_per_pkt=245.0 tc_ingress_interval_ns_per_pkt=-\n"} {
		if !strings.Contains(line, want) {
			t.Errorf("standard line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "bpf_stats=off") {
		t.Errorf("standard line says off: %s", line)
	}

	// Statistics off: said so, and no per-program figures.
	js := string(appendStatsJSON(nil, off))
	if !strings.HasSuffix(js, `,"bpf_stats_enabled":false}`) || strings.Contains(js, "programs") {
		t.Errorf("disabled: %s", js)
	}
	line = string(appendStatsLine(nil, off, time.UTC))
	if !strings.HasSuffix(line, " bpf_stats=off\n") || strings.Contains(line, "_runs=") {
		t.Errorf("disabled: %s", line)
	}

	// Without telemetry (replay) the record is the counters only.
	bare := *on
	bare.Process, bare.BPF = nil, nil
	if js := string(appendStatsJSON(nil, &bare)); !strings.HasSuffix(js, `"quic_spin_random":2,"fast_path_packets":0,"agg_folded_packets":0}`) {
		t.Errorf("without telemetry: %s", js)
	}
	if line := string(appendStatsLine(nil, &bare, time.UTC)); !strings.HasSuffix(line, " quic_spin_random=2 fast_path_packets=0 agg_folded_packets=0\n") {
		t.Errorf("without telemetry: %s", line)
	}
}

func TestAppendMicros(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.000000"}, {999, "0.000000"}, {1000, "0.000001"}, {123_456_789, "0.123456"},
		{2*time.Second + 5*time.Microsecond, "2.000005"}, {3600 * time.Second, "3600.000000"},
		{-1500 * time.Microsecond, "-0.001500"},
	} {
		if got := string(appendMicros(nil, c.d)); got != c.want {
			t.Errorf("%d: got %q, want %q", c.d, got, c.want)
		}
	}
}
