package pdm

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/probe"
)

// TestIntervalAccumulators feeds A's programs an exchange in interval
// mode and checks what the kernel folded against hand-computed values, to
// the ns. The deltas are SPEC's vectors: 0xE35F/34 is 999,988.65 ns
// (999,989 rounded), 0xE8D4/24 999.99 (1,000), 0xDE0B/44 999,992,631.32,
// 0xA688/46 2,999,960,301.78, 0xEE6B/14 0.99999744 (1).
func TestIntervalAccumulators(t *testing.T) {
	h := newHarness(t, Config{Report: ReportInterval})
	tc := transports()[1] // UDP, A:5353 -> B:53
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353, Payload: []byte("answer")}}
	other := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5354}}

	const t0 = 5_000_000_000
	ms := uint64(time.Millisecond)
	p := binary.BigEndian.Uint16(h.egress(tc.pkt.MustBytes(), t0)[60:62])
	// Reply to p after 3 ms, DTLR 999,989 ns: network RTT 2,000,011.
	h.ingress(withPDM(reply, 34, 0, 0x7000, p, 0xE35F, 0), t0+3*ms)
	// A sends p+1 at +5 ms; the reply at +7 ms: round trip 2 ms, DTLR
	// 1,000 ns (network RTT 1,999,000), DTLS 999,992,631.
	h.egress(tc.pkt.MustBytes(), t0+5*ms)
	h.ingress(withPDM(reply, 24, 44, 0x7001, p+1, 0xE8D4, 0xDE0B), t0+7*ms)
	// A stale PSNLR: DTLR 2,999,960,302 and DTLS 1, no network RTT.
	h.ingress(withPDM(reply, 46, 14, 0x7002, p, 0xA688, 0xEE6B), t0+8*ms)
	// No PDM: nothing to fold.
	h.ingress(reply.MustBytes(), t0+9*ms)
	// Another 5-tuple, DTLR 1 ns.
	h.ingress(withPDM(other, 14, 0, 1, 0, 0xEE6B, 0), t0+9*ms)

	if evs := h.events(); len(evs) != 0 {
		t.Errorf("%d ring buffer events in interval mode, want 0", len(evs))
	}
	c := h.counters()
	if c[probe.PdmPdmCounterPDM_C_FOLDED] != 4 || c[probe.PdmPdmCounterPDM_C_PDM_SEEN] != 4 || c[probe.PdmPdmCounterPDM_C_EVENTS] != 0 {
		t.Errorf("counters %v, want folded 4, pdm_seen 4, events 0", c.Map())
	}
	accs, err := h.objs.Collect(0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint16]Accum{
		5353: {
			DTLR:       Stat{Count: 3, Sum: 999_989 + 1_000 + 2_999_960_302, Min: 1_000, Max: 2_999_960_302},
			DTLS:       Stat{Count: 2, Sum: 999_992_631 + 1, Min: 1, Max: 999_992_631},
			NetworkRTT: Stat{Count: 2, Sum: 2_000_011 + 1_999_000, Min: 1_999_000, Max: 2_000_011},
		},
		5354: {DTLR: Stat{Count: 1, Sum: 1, Min: 1, Max: 1}},
	}
	if len(accs) != len(want) {
		t.Fatalf("%d accumulators, want %d: %+v", len(accs), len(want), accs)
	}
	for _, a := range accs {
		w, ok := want[a.Key.Tuple.Lport]
		if !ok || a.DTLR != w.DTLR || a.DTLS != w.DTLS || a.NetworkRTT != w.NetworkRTT {
			t.Errorf("port %d: got %+v\nwant %+v", a.Key.Tuple.Lport, a, w)
		}
		r := NewIntervalRecord(&a, time.Unix(10, 0), time.Second)
		if r.SrcIP != hostB.String() || r.SrcPort != 53 || r.DestIP != hostA.String() || r.Direction != "ingress" ||
			r.Protocol != "UDP" || r.Timestamp != 10e9 || r.IntervalNs != 1e9 {
			t.Errorf("record %+v", r)
		}
	}
	// The same values through the per-packet decoder.
	if d := Decode(0xE35F, 34) + Decode(0xE8D4, 24) + Decode(0xA688, 46); uint64(d) != want[5353].DTLR.Sum {
		t.Errorf("Decode sum %d, want %d", d, want[5353].DTLR.Sum)
	}

	// The next interval starts empty: only what arrives after Collect.
	h.ingress(withPDM(reply, 14, 0, 0x7003, 0, 0xEE6B, 0), t0+10*ms)
	accs, err = h.objs.Collect(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(accs) != 1 || accs[0].DTLR != (Stat{Count: 1, Sum: 1, Min: 1, Max: 1}) || accs[0].Key.Epoch != 1 {
		t.Errorf("second interval %+v, want one DTLR of 1 ns in epoch 1", accs)
	}
	if accs, err = h.objs.Collect(0); err != nil || len(accs) != 0 {
		t.Errorf("third interval %+v (%v), want none", accs, err)
	}
}

// TestIntervalPassive: in passive mode the network RTT of a paired packet
// is folded under its direction.
func TestIntervalPassive(t *testing.T) {
	h := newHarness(t, Config{Passive: true, Report: ReportInterval})
	req := transports()[1].pkt
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}}
	// B replies to PSN 10 with DTLR 999,989 ns; A's next names it with
	// DTLS 999,992,631: network RTT 999,992,631 - 999,989.
	h.ingress(withPDM(reply, 34, 0, 20, 10, 0xE35F, 0), 1000)
	h.egress(withPDM(req, 0, 44, 11, 20, 0, 0xDE0B), 2000)
	accs, err := h.objs.Collect(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(accs) != 2 {
		t.Fatalf("%d accumulators, want 2: %+v", len(accs), accs)
	}
	for _, a := range accs {
		r := NewIntervalRecord(&a, time.Unix(0, 0), time.Second)
		switch r.Direction {
		case "ingress":
			if a.DTLR != (Stat{1, 999_989, 999_989, 999_989}) || a.DTLS.Count != 0 || a.NetworkRTT.Count != 0 {
				t.Errorf("ingress %+v", a)
			}
		case "egress":
			n := uint64(999_992_631 - 999_989)
			if a.DTLS != (Stat{1, 999_992_631, 999_992_631, 999_992_631}) || a.NetworkRTT != (Stat{1, n, n, n}) ||
				r.SrcIP != hostA.String() || r.SrcPort != 5353 {
				t.Errorf("egress %+v, record %+v", a, r)
			}
		}
	}
}
