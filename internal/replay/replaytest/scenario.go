// Package replaytest holds a capture scenario with hand-computed ground
// truth for the tests of `rttscope replay`: a set of flows (TCP with
// timestamps both ways, handshake, retransmissions, wrapped TSval, ICMP and
// ICMPv6 echo, VLAN and QinQ tags, IPv6 extension headers, flow timeouts
// by capture time), the exact events the BPF programs must report for it,
// and writers for the same packets in every container and link type the
// reader supports.
package replaytest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// T0 is the capture time of the scenario's first packet: a whole
// microsecond, so µs pcap files hold every time exactly.
const T0 int64 = 1_700_000_000_123_456_000

// Endpoints of the scenario. The clients are "inside" (egress when they
// send), the servers outside.
var (
	Client4   = netip.MustParseAddr("10.0.0.1")
	Server4   = netip.MustParseAddr("192.0.2.10")
	Server4b  = netip.MustParseAddr("192.0.2.20")
	Server4c  = netip.MustParseAddr("192.0.2.30")
	Client6   = netip.MustParseAddr("2001:db8:1::1")
	Server6   = netip.MustParseAddr("2001:db8:2::10")
	ClientMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	RouterMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0xfe}
)

// LocalNets are the inside prefixes, for --local-net.
var LocalNets = []string{"10.0.0.0/24", "2001:db8:1::/64"}

// Args are the flags the expected events assume: TCP and ICMP, every
// identifier timestamped, handshakes included, TCP flows forgotten after
// 20 s idle (ICMP after the default 30 s), JSON output.
var Args = []string{"-T", "-C", "-r", "0", "--include-syn", "--tcp-flow-timeout", "20s", "-F", "json"}

// Step is one packet of the scenario.
type Step struct {
	At         int64 // ns after T0
	FromClient bool
	Pkt        pktcraft.Packet // Src/Dst/L4 and tags; MACs are set by the writers
}

const (
	us = int64(time.Microsecond)
	ms = int64(time.Millisecond)
	s  = int64(time.Second)
)

func tcp(src, dst netip.Addr, sp, dp uint16, t pktcraft.TCP) pktcraft.Packet {
	t.SrcPort, t.DstPort = sp, dp
	if t.Window == 0 {
		t.Window = 65000
	}
	return pktcraft.Packet{Src: src, Dst: dst, TCP: &t}
}

func data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// Steps returns the scenario's packets in capture order.
func Steps() []Step {
	var st []Step
	add := func(at int64, fromClient bool, p pktcraft.Packet) {
		st = append(st, Step{At: at, FromClient: fromClient, Pkt: p})
	}
	// Flow A: TCP/IPv4 with handshake, data both ways, a duplicate
	// (same TSval), a retransmission with a new TSval, FIN both ways.
	cA := func(at int64, t pktcraft.TCP) { add(at, true, tcp(Client4, Server4, 40000, 443, t)) }
	sA := func(at int64, t pktcraft.TCP) { add(at, false, tcp(Server4, Client4, 443, 40000, t)) }
	cA(0, pktcraft.TCP{SYN: true, Seq: 100, TSval: 1000, ExtraOptions: pktcraft.OptMSS(1460)})
	sA(20*ms, pktcraft.TCP{SYN: true, ACK: true, Seq: 900, Ack: 101, TSval: 5000, TSecr: 1000, ExtraOptions: pktcraft.OptMSS(1460)})
	cA(20500*us, pktcraft.TCP{ACK: true, Seq: 101, Ack: 901, TSval: 1001, TSecr: 5000})
	cA(21*ms, pktcraft.TCP{ACK: true, PSH: true, Seq: 101, Ack: 901, TSval: 1002, TSecr: 5000, Payload: data(100)})
	sA(41500*us, pktcraft.TCP{ACK: true, Seq: 901, Ack: 201, TSval: 5020, TSecr: 1002})
	sA(50*ms, pktcraft.TCP{ACK: true, PSH: true, Seq: 901, Ack: 201, TSval: 5030, TSecr: 1002, Payload: data(200)})
	cA(50250*us, pktcraft.TCP{ACK: true, Seq: 201, Ack: 1101, TSval: 1010, TSecr: 5030})
	cA(60*ms, pktcraft.TCP{ACK: true, PSH: true, Seq: 201, Ack: 1101, TSval: 1020, TSecr: 5030, Payload: data(300)})
	cA(80*ms, pktcraft.TCP{ACK: true, PSH: true, Seq: 201, Ack: 1101, TSval: 1020, TSecr: 5030, Payload: data(300)})
	sA(100123*us, pktcraft.TCP{ACK: true, Seq: 1101, Ack: 501, TSval: 5035, TSecr: 1020})
	cA(110*ms, pktcraft.TCP{ACK: true, PSH: true, Seq: 501, Ack: 1101, TSval: 1030, TSecr: 5035, Payload: data(50)})
	cA(150*ms, pktcraft.TCP{ACK: true, PSH: true, Seq: 501, Ack: 1101, TSval: 1040, TSecr: 5035, Payload: data(50)})
	sA(170*ms, pktcraft.TCP{ACK: true, Seq: 1101, Ack: 551, TSval: 5037, TSecr: 1040})
	cA(200*ms, pktcraft.TCP{FIN: true, ACK: true, Seq: 551, Ack: 1101, TSval: 1050, TSecr: 5037})
	sA(220*ms, pktcraft.TCP{FIN: true, ACK: true, Seq: 1101, Ack: 552, TSval: 5040, TSecr: 1050})
	cA(220100*us, pktcraft.TCP{ACK: true, Seq: 552, Ack: 1102, TSval: 1051, TSecr: 5040})

	// Flow B: TCP/IPv4 in VLAN 100, picked up mid-stream, TSval wrapping
	// from 0xfffffffe through 0xffffffff to 0 and 1.
	vlan := func(p pktcraft.Packet) pktcraft.Packet { p.VLANs = []uint16{100}; return p }
	cB := func(at int64, t pktcraft.TCP) { add(at, true, vlan(tcp(Client4, Server4, 40001, 80, t))) }
	sB := func(at int64, t pktcraft.TCP) { add(at, false, vlan(tcp(Server4, Client4, 80, 40001, t))) }
	seq := uint32(1)
	for i, tsv := range []uint32{0xfffffffe, 0xffffffff, 0, 1} {
		at := 300*ms + int64(i)*20*ms
		cB(at, pktcraft.TCP{ACK: true, PSH: true, Seq: seq, Ack: 1, TSval: tsv, TSecr: 7000 + uint32(i), Payload: data(1000)})
		seq += 1000
		sB(at+10*ms+int64(i)*500*us, pktcraft.TCP{ACK: true, Seq: 1, Ack: seq, TSval: 7001 + uint32(i), TSecr: tsv})
	}

	// Flow C: ICMP echo in QinQ (service tag 200, customer tag 100).
	qinq := func(p pktcraft.Packet) pktcraft.Packet { p.VLANs, p.QinQ = []uint16{200, 100}, true; return p }
	echo := func(src, dst netip.Addr, reply bool, id, sq uint16) pktcraft.Packet {
		return pktcraft.Packet{Src: src, Dst: dst, ICMPEcho: &pktcraft.ICMPEcho{Reply: reply, ID: id, Seq: sq, Payload: data(56)}}
	}
	add(400*ms, true, qinq(echo(Client4, Server4b, false, 0x1234, 1)))
	add(410500*us, false, qinq(echo(Server4b, Client4, true, 0x1234, 1)))
	add(420*ms, true, qinq(echo(Client4, Server4b, false, 0x1234, 2)))
	add(432*ms, false, qinq(echo(Server4b, Client4, true, 0x1234, 2)))

	// Flow D: ICMPv6 echo with extension headers (hop-by-hop and
	// destination options on requests, destination options on replies).
	ext := func(p pktcraft.Packet, h ...pktcraft.ExtHeader) pktcraft.Packet { p.IPv6ExtHeaders = h; return p }
	add(500*ms, true, ext(echo(Client6, Server6, false, 0x4321, 7), pktcraft.HopByHop(), pktcraft.DestOpts()))
	add(530*ms, false, ext(echo(Server6, Client6, true, 0x4321, 7), pktcraft.DestOpts()))
	add(540*ms, true, ext(echo(Client6, Server6, false, 0x4321, 8), pktcraft.HopByHop(), pktcraft.DestOpts()))
	add(565432*us, false, ext(echo(Server6, Client6, true, 0x4321, 8), pktcraft.DestOpts()))

	// Flow E: TCP/IPv6 with hop-by-hop, routing and destination options.
	hdrs := func() []pktcraft.ExtHeader {
		return []pktcraft.ExtHeader{pktcraft.HopByHop(), pktcraft.RoutingHeader(0, 0), pktcraft.DestOpts()}
	}
	cE := func(at int64, t pktcraft.TCP) { add(at, true, ext(tcp(Client6, Server6, 50000, 443, t), hdrs()...)) }
	sE := func(at int64, t pktcraft.TCP) { add(at, false, ext(tcp(Server6, Client6, 443, 50000, t), hdrs()...)) }
	cE(600*ms, pktcraft.TCP{SYN: true, Seq: 10, TSval: 100})
	sE(650*ms, pktcraft.TCP{SYN: true, ACK: true, Seq: 70, Ack: 11, TSval: 900, TSecr: 100})
	cE(650*ms+1*us, pktcraft.TCP{ACK: true, Seq: 11, Ack: 71, TSval: 100, TSecr: 900})
	cE(660*ms, pktcraft.TCP{ACK: true, PSH: true, Seq: 11, Ack: 71, TSval: 101, TSecr: 900, Payload: data(500)})
	sE(710*ms, pktcraft.TCP{ACK: true, PSH: true, Seq: 71, Ack: 511, TSval: 901, TSecr: 101, Payload: data(700)})
	cE(710300*us, pktcraft.TCP{ACK: true, Seq: 511, Ack: 771, TSval: 102, TSecr: 901})

	// Flow F: an unanswered echo request, then 44 s of silence, in
	// which every flow times out; then the flow starts again.
	add(800*ms, true, echo(Client4, Server4c, false, 0x0042, 1))
	add(45*s, true, echo(Client4, Server4c, false, 0x0042, 2))
	add(45*s+12300*us, false, echo(Server4c, Client4, true, 0x0042, 2))
	return st
}

// Event is an output record in a canonical, comparable form.
type Event struct {
	Time      int64
	Src, Dst  string // "addr:port"
	Proto     string
	RTT       int64 // ns; 0 for flow events
	MinRTT    int64
	Egress    bool
	Source    string // "" for flow events
	FlowEvent string // "opening"/"closing"; "" for RTT events
	Reason    string
	Trigger   string
}

func (e Event) String() string {
	t := fmt.Sprintf("T0%+.6fs", float64(e.Time-T0)/1e9)
	if e.FlowEvent != "" {
		return fmt.Sprintf("%s %s %s+%s %s due to %s from %s", t, e.Proto, e.Src, e.Dst, e.FlowEvent, e.Reason, e.Trigger)
	}
	return fmt.Sprintf("%s %s %s+%s rtt=%dns min=%dns egress=%v source=%s", t, e.Proto, e.Src, e.Dst, e.RTT, e.MinRTT, e.Egress, e.Source)
}

func ep(a netip.Addr, port uint16) string { return fmt.Sprintf("%s:%d", a, port) }

// Expected returns the events the programs must report for Steps with
// Args, in capture order, each computed by hand from the timeline above.
// Events with equal times (flow timeouts found by one cleanup) are in no
// particular order: compare with Sort applied to both sides.
func Expected() []Event {
	var out []Event
	minRTT := map[string]int64{}
	rtt := func(at int64, src, dst, proto string, d int64, egress bool) {
		k := src + "+" + dst + proto
		if m, ok := minRTT[k]; !ok || d < m {
			minRTT[k] = d
		}
		source := "tcp_ts" // the scenario's TCP flows all have timestamps
		if proto != "TCP" {
			source = "icmp"
		}
		out = append(out, Event{Time: T0 + at, Src: src, Dst: dst, Proto: proto, RTT: d, MinRTT: minRTT[k], Egress: egress, Source: source})
	}
	flow := func(at int64, src, dst, proto, typ, reason string) {
		out = append(out, Event{Time: T0 + at, Src: src, Dst: dst, Proto: proto, FlowEvent: typ, Reason: reason, Trigger: "src"})
	}
	// timeout is a closing by the cleanup at the first whole second of
	// capture time that is more than d after last.
	timeout := func(last, d int64, src, dst, proto string) {
		at := T0 + last + d
		at = at - at%s + s
		out = append(out, Event{Time: at, Src: src, Dst: dst, Proto: proto, FlowEvent: "closing", Reason: "flow timeout", Trigger: "src"})
	}
	c4a, s4a := ep(Client4, 40000), ep(Server4, 443)
	flow(0, c4a, s4a, "TCP", "opening", "SYN")
	rtt(20*ms, s4a, c4a, "TCP", 20*ms, false)
	rtt(20500*us, c4a, s4a, "TCP", 500*us, true)
	rtt(41500*us, s4a, c4a, "TCP", 20500*us, false)
	rtt(50250*us, c4a, s4a, "TCP", 250*us, true)
	rtt(100123*us, s4a, c4a, "TCP", 40123*us, false) // from the first of two packets with TSval 1020
	rtt(170*ms, s4a, c4a, "TCP", 20*ms, false)       // TSval 1040 of the retransmission
	flow(200*ms, c4a, s4a, "TCP", "closing", "FIN")
	rtt(220*ms, s4a, c4a, "TCP", 20*ms, false)

	c4b, s4b := ep(Client4, 40001), ep(Server4, 80)
	flow(300*ms, c4b, s4b, "TCP", "opening", "first observed packet")
	for i := range int64(4) {
		at := 300*ms + i*20*ms + 10*ms + i*500*us
		rtt(at, s4b, c4b, "TCP", 10*ms+i*500*us, false)
	}

	c4c, s4c := ep(Client4, 0x1234), ep(Server4b, 0x1234)
	flow(400*ms, c4c, s4c, "ICMP", "opening", "first observed packet")
	rtt(410500*us, s4c, c4c, "ICMP", 10500*us, false)
	rtt(432*ms, s4c, c4c, "ICMP", 12*ms, false)

	c6d, s6d := ep(Client6, 0x4321), ep(Server6, 0x4321)
	flow(500*ms, c6d, s6d, "ICMPv6", "opening", "first observed packet")
	rtt(530*ms, s6d, c6d, "ICMPv6", 30*ms, false)
	rtt(565432*us, s6d, c6d, "ICMPv6", 25432*us, false)

	c6e, s6e := ep(Client6, 50000), ep(Server6, 443)
	flow(600*ms, c6e, s6e, "TCP", "opening", "SYN")
	rtt(650*ms, s6e, c6e, "TCP", 50*ms, false)
	rtt(650*ms+us, c6e, s6e, "TCP", us, true)
	rtt(710*ms, s6e, c6e, "TCP", 50*ms, false)
	rtt(710300*us, c6e, s6e, "TCP", 300*us, true)

	c4f, s4f := ep(Client4, 0x42), ep(Server4c, 0x42)
	flow(800*ms, c4f, s4f, "ICMP", "opening", "first observed packet")

	// The silence: TCP flows idle > 20 s, ICMP flows idle > 30 s close.
	timeout(371500*us, 20*s, c4b, s4b, "TCP")
	timeout(710300*us, 20*s, c6e, s6e, "TCP")
	timeout(432*ms, 30*s, c4c, s4c, "ICMP")
	timeout(565432*us, 30*s, c6d, s6d, "ICMPv6")
	timeout(800*ms, 30*s, c4f, s4f, "ICMP")

	flow(45*s, c4f, s4f, "ICMP", "opening", "first observed packet")
	minRTT = map[string]int64{} // a new flow
	rtt(45*s+12300*us, s4f, c4f, "ICMP", 12300*us, false)
	return out
}

// Sort orders events by time, then by their text, so that events of one
// cleanup compare equal whatever order the kernel's map walk had.
func Sort(ev []Event) {
	slices.SortStableFunc(ev, func(a, b Event) int {
		if a.Time != b.Time {
			if a.Time < b.Time {
				return -1
			}
			return 1
		}
		return strings.Compare(a.String(), b.String())
	})
}

// jsonEvent is one record of the json and jsonl formats.
type jsonEvent struct {
	Timestamp     int64  `json:"timestamp"`
	Type          string `json:"type"`
	SrcIP         string `json:"src_ip"`
	SrcPort       uint16 `json:"src_port"`
	DestIP        string `json:"dest_ip"`
	DestPort      uint16 `json:"dest_port"`
	Protocol      string `json:"protocol"`
	RTT           *int64 `json:"rtt"`
	MinRTT        int64  `json:"min_rtt"`
	MatchOnEgress bool   `json:"match_on_egress"`
	Source        string `json:"source"`
	FlowEvent     string `json:"flow_event"`
	Reason        string `json:"reason"`
	TriggeredBy   string `json:"triggered_by"`
}

func (j *jsonEvent) event() Event {
	e := Event{
		Time:      j.Timestamp,
		Src:       fmt.Sprintf("%s:%d", j.SrcIP, j.SrcPort),
		Dst:       fmt.Sprintf("%s:%d", j.DestIP, j.DestPort),
		Proto:     j.Protocol,
		FlowEvent: j.FlowEvent,
		Reason:    j.Reason,
		Trigger:   j.TriggeredBy,
	}
	if j.RTT != nil {
		e.RTT, e.MinRTT, e.Egress, e.Source = *j.RTT, j.MinRTT, j.MatchOnEgress, j.Source
	}
	return e
}

// ParseJSON parses a json document (one array) into events; records of
// other types (stats) are counted in others.
func ParseJSON(doc []byte) (ev []Event, others int, err error) {
	var recs []jsonEvent
	if err := json.Unmarshal(doc, &recs); err != nil {
		return nil, 0, fmt.Errorf("output is not a json array of events: %w", err)
	}
	for i := range recs {
		if recs[i].Type != "" {
			others++
			continue
		}
		ev = append(ev, recs[i].event())
	}
	return ev, others, nil
}

// ParseJSONL parses jsonl output (one object per line).
func ParseJSONL(doc []byte) (ev []Event, others int, err error) {
	for i, line := range strings.Split(strings.TrimRight(string(doc), "\n"), "\n") {
		if line == "" {
			continue
		}
		var rec jsonEvent
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, 0, fmt.Errorf("jsonl line %d: %w", i+1, err)
		}
		if rec.Type != "" {
			others++
			continue
		}
		ev = append(ev, rec.event())
	}
	return ev, others, nil
}

// Diff describes the difference between two sorted event lists, or
// returns "".
func Diff(got, want []Event) string {
	if slices.Equal(got, want) {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "got %d events, want %d\n", len(got), len(want))
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i].String()
		}
		if i < len(want) {
			w = want[i].String()
		}
		mark := "  "
		if g != w {
			mark = "! "
		}
		fmt.Fprintf(&b, "%s%3d got  %s\n%s    want %s\n", mark, i, g, mark, w)
	}
	return b.String()
}

// Variant is one way of storing the scenario.
type Variant struct {
	Name string
	// File is the file name (its suffix selects gzip).
	File string
	// Args are extra replay flags the variant needs (direction rules).
	Args []string
	// Write stores the steps in path.
	Write func(path string, steps []Step) error
}

// Variants lists the containers and link types, each with a way of
// telling egress from ingress: capture direction (pcapng flags, SLL packet
// types), --local-net, --local-mac or the per-flow rule. Every variant
// must give exactly Expected().
func Variants() []Variant {
	return []Variant{
		{"pcap-ns-ethernet-localnet", "a.pcap", localNetArgs(), pcapWriter(capture.LinkTypeEthernet, true)},
		{"pcap-us-ethernet-flowrule", "b.pcap", nil, pcapWriter(capture.LinkTypeEthernet, false)},
		{"pcap-ethernet-localmac", "c.pcap", []string{"--local-mac", ClientMAC.String()}, pcapWriter(capture.LinkTypeEthernet, true)},
		{"pcap-ethernet-gzip-localnet", "d.pcap.gz", localNetArgs(), pcapWriter(capture.LinkTypeEthernet, true)},
		{"pcapng-ethernet-direction", "e.pcapng", nil, pcapngWriter(true)},
		{"pcapng-ethernet-gzip-direction", "f.pcapng.gz", nil, pcapngWriter(true)},
		{"pcapng-ethernet-flowrule", "g.pcapng", nil, pcapngWriter(false)},
		{"pcap-sll", "h.pcap", nil, pcapWriter(capture.LinkTypeLinuxSLL, true)},
		{"pcap-sll2", "i.pcap", nil, pcapWriter(capture.LinkTypeLinuxSLL2, true)},
		{"pcapng-sll2-gzip", "j.pcapng.gz", nil, pcapngLinkWriter(capture.LinkTypeLinuxSLL2)},
		{"pcap-rawip-localnet", "k.pcap", localNetArgs(), pcapWriter(capture.LinkTypeRaw, true)},
		{"pcap-rawip-flowrule", "l.pcap", nil, pcapWriter(capture.LinkTypeRaw, false)},
	}
}

func localNetArgs() []string {
	var a []string
	for _, n := range LocalNets {
		a = append(a, "--local-net", n)
	}
	return a
}

// Frame builds a step's frame in link type lt.
func Frame(st Step, lt uint16) ([]byte, error) {
	p := st.Pkt
	mac := RouterMAC
	if st.FromClient {
		mac = ClientMAC
	}
	pktType := pktcraft.PacketHost
	if st.FromClient {
		pktType = pktcraft.PacketOutgoing
	}
	switch lt {
	case capture.LinkTypeEthernet:
		p.SrcMAC = mac
		if st.FromClient {
			p.DstMAC = RouterMAC
		} else {
			p.DstMAC = ClientMAC
		}
		return p.Bytes()
	}
	p.NoEthernet, p.VLANs, p.QinQ = true, nil, false
	l3, err := p.Bytes()
	if err != nil {
		return nil, err
	}
	switch lt {
	case capture.LinkTypeRaw:
		return l3, nil
	case capture.LinkTypeLinuxSLL:
		return pktcraft.Cooked{PacketType: pktType, Addr: mac}.SLL(l3), nil
	case capture.LinkTypeLinuxSLL2:
		return pktcraft.Cooked{PacketType: pktType, Addr: mac, IfIndex: 3}.SLL2(l3), nil
	}
	return nil, fmt.Errorf("no frames of link type %d", lt)
}

// Frames builds every step in link type lt, with capture directions.
func Frames(steps []Step, lt uint16, withDirection bool) ([]capture.TimedFrame, error) {
	out := make([]capture.TimedFrame, 0, len(steps))
	for _, st := range steps {
		b, err := Frame(st, lt)
		if err != nil {
			return nil, err
		}
		f := capture.TimedFrame{Timestamp: T0 + st.At, Data: b}
		if withDirection {
			f.Direction = capture.DirInbound
			if st.FromClient {
				f.Direction = capture.DirOutbound
			}
		}
		out = append(out, f)
	}
	return out, nil
}

func pcapWriter(lt uint16, ns bool) func(string, []Step) error {
	return func(path string, steps []Step) error {
		fr, err := Frames(steps, lt, false)
		if err != nil {
			return err
		}
		return capture.WritePcap(path, lt, ns, fr)
	}
}

func pcapngWriter(withDirection bool) func(string, []Step) error {
	return func(path string, steps []Step) error {
		fr, err := Frames(steps, capture.LinkTypeEthernet, withDirection)
		if err != nil {
			return err
		}
		return capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet}, fr)
	}
}

func pcapngLinkWriter(lt uint16) func(string, []Step) error {
	return func(path string, steps []Step) error {
		fr, err := Frames(steps, lt, false)
		if err != nil {
			return err
		}
		return capture.WritePcapng(path, []uint16{lt}, fr)
	}
}

// Write stores the scenario as variant v in dir and returns the path.
func Write(tb testing.TB, dir string, v Variant) string {
	tb.Helper()
	path := filepath.Join(dir, v.File)
	if err := v.Write(path, Steps()); err != nil {
		tb.Fatalf("write %s: %v", v.Name, err)
	}
	return path
}
