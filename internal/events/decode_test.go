package events

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"
)

func putTuple(b []byte, src, dst netip.Addr, sport, dport uint16, proto uint16) {
	s, d := src.As16(), dst.As16()
	copy(b[0:16], s[:])
	binary.BigEndian.PutUint16(b[16:], sport)
	copy(b[20:36], d[:])
	binary.BigEndian.PutUint16(b[36:], dport)
	binary.LittleEndian.PutUint16(b[40:], proto)
}

func TestDecodeRTT(t *testing.T) {
	raw := make([]byte, rttRecordSize)
	binary.LittleEndian.PutUint32(raw[0:], uint32(KindRTT))
	binary.LittleEndian.PutUint32(raw[4:], 7)
	binary.LittleEndian.PutUint64(raw[8:], 1000)
	putTuple(raw[16:], netip.MustParseAddr("::ffff:10.0.0.2"), netip.MustParseAddr("::ffff:10.0.0.1"), 80, 5000, 6)
	raw[60], raw[61] = 1, byte(SourceDNS)
	binary.LittleEndian.PutUint16(raw[120:], 28)
	raw[122], raw[123] = 3, 1
	for i, v := range []uint64{40e6, 39e6, 41e6, 10, 1000, 9, 900} {
		binary.LittleEndian.PutUint64(raw[64+8*i:], v)
	}
	d := Decoder{ClockOffset: 5}
	var r RTT
	var f FlowEvent
	kind, err := d.Decode(raw, &r, &f)
	if err != nil || kind != KindRTT {
		t.Fatalf("kind %v err %v", kind, err)
	}
	want := RTT{Time: 1005, Ifindex: 7, MatchOnEgress: true, Source: SourceDNS, DNS: DNSInfo{QType: 28, RCode: 3, Truncated: true},
		Flow: Flow{Src: Endpoint{netip.MustParseAddr("10.0.0.2"), 80}, Dst: Endpoint{netip.MustParseAddr("10.0.0.1"), 5000}, Proto: ProtoTCP},
		RTT:  40 * time.Millisecond, MinRTT: 39 * time.Millisecond, SmoothedRTT: 41 * time.Millisecond,
		SentPackets: 10, SentBytes: 1000, RecPackets: 9, RecBytes: 900}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = d.Decode(raw, &r, &f) }); allocs != 0 {
		t.Fatalf("Decode allocates %v times", allocs)
	}
}

func TestDecodeFlowAndErrors(t *testing.T) {
	raw := make([]byte, flowRecordSize)
	binary.LittleEndian.PutUint32(raw[0:], uint32(KindFlow))
	binary.LittleEndian.PutUint64(raw[8:], 42)
	putTuple(raw[16:], netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 9, 9, 58)
	raw[60], raw[61], raw[62] = byte(FlowClosing), byte(ReasonFIN), 0
	var d Decoder
	var r RTT
	var f FlowEvent
	if kind, err := d.Decode(raw, &r, &f); err != nil || kind != KindFlow {
		t.Fatalf("kind %v err %v", kind, err)
	}
	if f.Time != 42 || f.Type != FlowClosing || f.Reason != ReasonFIN || f.TriggeredBySrc ||
		f.Flow.Src.IP != netip.MustParseAddr("fd00::1") || f.Flow.Proto != ProtoICMPv6 {
		t.Fatalf("bad flow event %+v", f)
	}
	if _, err := d.Decode(raw[:10], &r, &f); !errors.Is(err, ErrShortRecord) {
		t.Fatalf("short record: %v", err)
	}
	binary.LittleEndian.PutUint32(raw[0:], 99)
	if _, err := d.Decode(raw, &r, &f); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// TestDecodeNamed: a DNS sample with its question's name (--dns-names)
// decodes as an RTT with the name in presentation format, escapes
// included; a plain RTT record after it has no name.
func TestDecodeNamed(t *testing.T) {
	raw := make([]byte, namedRecordSize)
	binary.LittleEndian.PutUint32(raw[0:], uint32(KindRTTNamed))
	putTuple(raw[16:], netip.MustParseAddr("::ffff:192.0.2.53"), netip.MustParseAddr("::ffff:10.0.0.1"), 53, 40000, 17)
	raw[61] = byte(SourceDNS)
	binary.LittleEndian.PutUint16(raw[120:], 1)
	wire := []byte("\x03www\x07ex.am\"e\x03com\x00")
	binary.LittleEndian.PutUint16(raw[namedOffNameLen:], uint16(len(wire)))
	copy(raw[namedOffName:], wire)
	var d Decoder
	var r RTT
	var f FlowEvent
	kind, err := d.Decode(raw, &r, &f)
	if err != nil || kind != KindRTT {
		t.Fatalf("kind %v err %v", kind, err)
	}
	if want := `www.ex\046am\034e.com.`; r.DNS.Name != want || r.DNS.QType != 1 || r.Source != SourceDNS {
		t.Errorf("decoded %+v, want name %s", r.DNS, want)
	}
	if _, err := d.Decode(raw[:rttRecordSize], &r, &f); !errors.Is(err, ErrShortRecord) {
		t.Errorf("short named record: %v", err)
	}
	plain := raw[:rttRecordSize]
	binary.LittleEndian.PutUint32(plain[0:], uint32(KindRTT))
	if _, err := d.Decode(plain, &r, &f); err != nil || r.DNS.Name != "" {
		t.Errorf("plain record after a named one: name %q, err %v", r.DNS.Name, err)
	}
	for wire, want := range map[string]string{"\x00": ".", "": ".", "\x01a\xc0\x0c": "a.", "\x02a": "a."} {
		if got := DNSName([]byte(wire)); got != want {
			t.Errorf("DNSName(%q) = %q, want %q", wire, got, want)
		}
	}
}
