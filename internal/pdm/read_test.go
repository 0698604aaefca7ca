package pdm

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/pdm/pdmtest"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
)

const readT0 = pdmtest.T0

func readConversation() ([]capture.TimedFrame, []bool) { return pdmtest.Conversation() }

func i64(v int64) *int64 { return &v }

// wantRead are the records of pdmtest.Conversation with hostA local, worked
// out by hand: 0xE35F/34 = 999,988.6 ns, 0x8000/35 = 1,125,899.9 ns,
// 0xC000/36 = 3,377,699.7 ns, 0xE8D4/24 = 999.99 ns (rounded to the ns).
// Each packet pairs with the last one of the other side whose PSNTP its
// PSNLR names: network_rtt = its DTLS - that packet's DTLR.
func wantRead() []Record {
	a, b := hostA.String(), hostB.String()
	ms := int64(time.Millisecond)
	return []Record{
		{recordFlow: recordFlow{Timestamp: readT0, SrcIP: a, SrcPort: 40000, DestIP: b, DestPort: 53, Protocol: "UDP", Direction: "egress"},
			PSNThisPkt: 100},
		{recordFlow: recordFlow{Timestamp: readT0 + 10*ms, SrcIP: b, SrcPort: 53, DestIP: a, DestPort: 40000, Protocol: "UDP", Direction: "ingress"},
			PSNThisPkt: 500, PSNLastRecv: 100, ScaleDTLR: 34, DeltaLastRecv: 0xE35F, DTLR: 999_989, NetworkRTT: i64(0)},
		{recordFlow: recordFlow{Timestamp: readT0 + 30*ms, SrcIP: a, SrcPort: 40000, DestIP: b, DestPort: 53, Protocol: "UDP", Direction: "egress"},
			PSNThisPkt: 101, PSNLastRecv: 500, ScaleDTLR: 35, DeltaLastRecv: 0x8000, ScaleDTLS: 36, DeltaLastSent: 0xC000,
			DTLR: 1_125_900, DTLS: 3_377_700, NetworkRTT: i64(3_377_700 - 999_989)},
		{recordFlow: recordFlow{Timestamp: readT0 + 35*ms, SrcIP: b, SrcPort: 53, DestIP: a, DestPort: 40000, Protocol: "UDP", Direction: "ingress"},
			PSNThisPkt: 501, PSNLastRecv: 101, ScaleDTLR: 24, DeltaLastRecv: 0xE8D4, ScaleDTLS: 36, DeltaLastSent: 0xC000,
			DTLR: 1000, DTLS: 3_377_700, NetworkRTT: i64(3_377_700 - 1_125_900)},
	}
}

func flipped(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		r.Direction = map[string]string{"egress": "ingress", "ingress": "egress"}[r.Direction]
		out[i] = r
	}
	return out
}

func readRecords(t *testing.T, o ReadOptions) ([]Record, ReadSummary) {
	t.Helper()
	var buf bytes.Buffer
	w, err := format.New("jsonl", &buf, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o.Output, o.MapSize, o.Lifetime = w, DefaultMapSize, DefaultLifetime
	sum, err := Read(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || r.Type != "pdm" {
			t.Fatalf("record %q: %v", line, err)
		}
		r.Type = ""
		recs = append(recs, r)
	}
	return recs, sum
}

func sameRecords(t *testing.T, what string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d: %+v", what, len(got), len(want), got)
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("%s: record %d:\n got %s\nwant %s", what, i, g, w)
		}
	}
}

// TestReadCapture: --read decodes a capture to the records worked out by
// hand, to the ns and at the capture times, whichever way the direction
// is decided (first sender, --local-net, pcapng flags).
func TestReadCapture(t *testing.T) {
	testutil.RequireRoot(t)
	frames, fromA := readConversation()
	dir := t.TempDir()

	pcap := filepath.Join(dir, "conv.pcap")
	if err := capture.WritePcap(pcap, capture.LinkTypeEthernet, true, frames); err != nil {
		t.Fatal(err)
	}
	got, sum := readRecords(t, ReadOptions{Path: pcap})
	sameRecords(t, "pcap, first sender local", got, wantRead())
	if sum.Packets != 6 || sum.Fed != 5 || sum.Records != 4 || sum.Counters[probe.PdmPdmCounterPDM_C_PDM_SEEN] != 4 {
		t.Errorf("summary %+v: want 6 packets, 5 IPv6, 4 records, 4 PDM seen", sum)
	}

	got, _ = readRecords(t, ReadOptions{Path: pcap, LocalNets: []netip.Prefix{netip.PrefixFrom(hostB, 128)}})
	sameRecords(t, "pcap, --local-net hostB", got, flipped(wantRead()))

	// pcapng with directions as captured on hostB: they win over the
	// first-sender rule.
	for i := range frames {
		frames[i].Direction = capture.DirOutbound
		if fromA[i] {
			frames[i].Direction = capture.DirInbound
		}
	}
	ng := filepath.Join(dir, "conv.pcapng.gz")
	if err := capture.WritePcapng(ng, []uint16{capture.LinkTypeEthernet}, frames); err != nil {
		t.Fatal(err)
	}
	got, _ = readRecords(t, ReadOptions{Path: ng})
	sameRecords(t, "pcapng with directions", got, flipped(wantRead()))
}

// TestReadMatchesPrograms: a capture read gives exactly the records the
// passive programs give when run on the same packets at the same times in
// the same directions (the live data path, here through test runs).
func TestReadMatchesPrograms(t *testing.T) {
	frames, fromA := readConversation()
	h := newHarness(t, Config{Passive: true})
	var want []Record
	for i, f := range frames {
		if !bytes.Equal(f.Data[12:14], []byte{0x86, 0xdd}) {
			continue
		}
		if fromA[i] {
			h.egress(f.Data, uint64(f.Timestamp))
		} else {
			h.ingress(f.Data, uint64(f.Timestamp))
		}
		for _, e := range h.events() {
			r := toRecord(t, &e, 0)
			r.Ifindex = 0
			want = append(want, r)
		}
	}
	pcap := filepath.Join(t.TempDir(), "conv.pcap")
	if err := capture.WritePcap(pcap, capture.LinkTypeEthernet, true, frames); err != nil {
		t.Fatal(err)
	}
	got, _ := readRecords(t, ReadOptions{Path: pcap})
	sameRecords(t, "read vs programs", got, want)
	sameRecords(t, "programs vs by hand", want, wantRead())
}

// TestReadIntervals: --read with interval reporting closes intervals by
// capture time, aligned to multiples of the interval since the Unix
// epoch, the last one at the last packet; each holds the samples of the
// packets captured in it (the values of wantRead).
func TestReadIntervals(t *testing.T) {
	testutil.RequireRoot(t)
	pcap := pdmtest.WritePcap(t, t.TempDir())
	var buf bytes.Buffer
	w, _ := format.New("jsonl", &buf, format.Options{})
	const every = 20 * time.Millisecond
	_, err := Read(context.Background(), ReadOptions{Path: pcap, MapSize: DefaultMapSize, Lifetime: DefaultLifetime,
		Reporting: Reporting{Report: ReportInterval, Interval: every}, Output: w})
	if err != nil {
		t.Fatal(err)
	}
	var got []intervalRecord
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var r intervalRecord
		if err := json.Unmarshal(l, &r); err != nil || r.Type != "pdm_interval" {
			t.Fatalf("%v: %s", err, l)
		}
		got = append(got, r)
	}
	ms := int64(time.Millisecond)
	start := readT0 - readT0%int64(every) // the packets at 0 and 10 ms
	want := []struct {
		start, end int64
		direction  string
		dtlr, dtls distribution
		network    distribution
	}{
		{start, start + int64(every), "ingress", exact(999_989), exact(), exact(0)},
		// The last interval ends at the last packet (35 ms).
		{start + int64(every), readT0 + 35*ms, "egress", exact(1_125_900), exact(3_377_700), exact(3_377_700 - 999_989)},
		{start + int64(every), readT0 + 35*ms, "ingress", exact(1000), exact(3_377_700), exact(3_377_700 - 1_125_900)},
	}
	if len(got) != len(want) {
		t.Fatalf("%d interval records, want %d: %s", len(got), len(want), buf.Bytes())
	}
	for i, w := range want {
		g := got[i]
		if g.IntervalStart != w.start || g.Timestamp != w.end || g.Direction != w.direction ||
			!sameDist(g.DTLR, w.dtlr) || !sameDist(g.DTLS, w.dtls) || !sameDist(g.NetworkRTT, w.network) {
			t.Errorf("interval record %d: got %+v\nwant %+v", i, g, w)
		}
	}
}
