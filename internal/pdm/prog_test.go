package pdm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/rttscope/rttscope/internal/nsrun"
	"github.com/rttscope/rttscope/internal/pdm/pdmtest"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
)

var (
	hostA = pdmtest.HostA
	hostB = pdmtest.HostB
)

// skbCtx is a struct __sk_buff for BPF_PROG_TEST_RUN with the fields the
// tests set, at the offsets of the running kernel's BTF.
type skbCtx struct {
	buf                    []byte
	tstamp, gsoSegs, gsoSz int
}

func newSkbCtx(t testing.TB) *skbCtx {
	t.Helper()
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatalf("kernel BTF: %v", err)
	}
	var skb *btf.Struct
	if err := spec.TypeByName("__sk_buff", &skb); err != nil {
		t.Fatalf("__sk_buff: %v", err)
	}
	c := &skbCtx{buf: make([]byte, skb.Size), tstamp: -1, gsoSegs: -1, gsoSz: -1}
	for _, m := range skb.Members {
		switch m.Name {
		case "tstamp":
			c.tstamp = int(m.Offset.Bytes())
		case "gso_segs":
			c.gsoSegs = int(m.Offset.Bytes())
		case "gso_size":
			c.gsoSz = int(m.Offset.Bytes())
		}
	}
	if c.tstamp < 0 || c.gsoSegs < 0 || c.gsoSz < 0 {
		t.Fatalf("__sk_buff lacks tstamp/gso_segs/gso_size")
	}
	return c
}

type harness struct {
	t    *testing.T
	objs *Objects
	ctx  *skbCtx
	rb   *ringbuf.Reader
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	testutil.RequireRoot(t)
	if cfg.MapSize == 0 {
		cfg.MapSize = DefaultMapSize
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = DefaultLifetime
	}
	cfg.TstampClock = true
	objs, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = objs.Close() })
	rb, err := ringbuf.NewReader(objs.PdmEvents)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rb.Close() })
	return &harness{t: t, objs: objs, ctx: newSkbCtx(t), rb: rb}
}

// run runs prog on frame at time ts (ns) and returns the packet after it.
func (h *harness) run(prog *ebpf.Program, frame []byte, ts uint64, gsoSize uint32) []byte {
	h.t.Helper()
	binary.NativeEndian.PutUint64(h.ctx.buf[h.ctx.tstamp:], ts)
	binary.NativeEndian.PutUint32(h.ctx.buf[h.ctx.gsoSz:], gsoSize)
	segs := uint32(0)
	if gsoSize > 0 {
		segs = 2
	}
	binary.NativeEndian.PutUint32(h.ctx.buf[h.ctx.gsoSegs:], segs)
	out := make([]byte, len(frame)+256)
	ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: out, Context: h.ctx.buf})
	if err != nil {
		h.t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	if int32(ret) != -1 {
		h.t.Fatalf("program returned %d, want TC_NEXT (-1)", int32(ret))
	}
	return out
}

func (h *harness) egress(frame []byte, ts uint64) []byte {
	return h.run(h.objs.PdmTcEgress, frame, ts, 0)
}

func (h *harness) ingress(frame []byte, ts uint64) []byte {
	return h.run(h.objs.PdmTcIngress, frame, ts, 0)
}

func (h *harness) counters() Counters {
	h.t.Helper()
	c, err := h.objs.ReadCounters()
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// events drains the ring buffer.
func (h *harness) events() []probe.PdmPdmEvent {
	h.t.Helper()
	var evs []probe.PdmPdmEvent
	var rec ringbuf.Record
	err := drainRing(h.rb, &rec, func(raw []byte) error {
		var e probe.PdmPdmEvent
		if err := binary.Read(bytes.NewReader(raw), binary.NativeEndian, &e); err != nil {
			return err
		}
		evs = append(evs, e)
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func (h *harness) state(k probe.PdmPdmKey) (probe.PdmPdmState, bool) {
	var st probe.PdmPdmState
	err := h.objs.PdmFlows.Lookup(&k, &st)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return st, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return st, true
}

func key(local, remote netip.Addr, lport, rport uint16, proto uint8) probe.PdmPdmKey {
	return probe.PdmPdmKey{Local: local.As16(), Remote: remote.As16(), Lport: lport, Rport: rport, Proto: proto}
}

// The three transports PDM covers, A to B, and the key of A's side.
func transports() []struct {
	name string
	pkt  pktcraft.Packet
	key  probe.PdmPdmKey
} {
	return []struct {
		name string
		pkt  pktcraft.Packet
		key  probe.PdmPdmKey
	}{
		{"TCP", pktcraft.Packet{Src: hostA, Dst: hostB, TCP: &pktcraft.TCP{SrcPort: 40000, DstPort: 443, Seq: 7, ACK: true, Ack: 9, TSval: 1, TSecr: 2, Payload: []byte("hello")}},
			key(hostA, hostB, 40000, 443, 6)},
		{"UDP", pktcraft.Packet{Src: hostA, Dst: hostB, UDP: &pktcraft.UDP{SrcPort: 5353, DstPort: 53, Payload: []byte("query")}},
			key(hostA, hostB, 5353, 53, 17)},
		{"ICMPv6", pktcraft.Packet{Src: hostA, Dst: hostB, ICMPEcho: &pktcraft.ICMPEcho{ID: 0x1234, Seq: 1, Payload: []byte("ping")}},
			key(hostA, hostB, 0x1234, 0x1234, 58)},
	}
}

// withPDM is pkt with the PDM header egress would insert, built by
// pktcraft (an encoder independent of the BPF one).
func withPDM(pkt pktcraft.Packet, sDTLR, sDTLS uint8, psntp, psnlr, dtlr, dtls uint16) []byte {
	return pdmtest.WithPDM(pkt, sDTLR, sDTLS, psntp, psnlr, dtlr, dtls)
}

// checkL4Checksum verifies the transport checksum of an IPv6 frame with
// the given L4 offset.
func checkL4Checksum(t *testing.T, frame []byte, l4 int, proto uint8) {
	t.Helper()
	src := netip.AddrFrom16([16]byte(frame[22:38]))
	dst := netip.AddrFrom16([16]byte(frame[38:54]))
	if c := pktcraft.PseudoChecksum(src, dst, proto, frame[l4:]); c != 0 && c != 0xffff {
		t.Errorf("transport checksum invalid after insertion (sum %#04x)", c)
	}
}

func TestInsertByteExact(t *testing.T) {
	for _, tc := range transports() {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			orig := tc.pkt.MustBytes()
			out := h.egress(orig, 1_000_000)
			st, ok := h.state(tc.key)
			if !ok {
				t.Fatal("no state for the 5-tuple after egress")
			}
			psn := st.PsnNext - 1
			want := withPDM(tc.pkt, 0, 0, psn, 0, 0, 0)
			if got := out[:len(want)]; !bytes.Equal(got, want) {
				t.Fatalf("egress output differs:\n got %x\nwant %x", got, want)
			}
			// payload length grew by 16, L4 bytes (and checksum) unchanged
			if pl := binary.BigEndian.Uint16(out[18:20]); int(pl) != len(orig)-54+16 {
				t.Errorf("payload length %d, want %d", pl, len(orig)-54+16)
			}
			if !bytes.Equal(out[70:len(want)], orig[54:]) {
				t.Error("transport header or payload changed")
			}
			checkL4Checksum(t, out[:len(want)], 70, tc.key.Proto)
			if c := h.counters(); c[probe.PdmPdmCounterPDM_C_INSERTED] != 1 {
				t.Errorf("inserted = %d, want 1", c[probe.PdmPdmCounterPDM_C_INSERTED])
			}
		})
	}
}

// TestExchange runs A's programs through send, receive, send and checks
// every PDM field and the ingress record against hand-computed values.
func TestExchange(t *testing.T) {
	h := newHarness(t, Config{})
	tc := transports()[1] // UDP
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353, Payload: []byte("answer")}}

	const t0 = 5_000_000_000
	out := h.egress(tc.pkt.MustBytes(), t0)
	p := binary.BigEndian.Uint16(out[60:62])
	// B answers 3 ms later (as A sees it); B held the query 1 ms.
	const peerPSN = 0x7000
	dv, ds := Encode(uint64(time.Millisecond))
	t1 := uint64(t0 + 3*time.Millisecond)
	in := withPDM(reply, ds, 0, peerPSN, p, dv, 0)
	if got := h.ingress(in, t1); !bytes.Equal(got[:len(in)], in) {
		t.Fatal("ingress changed the packet")
	}
	evs := h.events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	r := toRecord(t, &evs[0], 0)
	if r.PSNThisPkt != peerPSN || r.PSNLastRecv != p || r.SrcPort != 53 || r.DestPort != 5353 || r.Protocol != "UDP" ||
		r.SrcIP != hostB.String() || r.Direction != "ingress" {
		t.Errorf("record %+v", r)
	}
	if r.RoundTrip == nil || *r.RoundTrip != int64(3*time.Millisecond) {
		t.Fatalf("round_trip %v, want 3 ms", r.RoundTrip)
	}
	if want := int64(3*time.Millisecond) - int64(Decode(dv, ds)); r.NetworkRTT == nil || *r.NetworkRTT != want {
		t.Errorf("network_rtt %v, want %d", r.NetworkRTT, want)
	}
	// A sends again 2 ms after the reply: DTLR 2 ms, DTLS 3 ms.
	t2 := t1 + uint64(2*time.Millisecond)
	out = h.egress(tc.pkt.MustBytes(), t2)
	v2, s2 := Encode(uint64(2 * time.Millisecond))
	v3, s3 := Encode(uint64(3 * time.Millisecond))
	want := withPDM(tc.pkt, s2, s3, p+1, peerPSN, v2, v3)
	if !bytes.Equal(out[:len(want)], want) {
		t.Fatalf("second egress:\n got %x\nwant %x", out[:len(want)], want)
	}
	// PSNs wrap: state with psn 0xffff sends 0xffff then 0.
	k := tc.key
	st, _ := h.state(k)
	st.PsnNext = 0xffff
	if err := h.objs.PdmFlows.Put(&k, &st); err != nil {
		t.Fatal(err)
	}
	for _, wantPSN := range []uint16{0xffff, 0} {
		out = h.egress(tc.pkt.MustBytes(), t2+1000)
		if got := binary.BigEndian.Uint16(out[60:62]); got != wantPSN {
			t.Errorf("PSN %#x, want %#x", got, wantPSN)
		}
	}
}

func TestFirstPSNRandom(t *testing.T) {
	h := newHarness(t, Config{})
	seen := map[uint16]bool{}
	for i := range 8 {
		pkt := pktcraft.Packet{Src: hostA, Dst: hostB, UDP: &pktcraft.UDP{SrcPort: uint16(1000 + i), DstPort: 53}}
		out := h.egress(pkt.MustBytes(), 1000)
		seen[binary.BigEndian.Uint16(out[60:62])] = true
	}
	if len(seen) < 4 { // 8 draws of 16 bits: fewer than 4 distinct is ~1e-12
		t.Errorf("first PSNs not random: %v", seen)
	}
}

func TestUnchanged(t *testing.T) {
	udp := &pktcraft.UDP{SrcPort: 1, DstPort: 2, Payload: []byte("x")}
	cases := []struct {
		name    string
		pkt     pktcraft.Packet
		counter probe.PdmPdmCounter
		zeroLen bool // payload length 0, as in a jumbogram
	}{
		{"jumbogram", pktcraft.Packet{Src: hostA, Dst: hostB, IPv6ExtHeaders: []pktcraft.ExtHeader{pktcraft.HopByHop(0xc2, 4, 0, 0, 0x10, 0)}, UDP: udp}, probe.PdmPdmCounterPDM_C_SKIP_EXT_HDR, true},
		{"hop-by-hop over 256 bytes", pktcraft.Packet{Src: hostA, Dst: hostB, IPv6ExtHeaders: []pktcraft.ExtHeader{pktcraft.HopByHop(pktcraft.OptRaw(0x1e, 255, make([]byte, 255)...)...)}, UDP: udp}, probe.PdmPdmCounterPDM_C_SKIP_EXT_HDR, false},
		{"hop-by-hop then fragment", pktcraft.Packet{Src: hostA, Dst: hostB, IPv6ExtHeaders: []pktcraft.ExtHeader{pktcraft.HopByHop(), pktcraft.FragmentHeader(0, true, 99)}, UDP: udp}, probe.PdmPdmCounterPDM_C_FRAGMENT, false},
		{"destination options", pktcraft.Packet{Src: hostA, Dst: hostB, IPv6ExtHeaders: []pktcraft.ExtHeader{pktcraft.DestOpts(pktcraft.OptRaw(0x1e, 2, 0, 0)...)}, UDP: udp}, probe.PdmPdmCounterPDM_C_SKIP_EXT_HDR, false},
		{"existing PDM", pktcraft.Packet{Src: hostA, Dst: hostB, IPv6ExtHeaders: []pktcraft.ExtHeader{pktcraft.DestOpts(pktcraft.PDMOption(0, 0, 1, 2, 3, 4)...)}, UDP: udp}, probe.PdmPdmCounterPDM_C_SKIP_EXT_HDR, false},
		{"fragment", pktcraft.Packet{Src: hostA, Dst: hostB, IPv6ExtHeaders: []pktcraft.ExtHeader{pktcraft.FragmentHeader(0, true, 99)}, UDP: udp}, probe.PdmPdmCounterPDM_C_FRAGMENT, false},
		{"neighbor solicitation", pktcraft.Packet{Src: hostA, Dst: hostB, ICMP: &pktcraft.ICMP{Type: 135, Body: make([]byte, 20)}}, probe.PdmPdmCounterPDM_C_SKIP_PROTO, false},
		{"IPv4", pktcraft.Packet{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"), UDP: udp}, probe.PdmPdmCounterPDM_C_SKIP_NOT_IPV6, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			in := tc.pkt.MustBytes()
			if tc.zeroLen {
				in[18], in[19] = 0, 0
			}
			if out := h.egress(in, 1000); !bytes.Equal(out[:len(in)], in) || out[len(in)] != 0 {
				t.Fatalf("packet changed:\n got %x\nwant %x", out[:len(in)+16], in)
			}
			c := h.counters()
			if c[tc.counter] != 1 || c[probe.PdmPdmCounterPDM_C_INSERTED] != 0 {
				t.Errorf("counters %v", c.Map())
			}
		})
	}
}

// TestInsertAfterExtHeaders: with hop-by-hop and routing headers, PDM
// goes after them (RFC 8200's order), byte for byte as pktcraft builds it.
func TestInsertAfterExtHeaders(t *testing.T) {
	sixteen := make([]byte, 14) // with the two fixed bytes: a 16-byte hop-by-hop header
	cases := []struct {
		name string
		ext  []pktcraft.ExtHeader
	}{
		{"hop-by-hop", []pktcraft.ExtHeader{pktcraft.HopByHop()}},
		{"routing", []pktcraft.ExtHeader{pktcraft.RoutingHeader(4, 1, hostB.As16())}},
		{"hop-by-hop and routing", []pktcraft.ExtHeader{pktcraft.HopByHop(pktcraft.OptRaw(0x1e, 12, sixteen[:12]...)...), pktcraft.RoutingHeader(4, 0, hostA.As16(), hostB.As16())}},
	}
	for _, tc := range cases {
		for _, tr := range transports() {
			t.Run(tc.name+"/"+tr.name, func(t *testing.T) {
				h := newHarness(t, Config{})
				pkt := tr.pkt
				pkt.IPv6ExtHeaders = tc.ext
				orig := pkt.MustBytes()
				out := h.egress(orig, 1000)
				st, ok := h.state(tr.key)
				if !ok {
					t.Fatal("no state for the 5-tuple after egress")
				}
				pkt.IPv6ExtHeaders = append(append([]pktcraft.ExtHeader(nil), tc.ext...),
					pktcraft.DestOpts(pktcraft.PDMOption(0, 0, st.PsnNext-1, 0, 0, 0)...))
				f := pkt.MustBuild()
				want := f.Data
				if !bytes.Equal(out[:len(want)], want) {
					t.Fatalf("egress output differs:\n got %x\nwant %x", out[:len(want)], want)
				}
				checkL4Checksum(t, out[:len(want)], f.L4, tr.key.Proto)
			})
		}
	}
}

func TestGSOUnchanged(t *testing.T) {
	h := newHarness(t, Config{})
	pkt := transports()[0].pkt
	pkt.TCP.Payload = make([]byte, 3000)
	in := pkt.MustBytes()
	out := h.run(h.objs.PdmTcEgress, in, 1000, 1400)
	if !bytes.Equal(out[:len(in)], in) {
		t.Fatal("GSO packet changed")
	}
	if c := h.counters(); c[probe.PdmPdmCounterPDM_C_SKIP_GSO] != 1 {
		t.Errorf("counters %v", c.Map())
	}
}

// TestMTU runs the egress program in a namespace of its own whose
// loopback (the device BPF_PROG_TEST_RUN uses) has an MTU of 1280: a
// packet of 1264 bytes (IPv6) grows to 1280 and gets PDM, one of 1265
// passes unchanged.
func TestMTU(t *testing.T) {
	h := newHarness(t, Config{})
	ns := fmt.Sprintf("rspdm-%d-mtu", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "mtu", "1280", "up").CombinedOutput(); err != nil {
		t.Fatalf("set lo mtu: %v: %s", err, out)
	}
	for _, l3 := range []int{1264, 1265} {
		pkt := pktcraft.Packet{Src: hostA, Dst: hostB, UDP: &pktcraft.UDP{SrcPort: 9, DstPort: 9, Payload: make([]byte, l3-48)}}
		in := pkt.MustBytes()
		var out []byte
		if err := nsrun.Named(ns, func() error { out = h.egress(in, 1000); return nil }); err != nil {
			t.Fatal(err)
		}
		inserted := out[20] == 60
		if inserted != (l3 == 1264) {
			t.Errorf("IPv6 length %d: inserted = %v", l3, inserted)
		}
		if !inserted && !bytes.Equal(out[:len(in)], in) {
			t.Errorf("IPv6 length %d: packet changed", l3)
		}
	}
	c := h.counters()
	if c[probe.PdmPdmCounterPDM_C_SKIP_MTU] != 1 || c[probe.PdmPdmCounterPDM_C_INSERTED] != 1 {
		t.Errorf("counters %v", c.Map())
	}
}

func TestIngressMalformed(t *testing.T) {
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}}
	short := pktcraft.OptRaw(0x0f, 8, 1, 2, 3, 4, 5, 6, 7, 8)
	cases := []struct {
		name string
		ext  pktcraft.ExtHeader
	}{
		{"PDM length 8", pktcraft.DestOpts(short...)},
		// A TLV whose length runs past the header's end.
		{"TLV overrun", pktcraft.DestOpts(0x1e, 40)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			p := reply
			p.IPv6ExtHeaders = []pktcraft.ExtHeader{tc.ext}
			in := p.MustBytes()
			if out := h.ingress(in, 1000); !bytes.Equal(out[:len(in)], in) {
				t.Fatal("packet changed")
			}
			c := h.counters()
			if c[probe.PdmPdmCounterPDM_C_MALFORMED] != 1 || c[probe.PdmPdmCounterPDM_C_PDM_SEEN] != 0 {
				t.Errorf("counters %v", c.Map())
			}
			if evs := h.events(); len(evs) != 0 {
				t.Errorf("%d events for a malformed option", len(evs))
			}
		})
	}
	// PDM after other options, past a hop-by-hop header, is found.
	h := newHarness(t, Config{})
	p := reply
	p.IPv6ExtHeaders = []pktcraft.ExtHeader{pktcraft.HopByHop(), pktcraft.DestOpts(pktcraft.Opts(pktcraft.OptRaw(0x1e, 2, 0, 0), []byte{0}, pktcraft.PDMOption(1, 2, 3, 4, 5, 6))...)}
	h.ingress(p.MustBytes(), 1000)
	evs := h.events()
	if len(evs) != 1 || evs[0].Psntp != 3 || evs[0].Psnlr != 4 || evs[0].Dtlr != 5 || evs[0].Dtls != 6 || evs[0].ScaleDtlr != 1 || evs[0].ScaleDtls != 2 || evs[0].Sport != 53 {
		t.Errorf("events %+v", evs)
	}
}

// TestMapFull: with room for 4 5-tuples, a flood of new ones is refused
// and counted while the 4 keep their PSN sequences.
func TestMapFull(t *testing.T) {
	h := newHarness(t, Config{MapSize: 4})
	pkt := func(port uint16) []byte {
		return pktcraft.Packet{Src: hostA, Dst: hostB, UDP: &pktcraft.UDP{SrcPort: port, DstPort: 53}}.MustBytes()
	}
	first := map[uint16]uint16{}
	for port := uint16(1); port <= 4; port++ {
		first[port] = binary.BigEndian.Uint16(h.egress(pkt(port), 1000)[60:62])
	}
	for port := uint16(100); port < 200; port++ {
		if out := h.egress(pkt(port), 2000); out[20] == 60 {
			t.Fatalf("flood packet %d got PDM with a full map", port)
		}
	}
	for port := uint16(1); port <= 4; port++ {
		if got := binary.BigEndian.Uint16(h.egress(pkt(port), 3000)[60:62]); got != first[port]+1 {
			t.Errorf("port %d: PSN %#x after the flood, want %#x", port, got, first[port]+1)
		}
	}
	if c := h.counters(); c[probe.PdmPdmCounterPDM_C_MAP_FULL] != 100 {
		t.Errorf("refusals %d, want 100", c[probe.PdmPdmCounterPDM_C_MAP_FULL])
	}
	// The sweeper frees what idled past the lifetime.
	n, err := h.objs.Sweep(3000 + uint64(DefaultLifetime) + 1)
	if err != nil || n != 4 {
		t.Errorf("Sweep = %d, %v; want 4", n, err)
	}
}

func TestLifetimeReset(t *testing.T) {
	h := newHarness(t, Config{Lifetime: time.Second})
	tc := transports()[1]
	h.egress(tc.pkt.MustBytes(), 1000)
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}}
	h.ingress(withPDM(reply, 0, 0, 77, 0, 0, 0), 2000)
	// 2 s later: the state starts over, no PSNLR, DTLR or DTLS.
	out := h.egress(tc.pkt.MustBytes(), 2000+uint64(2*time.Second))
	if psnlr := binary.BigEndian.Uint16(out[62:64]); psnlr != 0 || !bytes.Equal(out[64:68], []byte{0, 0, 0, 0}) {
		t.Errorf("stale state used: %x", out[54:70])
	}
	if c := h.counters(); c[probe.PdmPdmCounterPDM_C_STATE_RESET] != 1 {
		t.Errorf("counters %v", c.Map())
	}
}

func TestPassive(t *testing.T) {
	h := newHarness(t, Config{Passive: true})
	// B (server) replies with DTLR 1 ms to A's PSN 10; A's next packet
	// names it (PSNLR 20) with DTLS 5 ms: network RTT 4 ms.
	req := transports()[1].pkt
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}}
	v1, s1 := Encode(uint64(time.Millisecond))
	in := withPDM(reply, s1, 0, 20, 10, v1, 0)
	v5, s5 := Encode(uint64(5 * time.Millisecond))
	outPkt := withPDM(req, 0, s5, 11, 20, 0, v5)
	if got := h.ingress(in, 1000); !bytes.Equal(got[:len(in)], in) {
		t.Fatal("passive ingress changed the packet")
	}
	if got := h.egress(outPkt, 2000); !bytes.Equal(got[:len(outPkt)], outPkt) {
		t.Fatal("passive egress changed the packet")
	}
	plain := req.MustBytes()
	if got := h.egress(plain, 3000); !bytes.Equal(got[:len(plain)], plain) {
		t.Fatal("passive egress inserted PDM")
	}
	evs := h.events()
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	r := toRecord(t, &evs[1], 0)
	want := int64(Decode(v5, s5) - Decode(v1, s1))
	if r.Direction != "egress" || r.NetworkRTT == nil || *r.NetworkRTT != want {
		t.Errorf("record %+v, want network_rtt %d", r, want)
	}
}

// TestBPFEncoder holds the BPF encoder to the vectors and to its Go twin.
func TestBPFEncoder(t *testing.T) {
	testutil.RequireRoot(t)
	var objs probe.PdmEncodeTestObjects
	if err := probe.LoadPdmEncodeTestObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = objs.Close() }()
	encode := func(ns uint64) (uint16, uint8) {
		in := make([]byte, 64)
		binary.NativeEndian.PutUint64(in, ns)
		out := make([]byte, 64+256)
		if _, err := objs.PdmEncodeTest.Run(&ebpf.RunOptions{Data: in, DataOut: out}); err != nil {
			t.Fatal(err)
		}
		return binary.NativeEndian.Uint16(out[10:12]), out[8]
	}
	for _, v := range vectors {
		if value, scale := encode(uint64(v.d)); value != v.value || scale != v.scale {
			t.Errorf("BPF encode(%v) = %#04x/%d, want %#04x/%d", v.d, value, scale, v.value, v.scale)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	inputs := append(propertyInputs(r, 5000), 0, 1<<63, 1<<64-1)
	for _, ns := range inputs {
		bv, bs := encode(ns)
		gv, gs := Encode(ns)
		if bv != gv || bs != gs {
			t.Fatalf("ns=%d: BPF %#04x/%d, Go %#04x/%d", ns, bv, bs, gv, gs)
		}
	}
}
