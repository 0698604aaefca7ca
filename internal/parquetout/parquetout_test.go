package parquetout

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

func sample(i int) *events.RTT {
	return &events.RTT{
		Time: int64(1_700_000_000_000_000_000 + i*1000),
		Flow: events.Flow{
			Src:   events.Endpoint{IP: netip.MustParseAddr("192.0.2.10"), Port: 443},
			Dst:   events.Endpoint{IP: netip.MustParseAddr("10.0.0.1"), Port: uint16(40000 + i%7)},
			Proto: events.ProtoTCP,
		},
		RTT: time.Duration(10_000_000 + i), MinRTT: 10_000_000, SmoothedRTT: time.Duration(10_000_000 + i/2),
		SentPackets: uint64(i), SentBytes: uint64(i * 1448), RecPackets: uint64(i / 2), RecBytes: uint64(i * 20),
		Source: events.Source(i % events.NumSources),
		DNS:    events.DNSInfo{QType: uint16(i % 3 * 14), RCode: uint8(i % 4), Name: []string{"", "a.example."}[i%4/2]},
	}
}

func readRows(t *testing.T, b []byte) []Row {
	t.Helper()
	rows, err := parquet.Read[Row](bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	return rows
}

// TestRoundTrip writes every record type and reads the rows back.
func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := New(&buf, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	for i := range n {
		if err := w.WriteRTT(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	fe := &events.FlowEvent{Time: 5, Flow: sample(0).Flow, Type: events.FlowClosing, Reason: events.ReasonFIN, TriggeredBySrc: true}
	dropped := &events.FlowEvent{Time: 6, Flow: events.Flow{ID: 42, Src: events.Endpoint{Port: 1}, Dst: events.Endpoint{Port: 2}, Proto: events.ProtoTCP}, Type: events.FlowOpening, Reason: events.ReasonSYN}
	for _, err := range []error{
		w.WriteFlow(fe), w.WriteFlow(dropped),
		w.WriteStats(&events.Stats{Time: 7, Packets: 3}),
		w.WriteAnonKey(&events.AnonKey{Time: 8, Scheme: "pfx", KeyID: "abc"}),
		w.Flush(), w.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	rows := readRows(t, buf.Bytes())
	if len(rows) != n+4 {
		t.Fatalf("%d rows, want %d", len(rows), n+4)
	}
	r := rows[123]
	s := sample(123)
	if r.RecordType != TypeRTT || r.Timestamp != s.Time || *r.RTT != int64(s.RTT) || *r.MinRTT != int64(s.MinRTT) ||
		*r.SmoothedRTT != int64(s.SmoothedRTT) || *r.SrcIP != "192.0.2.10" || *r.DestIP != "10.0.0.1" ||
		*r.SrcPort != 443 || *r.DestPort != int32(s.Flow.Dst.Port) || *r.Protocol != "TCP" ||
		*r.SentBytes != s.SentBytes || *r.RecPackets != s.RecPackets || *r.MatchOnEgress ||
		*r.Source != "tcp_syn" /* 123 % NumSources */ || r.DNSQType != nil {
		t.Errorf("row %+v for %+v", r, s)
	}
	// 124 % NumSources is dns: QType 124%3*14 = 14 (TYPE14), RCode 0.
	if d := rows[124]; *d.Source != "dns" || *d.DNSQType != "TYPE14" || *d.DNSRCode != "NOERROR" || *d.DNSTruncated || d.DNSName != nil {
		t.Errorf("dns row %+v", d)
	}
	if d := rows[130]; *d.Source != "dns" || *d.DNSName != "a.example." {
		t.Errorf("dns row %+v", d)
	}
	f := rows[n]
	if f.RecordType != TypeFlow || *f.FlowEvent != "closing" || *f.Reason != "FIN" || *f.TriggeredBy != "src" || f.RTT != nil {
		t.Errorf("flow row %+v", f)
	}
	d := rows[n+1]
	if d.FlowID == nil || *d.FlowID != 42 || d.SrcIP != nil || *d.SrcPort != 1 || *d.DestPort != 2 || *d.FlowEvent != "opening" {
		t.Errorf("flow row without addresses %+v", d)
	}
	st := rows[n+2]
	if st.RecordType != TypeStats || st.Record == nil || !bytes.Contains([]byte(*st.Record), []byte(`"type":"stats","packets":3`)) {
		t.Errorf("stats row %+v", st)
	}
	if k := rows[n+3]; k.RecordType != TypeAnonKey || k.Record == nil {
		t.Errorf("anon key row %+v", k)
	}
	t.Logf("%d bytes for %d samples: %.1f bytes/sample", buf.Len(), n, float64(buf.Len())/n)
}

// TestMinimal leaves the counters null.
func TestMinimal(t *testing.T) {
	var buf bytes.Buffer
	w, _ := New(&buf, format.Options{Minimal: true})
	_ = w.WriteRTT(sample(1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := readRows(t, buf.Bytes())[0]
	if r.SentPackets != nil || r.SentBytes != nil || r.RecPackets != nil || r.RecBytes != nil || r.RTT == nil {
		t.Errorf("--minimal row %+v", r)
	}
}

// TestRestart checks that every destination gets a complete file.
func TestRestart(t *testing.T) {
	var bufs [3]bytes.Buffer
	cur := 0
	sw := &switchWriter{w: &bufs[0]}
	w, _ := New(sw, format.Options{})
	for i := range 30 {
		_ = w.WriteRTT(sample(i))
		if i%10 == 9 && i < 29 {
			if err := w.Restart(func() error { cur++; sw.w = &bufs[cur]; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range bufs {
		rows := readRows(t, bufs[i].Bytes())
		if len(rows) != 10 || rows[0].Timestamp != sample(i*10).Time {
			t.Errorf("file %d: %d rows starting %d", i, len(rows), rows[0].Timestamp)
		}
	}
	if err := w.WriteRTT(sample(0)); !errors.Is(err, format.ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
}

type switchWriter struct{ w *bytes.Buffer }

func (s *switchWriter) Write(p []byte) (int, error) { return s.w.Write(p) }
