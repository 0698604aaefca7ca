package replay

// The per-CPU prefix slots (agg_slots in bpf/agg.h) count a prefix's
// traffic in place of its hash-map entry; user space folds them into the
// interval's records. With more prefixes than slots, some prefixes share
// a slot: the first one counts there, the others in their entries, and
// untracked packets hit the slots too. A flow direction remembers the
// slot its prefixes counted in (agg_ref in bpf/flow.h); in the next
// intervals, with the clients in the other order, other prefixes fill
// those slots first, and the flow must notice. Every packet must still be
// counted once, for its prefix, in its interval.

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

func TestAggregateSlotsCountEveryPacketOnce(t *testing.T) {
	const clients = 600 // > 2x the 256 slots of an epoch
	cfg := aggConfig()
	cfg.PrefixMapSize = 2048
	h := newAggHarness(t, cfg, time.Second)
	base := t0 - t0%int64(time.Second)
	server := ep("192.168.0.1", 80)
	paths := make([]path, clients)
	for i := range paths {
		paths[i] = path{a: ep(fmt.Sprintf("10.%d.%d.1", i/200, i%200), uint16(1000+i)), b: server}
	}
	const l2 = 14 // Ethernet header, counted in ePPing's bytes only
	dataLen := uint64(len(paths[0].data(true, 1, 0, 100)) - l2)
	udp := func(p path) []byte { // untracked, server to client
		pk := p.packet(false)
		pk.UDP = &pktcraft.UDP{SrcPort: 53, DstPort: 5353, Payload: payload(20)}
		return pk.MustBytes()
	}
	udpLen := uint64(len(udp(paths[0])) - l2)

	// rounds[interval]: per round, each client sends two tracked segments
	// and receives one untracked datagram; odd intervals take the clients
	// in reverse order.
	rounds := []int{3, 1, 2}
	for iv, n := range rounds {
		at := base + int64(iv)*int64(time.Second)
		for r := range n {
			for j := range paths {
				i := j
				if iv%2 == 1 {
					i = len(paths) - 1 - j
				}
				p := paths[i]
				ts := uint32(1 + iv*100 + r)
				at0 := at + int64(r)*100*ms + int64(j)*10*int64(time.Microsecond)
				h.feed(p.data(true, ts, 0, 100), at0, true)
				h.feed(udp(p), at0+1, false)
				h.feed(p.data(true, ts, 0, 100), at0+2, true)
			}
		}
	}
	if err := h.a.Finish(); err != nil {
		t.Fatal(err)
	}

	type key = intervalPrefix
	got := recordsByInterval(t, h.recs, base, time.Second)
	srv := netip.PrefixFrom(server.ip, 24).Masked().String()
	for iv, n := range rounds {
		n := uint64(n)
		for i, p := range paths {
			k := key{int64(iv), netip.PrefixFrom(p.a.ip, 24).Masked().String()}
			g, ok := got[k]
			if !ok {
				t.Fatalf("no record for client %d %v", i, k)
			}
			checkTraffic(t, k, "rx tcp", g.RX.Packets[events.ClassTCP], g.RX.Bytes[events.ClassTCP], 2*n, 2*n*dataLen)
			checkTraffic(t, k, "tx udp", g.TX.Packets[events.ClassUDP], g.TX.Bytes[events.ClassUDP], n, n*udpLen)
			if g.TX.Packets[events.ClassTCP] != 0 || g.RX.Packets[events.ClassUDP] != 0 {
				t.Errorf("%v: tx tcp %d, rx udp %d: want 0", k, g.TX.Packets[events.ClassTCP], g.RX.Packets[events.ClassUDP])
			}
		}
		k := key{int64(iv), srv}
		g, ok := got[k]
		if !ok {
			t.Fatalf("no record for the server %v", k)
		}
		checkTraffic(t, k, "tx tcp", g.TX.Packets[events.ClassTCP], g.TX.Bytes[events.ClassTCP], 2*n*clients, 2*n*clients*dataLen)
		checkTraffic(t, k, "rx udp", g.RX.Packets[events.ClassUDP], g.RX.Bytes[events.ClassUDP], n*clients, n*clients*udpLen)
	}
	if len(got) != len(rounds)*(clients+1) {
		t.Errorf("%d records, want %d", len(got), len(rounds)*(clients+1))
	}
}

func checkTraffic(t *testing.T, k any, what string, pkts, bytes, wantPkts, wantBytes uint64) {
	t.Helper()
	if pkts != wantPkts || bytes != wantBytes {
		t.Errorf("%v %s: %d packets, %d bytes; want %d, %d", k, what, pkts, bytes, wantPkts, wantBytes)
	}
}
