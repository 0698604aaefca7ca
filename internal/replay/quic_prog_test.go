package replay

// Tests of the QUIC spin bit source (bpf/id_quic_spin.h) with crafted
// short and long header packets.

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// quicPath: a is the client (port 50443), b the server on port 443.
var (
	quicPath4 = path{a: ep("10.0.0.1", 50443), b: ep("192.0.2.44", 443)}
	quicPath6 = path{a: ep("2001:db8::1", 50443), b: ep("2001:db8::44", 443)}
)

// quicShort is a 1-RTT packet: short header with the spin bit, an 8-byte
// connection id, a 4-byte packet number, then n bytes standing in for
// the protected payload.
func (p path) quicShort(fromA, spin bool, n int) []byte {
	first := byte(0x40 | 0x03) // fixed bit, packet number length 4
	if spin {
		first |= 0x20
	}
	data := append([]byte{first, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1}, payload(n)...)
	src, dst := p.ends(fromA)
	pk := p.packet(fromA)
	pk.UDP = &pktcraft.UDP{SrcPort: src.port, DstPort: dst.port, Payload: data}
	return pk.MustBytes()
}

// quicLong is a long header (Initial) packet.
func (p path) quicLong(fromA bool) []byte {
	data := append([]byte{0xc3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0}, payload(1200)...)
	src, dst := p.ends(fromA)
	pk := p.packet(fromA)
	pk.UDP = &pktcraft.UDP{SrcPort: src.port, DstPort: dst.port, Payload: data}
	return pk.MustBytes()
}

func quicConfig() loader.Config {
	c := testConfig()
	c.TrackTCP, c.TrackQUIC = false, true
	return c
}

// spinning plays a connection whose spin bit flips every rtt in both
// directions: each side sends perRTT packets per rtt, evenly spaced, the
// client's bit being floor(t/rtt) mod 2 and the server's the same shifted
// by half an rtt. It starts with a long header exchange. It returns the
// steps and, per direction, how many edges the packets carry.
func spinning(p path, rtt int64, perRTT, rtts int) (steps []step, edges [2]int) {
	steps = []step{{0, p.quicLong(true), true}, {rtt / 2, p.quicLong(false), false}}
	gap := rtt / int64(perRTT)
	var last [2]int64
	for i := range perRTT * rtts {
		at := rtt + int64(i)*gap
		c := (at / rtt) % 2
		s := ((at - rtt/2) / rtt) % 2
		for side, v := range [2]int64{c, s} {
			if i > 0 && v != last[side] {
				edges[side]++
			}
			last[side] = v
		}
		steps = append(steps,
			step{at, p.quicShort(true, c == 1, 100), true},
			step{at + gap/2, p.quicShort(false, s == 1, 1000), false})
	}
	return steps, edges
}

// quicWant is what a spinning direction with n edges reports: the first
// edge starts the measurement, the next 16 are the first window, whose
// last gives the first sample. An edge counts once a later packet confirms
// it: with one packet per RTT the last packet's edge never is.
func quicWant(edges, perRTT int) int {
	if perRTT == 1 {
		edges--
	}
	return max(0, edges-16)
}

// TestQUICSpin: a connection that spins gives samples of exactly the
// spin period (the end-to-end RTT) in each direction, from its 16th
// measured edge on, whether it sends many packets per RTT or one;
// samples name the direction of the edge and are labelled quic_spin.
func TestQUICSpin(t *testing.T) {
	const rtt = 30 * ms
	for _, c := range []struct {
		name   string
		p      path
		perRTT int
	}{{"ipv4/dense", quicPath4, 6}, {"ipv6/dense", quicPath6, 6}, {"ipv4/one-per-rtt", quicPath4, 1}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, quicConfig())
			steps, edges := spinning(c.p, rtt, c.perRTT, 40)
			h.run(steps)
			var n [2]int
			for _, r := range h.takeRTTs() {
				side := 0
				if r.Flow != c.p.udpFlow(true) {
					side = 1
					if r.Flow != c.p.udpFlow(false) {
						t.Fatalf("sample of flow %v", r.Flow)
					}
				}
				n[side]++
				if r.RTT != time.Duration(rtt) || r.Source != events.SourceQUICSpin {
					t.Errorf("sample %+v: want %v, quic_spin", r, time.Duration(rtt))
				}
			}
			if n[0] != quicWant(edges[0], c.perRTT) || n[1] != quicWant(edges[1], c.perRTT) {
				t.Errorf("samples per direction %v, want %d %d (edges %v)", n, quicWant(edges[0], c.perRTT), quicWant(edges[1], c.perRTT), edges)
			}
			// ePPing's flow events: each direction opens when the
			// other side first answers, named from the answering side.
			h.checkFlows(opening(t0, c.p.udpFlow(false), events.ReasonFirstObserved, false),
				opening(t0+rtt/2, c.p.udpFlow(true), events.ReasonFirstObserved, false))
			if s := h.stats(); s.Timestamps != 0 || s.QUICSpinRejected != 0 || s.QUICSpinRandom != 0 {
				t.Errorf("stats %+v: no timestamps, rejections or random bits expected", s)
			}
		})
	}
}

// TestQUICSpinReordering: a packet of the previous spin period that
// arrives after the edge flips the bit back: that flip is rejected (closer
// than 1/8 of the RTT estimate), the direction keeps the value of the
// accepted edge, so the next packets are no edge, and the next real edge
// is measured from the accepted one.
func TestQUICSpinReordering(t *testing.T) {
	const rtt = 30 * ms
	p := quicPath4
	steps, edges := spinning(p, rtt, 6, 40)
	// Client packets are the even steps from index 2 on: the one sent
	// at 25 RTT (an edge) overtakes its predecessor, which arrives 1 µs
	// after it.
	var at int
	for i := 2; i < len(steps); i += 2 {
		if steps[i].at == 25*rtt {
			at = i
		}
	}
	if at == 0 {
		t.Fatal("no client packet at 25 RTT")
	}
	edge, late := steps[at], steps[at-2]
	steps[at-2] = step{edge.at, edge.frame, true}
	steps[at] = step{edge.at + 1000, late.frame, true}
	checkSpinPeriods(t, p, steps, rtt, 1, quicWant(edges[0], 6))
}

// checkSpinPeriods plays steps and checks that every sample is exactly the
// spin period, that the client's direction gave want samples and that
// rejected flips were counted.
func checkSpinPeriods(t *testing.T, p path, steps []step, rtt int64, rejected uint64, want int) {
	t.Helper()
	h := newHarness(t, quicConfig())
	h.run(steps)
	var n int
	for _, r := range h.takeRTTs() {
		if r.Flow == p.udpFlow(true) {
			n++
		}
		if r.RTT != time.Duration(rtt) {
			t.Errorf("sample %v at t0%+d: want %v", r.RTT, r.Time-t0, time.Duration(rtt))
		}
	}
	if s := h.stats(); s.QUICSpinRejected != rejected || n != want {
		t.Errorf("rejected flips %d, want %d; client samples %d, want %d", s.QUICSpinRejected, rejected, n, want)
	}
}

// TestQUICSpinLateStray: a packet of the previous spin period that a
// stalled queue delivers long after the edge (0.6 RTT, far more than the
// 1/8 RTT the reordering filter allows; seen under emulation, where one
// CPU's backlog waited 146 ms) flips the bit back and forth again. Stamped
// when it arrives (live), the flip is a candidate edge that the next two
// packets reject; stamped when it was sent (a capture may keep that
// time), it is older than the last edge and ignored. Either way every
// sample stays the spin period and the count is unchanged.
func TestQUICSpinLateStray(t *testing.T) {
	const rtt = 30 * ms
	for _, c := range []struct {
		name     string
		stamped  func(sent, arrived int64) int64
		rejected uint64
	}{
		{"arrival-stamped", func(_, arrived int64) int64 { return arrived }, 1},
		{"send-stamped", func(sent, _ int64) int64 { return sent }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := quicPath4
			steps, edges := spinning(p, rtt, 6, 40)
			gap := rtt / 6
			// The client's last packet of period 24 arrives after
			// every step up to 25.6 RTT.
			var from, to int
			for i, s := range steps {
				if s.egress && s.at == 25*rtt-gap {
					from = i
				}
				if s.at <= 25*rtt+rtt*6/10 {
					to = i
				}
			}
			if from == 0 {
				t.Fatal("no client packet at 25 RTT - gap")
			}
			stray := steps[from]
			stray.at = c.stamped(stray.at, steps[to].at+1)
			reordered := append(append(append([]step{}, steps[:from]...), steps[from+1:to+1]...), stray)
			reordered = append(reordered, steps[to+1:]...)
			checkSpinPeriods(t, p, reordered, rtt, c.rejected, quicWant(edges[0], 6))
		})
	}
}

// TestQUICSpinDisabled: endpoints that disable spinning send a constant
// bit (no edges: nothing) or a random one per packet (judged random after
// a window of edges: nothing, counted per direction); long header packets
// never count.
func TestQUICSpinDisabled(t *testing.T) {
	p := quicPath4
	t.Run("constant", func(t *testing.T) {
		h := newHarness(t, quicConfig())
		for i := range int64(400) {
			h.feed(p.quicShort(i%2 == 0, true, 100), t0+i*ms, i%2 == 0)
		}
		h.checkSourced()
		if s := h.stats(); s.Flows != 1 || s.QUICSpinRandom != 0 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("random", func(t *testing.T) {
		h := newHarness(t, quicConfig())
		r := rand.New(rand.NewPCG(1, 2))
		for i := range int64(400) {
			h.feed(p.quicShort(i%2 == 0, r.IntN(2) == 1, 100), t0+i*ms, i%2 == 0)
		}
		h.checkSourced()
		if s := h.stats(); s.QUICSpinRandom != 2 {
			t.Errorf("random directions %d, want 2 (stats %+v)", s.QUICSpinRandom, s)
		}
	})
	t.Run("long-headers", func(t *testing.T) {
		h := newHarness(t, quicConfig())
		for i := range int64(100) {
			h.feed(p.quicLong(i%2 == 0), t0+i*ms, i%2 == 0)
		}
		h.checkSourced()
	})
	t.Run("other-port", func(t *testing.T) {
		h := newHarness(t, quicConfig())
		o := path{a: p.a, b: ep("192.0.2.44", 4433)}
		steps, _ := spinning(o, 30*ms, 6, 30)
		h.run(steps)
		h.checkSourced()
		if s := h.stats(); s.Flows != 0 {
			t.Errorf("stats %+v: port 4433 is not QUIC here", s)
		}
	})
}
