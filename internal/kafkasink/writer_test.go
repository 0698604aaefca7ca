package kafkasink

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/recordpb"
	"github.com/rttscope/rttscope/internal/testservers"
)

// sample is record i of a workload of flows flows: flow i%flows, its
// sample number i/flows as Time (so a flow's times ascend), replies in
// both directions.
func sample(i, flows int) events.RTT {
	f := i % flows
	cli := events.Endpoint{IP: netip.AddrFrom4([4]byte{10, 1, 0, byte(f + 1)}), Port: uint16(40000 + f)}
	srv := events.Endpoint{IP: netip.AddrFrom4([4]byte{192, 0, 2, 1}), Port: 443}
	e := events.RTT{Time: int64(i / flows), RTT: time.Duration(f+1) * time.Millisecond, Flow: events.Flow{Src: srv, Dst: cli, Proto: events.ProtoTCP}}
	if i%2 == 1 {
		e.Flow = e.Flow.Reverse()
	}
	return e
}

// flowOf returns the flow number of a sample.
func flowOf(e *events.RTT) int { return int(e.RTT/time.Millisecond) - 1 }

// checkDelivered reads the topic and checks that it holds samples 0..n-1
// of the workload exactly once, each flow's in order in one partition.
func checkDelivered(t *testing.T, k *testservers.Kafka, topic, format string, n, flows int) {
	t.Helper()
	parts := k.ReadAll(t, topic)
	next := make([]int64, flows)
	where := make([]int32, flows)
	total := 0
	for p, recs := range parts {
		for _, r := range recs {
			var e events.RTT
			decode(t, format, r, &e)
			f := flowOf(&e)
			if want := string(flowKey(nil, &e.Flow)); string(r.Key) != want {
				t.Fatalf("message key %q, want %q", r.Key, want)
			}
			if next[f] == 0 {
				where[f] = p
			} else if where[f] != p {
				t.Fatalf("flow %d in partitions %d and %d", f, where[f], p)
			}
			if e.Time != next[f] {
				t.Fatalf("flow %d: sample %d after %d (duplicate, loss or reordering)", f, e.Time, next[f]-1)
			}
			next[f]++
			total++
		}
	}
	if total != n {
		t.Fatalf("%d messages in the topic, want %d", total, n)
	}
	t.Logf("%d messages in %d partitions, every flow's in order", total, len(parts))
}

// decode fills e from a message value of the format.
func decode(t *testing.T, format string, r *kgo.Record, e *events.RTT) {
	t.Helper()
	if format == "protobuf" {
		var rec recordpb.Record
		if err := proto.Unmarshal(r.Value, &rec); err != nil {
			t.Fatal(err)
		}
		p := rec.GetRtt()
		if p == nil {
			t.Fatalf("not an RTT record: %v", &rec)
		}
		src, _ := netip.AddrFromSlice(p.Flow.Src.Ip)
		dst, _ := netip.AddrFromSlice(p.Flow.Dst.Ip)
		e.Time, e.RTT = p.Timestamp, time.Duration(p.RttNs)
		e.Flow = events.Flow{Src: events.Endpoint{IP: src, Port: uint16(p.Flow.Src.Port)}, Dst: events.Endpoint{IP: dst, Port: uint16(p.Flow.Dst.Port)}, Proto: events.Protocol(p.Flow.Protocol)}
		return
	}
	var j struct {
		Timestamp        int64
		RTT              int64
		SrcIP            string `json:"src_ip"`
		DstIP            string `json:"dest_ip"`
		SrcPort, DstPort uint16
		Protocol         string
	}
	j.SrcPort, j.DstPort = 0, 0
	var ports struct {
		Src uint16 `json:"src_port"`
		Dst uint16 `json:"dest_port"`
	}
	if err := json.Unmarshal(r.Value, &j); err != nil {
		t.Fatalf("%q: %v", r.Value, err)
	}
	if err := json.Unmarshal(r.Value, &ports); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(r.Value), "\n") || j.Protocol != "TCP" {
		t.Fatalf("not one jsonl record of a TCP sample: %q", r.Value)
	}
	e.Time, e.RTT = j.Timestamp, time.Duration(j.RTT)
	e.Flow = events.Flow{Src: events.Endpoint{IP: netip.MustParseAddr(j.SrcIP), Port: ports.Src},
		Dst: events.Endpoint{IP: netip.MustParseAddr(j.DstIP), Port: ports.Dst}, Proto: events.ProtoTCP}
}

func newWriter(t *testing.T, spec string) *Writer {
	t.Helper()
	o, err := ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	o.SpoolDir, o.SpoolSize = t.TempDir(), 64<<20
	w, err := New(o, format.Options{}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func writeSamples(t *testing.T, w *Writer, from, to, flows int) {
	t.Helper()
	for i := from; i < to; i++ {
		e := sample(i, flows)
		if err := w.WriteRTT(&e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWriterSpoolsWhileBrokerDown runs a real broker: samples of 40 flows
// are produced in both formats; in the middle the broker is stopped, the
// client's buffer (100 messages) fills, the rest goes to the spool, and
// when the broker is back everything arrives exactly once and each flow's
// samples in order, in one partition.
func TestWriterSpoolsWhileBrokerDown(t *testing.T) {
	k := testservers.StartKafka(t)
	const flows, n = 40, 6000
	for _, f := range []string{"jsonl", "protobuf"} {
		k.CreateTopic(t, "rtt-"+f, 4)
	}
	for _, f := range []string{"protobuf", "jsonl"} {
		t.Run(f, func(t *testing.T) {
			topic := "rtt-" + f
			w := newWriter(t, fmt.Sprintf("brokers=%s,topic=%s,format=%s,buffer=100", k.Addr, topic, f))
			writeSamples(t, w, 0, n/3, flows)
			if f == "protobuf" {
				// Everything so far acknowledged, then the broker goes.
				// Flush moves the spool on, as the monitor's every 200 ms.
				for deadline := time.Now().Add(time.Minute); w.acked.Load() < n/3; time.Sleep(10 * time.Millisecond) {
					if err := w.Flush(); err != nil {
						t.Fatal(err)
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d of %d acknowledged", w.acked.Load(), n/3)
					}
				}
				k.Stop()
			}
			writeSamples(t, w, n/3, 2*n/3, flows)
			if f == "protobuf" {
				if w.spooled.Load() == 0 {
					t.Fatal("nothing spooled while the broker was down")
				}
				k.Start()
			}
			writeSamples(t, w, 2*n/3, n, flows)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var s events.SinkStats
			w.Counters(&s)
			t.Logf("%+v", s)
			if s.Acked != n || s.Produced != n || s.Dropped != 0 {
				t.Fatalf("counts %+v, want %d produced and acknowledged", s, n)
			}
			checkDelivered(t, k, topic, f, n, flows)
		})
	}
}
