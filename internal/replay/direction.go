package replay

import (
	"net/netip"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
)

// DirectionRules decide which captured packets the replay hands to the
// egress program and which to the ingress program, i.e. which packets were
// leaving the observation point (toward "the outside") and which were
// arriving at it. Per packet, the first rule that applies wins:
//
//  1. The capture's own direction: pcapng epb_flags (or pack_flags), or for
//     Linux cooked captures (SLL, SLL2) the packet type: outbound is
//     egress, inbound is ingress.
//  2. With LocalNets or LocalMACs: a packet whose source IP address lies in
//     one of LocalNets, or whose source MAC address (Ethernet, or the SLL
//     link-layer address) is one of LocalMACs, is egress; every other
//     packet is ingress.
//  3. Otherwise, per flow (both directions of a 5-tuple; for ICMP echo the
//     identifier stands in for the ports): the inside endpoint is the
//     sender of the latest TCP SYN (without ACK) of the flow; for a flow
//     whose first packet is not such a SYN, it is the receiver of that
//     packet if it is a SYN-ACK or an echo reply, else its sender. Packets
//     sent by the inside endpoint are egress. A flow idle longer than its
//     flow timeout is forgotten and decided anew.
//
// Packets that are not IPv4/IPv6 are ingress under rules 2 and 3 (the
// programs ignore them anyway). The direction only changes which hook a
// sample is matched on (match_on_egress), never the RTT values.
type DirectionRules struct {
	LocalNets []netip.Prefix
	LocalMACs [][6]byte
}

// DirectionSource says which rule decided a packet's direction.
type DirectionSource int

// Direction sources, in the order of the rules.
const (
	DirFromCapture DirectionSource = iota
	DirFromLocal
	DirFromFlow
	numDirSources
)

// String names the source.
func (s DirectionSource) String() string {
	switch s {
	case DirFromCapture:
		return "capture"
	case DirFromLocal:
		return "local"
	case DirFromFlow:
		return "flow"
	}
	return "unknown"
}

// flowKey is a flow in canonical order: endpoint a sorts before b.
type flowKey struct {
	a, b   [16]byte
	pa, pb uint16
	proto  uint8
}

type flowSide struct {
	insideIsA bool
	last      int64 // capture time of the flow's latest packet
}

// sweepEvery is how often (capture time) idle flows are removed from the
// table of rule 3, which bounds its memory by the flows active within a
// flow timeout.
const sweepEvery = int64(10 * time.Second)

type director struct {
	rules        DirectionRules
	useLocal     bool
	flows        map[flowKey]flowSide
	tcpTimeout   int64
	otherTimeout int64
	nextSweep    int64
	pi           pktInfo
	counts       [numDirSources]uint64
}

func newDirector(rules DirectionRules, tcpTimeout, otherTimeout time.Duration) *director {
	return &director{
		rules:        rules,
		useLocal:     len(rules.LocalNets) > 0 || len(rules.LocalMACs) > 0,
		flows:        make(map[flowKey]flowSide),
		tcpTimeout:   int64(tcpTimeout),
		otherTimeout: int64(otherTimeout),
	}
}

// egress decides the direction of p, captured at ts.
func (d *director) egress(p *capture.Packet, ts int64) bool {
	switch p.Direction {
	case capture.DirOutbound:
		d.counts[DirFromCapture]++
		return true
	case capture.DirInbound:
		d.counts[DirFromCapture]++
		return false
	}
	if d.useLocal {
		d.counts[DirFromLocal]++
		return d.isLocal(p)
	}
	d.counts[DirFromFlow]++
	return d.byFlow(p.Data, ts)
}

func (d *director) isLocal(p *capture.Packet) bool {
	for i := range d.rules.LocalMACs {
		if p.SrcMAC == d.rules.LocalMACs[i] {
			return true
		}
	}
	if len(d.rules.LocalNets) == 0 {
		return false
	}
	parsePkt(p.Data, &d.pi)
	if !d.pi.ok {
		return false
	}
	src := netip.AddrFrom16(d.pi.src)
	if !d.pi.ipv6 {
		src = src.Unmap()
	}
	for _, n := range d.rules.LocalNets {
		if n.Contains(src) {
			return true
		}
	}
	return false
}

func (d *director) byFlow(frame []byte, ts int64) bool {
	if ts >= d.nextSweep {
		d.sweep(ts)
	}
	pi := &d.pi
	parsePkt(frame, pi)
	if !pi.ok {
		return false
	}
	k := flowKey{proto: pi.proto}
	senderIsA := lessEndpoint(&pi.src, pi.sport, &pi.dst, pi.dport)
	if senderIsA {
		k.a, k.pa, k.b, k.pb = pi.src, pi.sport, pi.dst, pi.dport
	} else {
		k.a, k.pa, k.b, k.pb = pi.dst, pi.dport, pi.src, pi.sport
	}
	st, found := d.flows[k]
	if found && ts-st.last > d.timeout(k.proto) {
		found, st = false, flowSide{}
	}
	switch {
	case pi.proto == protoTCP && pi.syn && !pi.ack:
		st.insideIsA = senderIsA
	case found:
	case pi.proto == protoTCP && pi.syn && pi.ack, pi.reply:
		st.insideIsA = !senderIsA
	default:
		st.insideIsA = senderIsA
	}
	st.last = ts
	d.flows[k] = st
	return st.insideIsA == senderIsA
}

// sweep forgets flows idle longer than their timeout.
func (d *director) sweep(ts int64) {
	d.nextSweep = ts + sweepEvery
	for k, st := range d.flows {
		if ts-st.last > d.timeout(k.proto) {
			delete(d.flows, k)
		}
	}
}

func (d *director) timeout(proto uint8) int64 {
	if proto == protoTCP {
		return d.tcpTimeout
	}
	return d.otherTimeout
}

// lessEndpoint orders endpoints by address, then port.
func lessEndpoint(a *[16]byte, pa uint16, b *[16]byte, pb uint16) bool {
	if *a != *b {
		for i := range a {
			if a[i] != b[i] {
				return a[i] < b[i]
			}
		}
	}
	return pa < pb
}
