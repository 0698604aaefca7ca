package pdm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
	"unsafe"

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

func TestWriterJSON(t *testing.T) {
	var b bytes.Buffer
	w, err := NewWriter(&b, "json")
	if err != nil {
		t.Fatal(err)
	}
	ev := probe.PdmPdmEvent{Proto: 17, Sport: 53, Dport: 5353, Flags: evRoundTrip, RoundTrip: 3_000_000}
	ev.Dtlr, ev.ScaleDtlr = Encode(1_000_000)
	for range 2 {
		if err := w.Write(NewRecord(&ev, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(b.Bytes(), &recs); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, b.String())
	}
	if len(recs) != 2 || recs[0]["protocol"] != "UDP" || recs[0]["round_trip"] != 3e6 || recs[0]["network_rtt"] == nil {
		t.Errorf("records %v", recs)
	}
	if nrtt := recs[0]["network_rtt"].(float64); nrtt < 2e6 || nrtt > 2.0001e6 {
		t.Errorf("network_rtt %v, want 3 ms - 1 ms", nrtt)
	}
}
