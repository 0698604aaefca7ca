package pdm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/probe"
)

// TestDecodeEventLayout checks the hand decoder's offsets against the
// generated type: every field set to a distinct value survives.
func TestDecodeEventLayout(t *testing.T) {
	if unsafe.Sizeof(probe.PdmPdmEvent{}) != 72 {
		t.Fatalf("struct pdm_event is %d bytes, the decoder reads 72", unsafe.Sizeof(probe.PdmPdmEvent{}))
	}
	want := probe.PdmPdmEvent{Timestamp: 1, RoundTrip: 2, Sport: 3, Dport: 4, Ifindex: 5, Proto: 6, Flags: 7,
		ScaleDtlr: 8, ScaleDtls: 9, Psntp: 10, Psnlr: 11, Dtlr: 12, Dtls: 13, PairScale: 14, PairDtlr: 15}
	want.Saddr[0], want.Daddr[15] = 16, 17
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.NativeEndian, &want); err != nil {
		t.Fatal(err)
	}
	var got probe.PdmPdmEvent
	if !decodeEvent(buf.Bytes(), &got) || got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

func TestCounterNames(t *testing.T) {
	seen := map[string]bool{}
	for i, n := range counterNames {
		if n == "" || seen[n] {
			t.Errorf("counter %d: name %q missing or repeated", i, n)
		}
		seen[n] = true
	}
}

// recordFlow are the fields every PDM record starts with.
type recordFlow struct {
	Timestamp int64  `json:"timestamp"`
	SrcIP     string `json:"src_ip"`
	SrcPort   uint16 `json:"src_port"`
	DestIP    string `json:"dest_ip"`
	DestPort  uint16 `json:"dest_port"`
	Protocol  string `json:"protocol"`
	Type      string `json:"type"`
	Direction string `json:"direction"`
}

// Record is a PDM record as json/jsonl show it (docs/pdm.md): the tests
// decode the output into it.
type Record struct {
	recordFlow
	Ifindex       uint32 `json:"ifindex"`
	PSNThisPkt    uint16 `json:"psn_this_pkt"`
	PSNLastRecv   uint16 `json:"psn_last_recv"`
	ScaleDTLR     uint8  `json:"scale_dtlr"`
	DeltaLastRecv uint16 `json:"delta_last_recv"`
	ScaleDTLS     uint8  `json:"scale_dtls"`
	DeltaLastSent uint16 `json:"delta_last_sent"`
	DTLR          int64  `json:"dtlr"`
	DTLS          int64  `json:"dtls"`
	RoundTrip     *int64 `json:"round_trip,omitempty"`
	NetworkRTT    *int64 `json:"network_rtt,omitempty"`
}

// toRecord renders e as jsonl and decodes it back.
func toRecord(t *testing.T, e *probe.PdmPdmEvent, clockOffset int64) Record {
	t.Helper()
	var p events.PDM
	NewRecord(e, clockOffset, &p)
	var b bytes.Buffer
	w, err := format.New("jsonl", &b, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePDM(&p); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	var r Record
	if err := json.Unmarshal(b.Bytes(), &r); err != nil || r.Type != "pdm" {
		t.Fatalf("%v: %s", err, b.String())
	}
	r.Type = "" // the records worked out by hand have none
	return r
}

// TestNewRecord: the round trip and the network RTT derived from an
// event, and the passive pairing.
func TestNewRecord(t *testing.T) {
	ev := probe.PdmPdmEvent{Proto: 17, Sport: 53, Dport: 5353, Flags: evRoundTrip, RoundTrip: 3_000_000, Timestamp: 5}
	ev.Dtlr, ev.ScaleDtlr = Encode(1_000_000)
	r := toRecord(t, &ev, 10)
	if r.Protocol != "UDP" || r.Direction != "ingress" || r.Timestamp != 15 || r.RoundTrip == nil || *r.RoundTrip != 3e6 || r.NetworkRTT == nil {
		t.Fatalf("record %+v", r)
	}
	if n := *r.NetworkRTT; n < 2e6 || n > 2.0001e6 {
		t.Errorf("network_rtt %v, want 3 ms - 1 ms", n)
	}
	// The peer held it longer than the round trip: no network RTT.
	ev.RoundTrip = 500_000
	if r := toRecord(t, &ev, 0); r.NetworkRTT != nil {
		t.Errorf("negative network RTT reported: %+v", r)
	}
	// Passive: DTLS minus the paired DTLR.
	ev = probe.PdmPdmEvent{Proto: 6, Flags: evPaired | evEgress}
	ev.Dtls, ev.ScaleDtls = Encode(10_000_000)
	ev.PairDtlr, ev.PairScale = Encode(4_000_000)
	r = toRecord(t, &ev, 0)
	if r.Direction != "egress" || r.RoundTrip != nil || r.NetworkRTT == nil || *r.NetworkRTT < 5_999_000 || *r.NetworkRTT > 6_001_000 {
		t.Errorf("passive record %+v", r)
	}
}
