package format

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/hist"
)

// pdmFixture: a PDM option with this host's round trip, one seen leaving
// without it, and an interval summary with two delays sampled.
func pdmFixture() []any {
	udp := events.Flow{Src: ep("fd00:1::2", 7007), Dst: ep("fd00::2", 41234), Proto: events.ProtoUDP}
	in := &events.PDM{Time: t0, Flow: udp, Ifindex: 2, PSNThisPkt: 40123, PSNLastRecv: 811,
		ScaleDTLR: 35, DeltaLastRecv: 64820, DTLR: 2_227_198,
		RoundTrip: 17_346_445, HasRoundTrip: true, NetworkRTT: 15_119_247, HasNetworkRTT: true}
	out := &events.PDM{Time: t0 + 1, Flow: udp.Reverse(), Egress: true, PSNThisPkt: 812, PSNLastRecv: 40123,
		ScaleDTLS: 35, DeltaLastSent: 1, DTLS: 34_359_738}
	iv := &events.PDMInterval{Time: t0 + 10e9, Start: t0, Flow: udp}
	h := make([]uint32, hist.Bins)
	h[hist.Bin(2_000_000)], h[hist.Bin(3_000_000)] = 2, 1
	iv.DTLR.Set(h, 3, 7_000_000, 2_000_000, 3_000_000)
	h = make([]uint32, hist.Bins)
	h[hist.Bin(15_000_000)] = 1
	iv.NetworkRTT.Set(h, 1, 15_000_000, 15_000_000, 15_000_000)
	return []any{in, out, iv}
}

var (
	pdmKeys = append(append([]string(nil), commonKeys...), "type", "direction", "ifindex",
		"psn_this_pkt", "psn_last_recv", "scale_dtlr", "delta_last_recv", "scale_dtls", "delta_last_sent", "dtlr", "dtls")
	pdmIntervalKeys = append(append([]string(nil), commonKeys...), "type", "interval_start", "direction", "dtlr", "dtls", "network_rtt")
)

// TestPDMJSON: the records match the schema, keep their key order, and
// carry the values (the round trip and network RTT only when known; the
// interval's quantiles and bins from the histogram).
func TestPDMJSON(t *testing.T) {
	sch := compileSchema(t)
	evs := pdmFixture()
	out, _ := render(t, "jsonl", evs)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(evs) {
		t.Fatalf("%d lines for %d records:\n%s", len(lines), len(evs), out)
	}
	wantKeys := [][]string{append(append([]string(nil), pdmKeys...), "round_trip", "network_rtt"), pdmKeys, pdmIntervalKeys}
	for i, l := range lines {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(l))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s: schema: %v", l, err)
		}
		if got := topKeys(t, []byte(l), true); fmt.Sprint(got) != fmt.Sprint(wantKeys[i]) {
			t.Errorf("%s: key order\n got %v\nwant %v", l, got, wantKeys[i])
		}
	}
	if !strings.Contains(lines[0], `"direction":"ingress","ifindex":2,"psn_this_pkt":40123,"psn_last_recv":811,"scale_dtlr":35,"delta_last_recv":64820,"scale_dtls":0,"delta_last_sent":0,"dtlr":2227198,"dtls":0,"round_trip":17346445,"network_rtt":15119247}`) {
		t.Errorf("ingress record: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"type":"pdm","direction":"egress"`) || !strings.HasSuffix(lines[1], `"dtls":34359738}`) {
		t.Errorf("egress record: %s", lines[1])
	}
	var iv struct {
		Start              int64 `json:"interval_start"`
		DTLR, DTLS, NetRTT struct {
			Count                                 uint64
			Min, Mean, Median, P90, P95, P99, Max int64
			Histogram                             [][3]*uint64
		}
	}
	if err := json.Unmarshal([]byte(strings.Replace(lines[2], `"network_rtt"`, `"netrtt"`, 1)), &iv); err != nil {
		t.Fatal(err)
	}
	d := iv.DTLR
	if iv.Start != t0 || d.Count != 3 || d.Min != 2_000_000 || d.Mean != 2_333_333 || d.Max != 3_000_000 ||
		len(d.Histogram) != 2 || *d.Histogram[0][2] != 2 || *d.Histogram[0][0] != hist.Lower(hist.Bin(2_000_000)) {
		t.Errorf("dtlr distribution: %+v in %s", d, lines[2])
	}
	// p50 is the midpoint of 2 ms's bin, p99 of 3 ms's.
	mid := func(v uint64) int64 { b := hist.Bin(v); return int64(hist.Lower(b) + (hist.Upper(b)-hist.Lower(b))/2) }
	if d.Median != mid(2_000_000) || d.P99 != mid(3_000_000) {
		t.Errorf("dtlr quantiles: median %d p99 %d", d.Median, d.P99)
	}
	if iv.DTLS.Count != 0 || strings.Contains(lines[2], `"dtls":{"count":0,`) || iv.NetRTT.Count != 1 || iv.NetRTT.Median != 15_000_000 {
		t.Errorf("dtls/network_rtt: %s", lines[2])
	}
}

// TestPDMMinimalAndDropped: --minimal leaves out ifindex and the wire
// fields; a flow with dropped addresses shows flow_id.
func TestPDMMinimalAndDropped(t *testing.T) {
	sch := compileSchema(t)
	evs := pdmFixture()
	p := evs[0].(*events.PDM)
	p.Flow = events.Flow{Src: events.Endpoint{Port: 7007}, Dst: events.Endpoint{Port: 41234}, Proto: events.ProtoUDP, ID: 4}
	var o bytes.Buffer
	w, err := New("jsonl", &o, Options{Minimal: true})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, evs[:1])
	_ = w.Close()
	l := strings.TrimSpace(o.String())
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(l))
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s: schema: %v", l, err)
	}
	want := []string{"timestamp", "flow_id", "src_port", "dest_port", "protocol", "type", "direction", "dtlr", "dtls", "round_trip", "network_rtt"}
	if got := objectKeys(t, []byte(l)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("minimal, dropped: keys %v, want %v", got, want)
	}
}

// TestPDMStandard: one line per record; ppviz skips them.
func TestPDMStandard(t *testing.T) {
	out, _ := render(t, "standard", pdmFixture())
	want := "22:13:20.123456789 UDP fd00:1::2:7007+fd00::2:41234 pdm ingress dtlr=2.2272 ms dtls=0 ms round_trip=17.3464 ms network_rtt=15.1192 ms psn=40123 psnlr=811\n" +
		"22:13:20.123456790 UDP fd00::2:41234+fd00:1::2:7007 pdm egress dtlr=0 ms dtls=34.3597 ms psn=812 psnlr=40123\n" +
		"22:13:30.123456789 UDP fd00:1::2:7007+fd00::2:41234 pdm_interval ingress dtlr n=3 min=2 mean=2.33333 p50=2.01523 p90=2.98189 p95=2.98189 p99=2.98189 max=3 ms dtls n=0 network_rtt n=1 min=15 mean=15 p50=15 p90=15 p95=15 p99=15 max=15 ms\n"
	if string(out) != want {
		t.Errorf("standard:\n got %q\nwant %q", out, want)
	}
	if out, _ := render(t, "ppviz", pdmFixture()); len(out) != 0 {
		t.Errorf("ppviz wrote %q", out)
	}
}
