package replay

// Tests of the DNS source (bpf/id_dns.h) with crafted queries and
// responses over UDP and TCP.

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// dnsMsg is a DNS message with one question.
type dnsMsg struct {
	id       uint16
	response bool
	rcode    uint8
	tc       bool
	name     string
	qtype    uint16
	answer   int // bytes of answer records after the question (opaque)
}

func (m dnsMsg) bytes() []byte {
	flags := uint16(0x0100) // RD
	if m.response {
		flags |= 0x8000 | 0x0080 | uint16(m.rcode&0xf) // QR, RA
	}
	if m.tc {
		flags |= 0x0200
	}
	b := binary.BigEndian.AppendUint16(nil, m.id)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = append(b, 0, 1, 0, 0, 0, 0, 0, 0) // one question
	for _, l := range strings.Split(strings.TrimSuffix(m.name, "."), ".") {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, m.qtype)
	b = binary.BigEndian.AppendUint16(b, 1) // IN
	return append(b, payload(m.answer)...)
}

// dnsUDP is a DNS message over UDP from a's port (fromA) or b's.
func (p path) dnsUDP(fromA bool, m dnsMsg) []byte {
	src, dst := p.ends(fromA)
	pk := p.packet(fromA)
	pk.UDP = &pktcraft.UDP{SrcPort: src.port, DstPort: dst.port, Payload: m.bytes()}
	return pk.MustBytes()
}

// dnsTCP is a DNS message over TCP, after its length prefix.
func (p path) dnsTCP(fromA bool, seq, ack uint32, m dnsMsg) []byte {
	msg := m.bytes()
	pl := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
	return p.tcp(fromA, pktcraft.TCP{ACK: true, PSH: true, Seq: seq, Ack: ack, TSval: seq, TSecr: ack, Payload: append(pl, msg...)})
}

// dnsPath: a is the client (port 40053), b the server on port 53.
var (
	dnsPath4 = path{a: ep("10.0.0.1", 40053), b: ep("192.0.2.53", 53)}
	dnsPath6 = path{a: ep("2001:db8::1", 40053), b: ep("2001:db8::53", 53)}
)

func dnsConfig() loader.Config {
	c := testConfig()
	c.TrackTCP, c.TrackDNS, c.RateLimit = false, true, 0
	return c
}

// dnsSample is a DNS sample of a response from b at t0+at.
type dnsSample struct {
	sample
	Source events.Source
	DNS    events.DNSInfo
}

func (h *harness) checkDNS(want ...dnsSample) {
	h.tb.Helper()
	var got []dnsSample
	for _, r := range h.takeRTTs() {
		got = append(got, dnsSample{sample{Time: r.Time, Flow: r.Flow, RTT: r.RTT, Egress: r.MatchOnEgress}, r.Source, r.DNS})
	}
	if !slices.Equal(got, want) {
		h.tb.Errorf("RTT samples:\n got %s\nwant %s", fmtList(got), fmtList(want))
	}
}

func (p path) udpFlow(fromA bool) events.Flow {
	f := p.tcpFlow(fromA)
	f.Proto = events.ProtoUDP
	return f
}

func dnsAt(p path, at int64, rtt time.Duration, info events.DNSInfo) dnsSample {
	return dnsSample{sample{Time: t0 + at, Flow: p.udpFlow(false), RTT: rtt}, events.SourceDNS, info}
}

// TestDNSMatch: a query's transaction id is answered by the response with
// the same id on the reverse tuple: exact RTT, the question's type, rcode
// and TC bit; several queries outstanding at once on one tuple, answered
// out of order; a question name longer than the walk gives type 0.
func TestDNSMatch(t *testing.T) {
	long := strings.Repeat("a.", 40) + "example"
	for _, p := range []path{dnsPath4, dnsPath6} {
		t.Run(p.a.ip.String(), func(t *testing.T) {
			h := newHarness(t, dnsConfig())
			q := func(at int64, id uint16, name string, qtype uint16) step {
				return step{at, p.dnsUDP(true, dnsMsg{id: id, name: name, qtype: qtype}), true}
			}
			r := func(at int64, m dnsMsg) step {
				m.response = true
				return step{at, p.dnsUDP(false, m), false}
			}
			h.run([]step{
				q(0, 0x1111, "example.com", 1),
				r(12_345_678, dnsMsg{id: 0x1111, name: "example.com", qtype: 1, answer: 16}),
				q(100*ms, 0x2222, "www.example.org", 28),
				q(101*ms, 0x3333, "nx.example.org", 1),
				r(120*ms, dnsMsg{id: 0x3333, name: "nx.example.org", qtype: 1, rcode: 3}),
				r(130*ms+5, dnsMsg{id: 0x2222, name: "www.example.org", qtype: 28, tc: true}),
				q(200*ms, 0x4444, long, 16),
				r(210*ms, dnsMsg{id: 0x4444, name: long, qtype: 16}),
			})
			h.checkDNS(
				dnsAt(p, 12_345_678, 12_345_678, events.DNSInfo{QType: 1}),
				dnsAt(p, 120*ms, 19*time.Millisecond, events.DNSInfo{QType: 1, RCode: 3}),
				dnsAt(p, 130*ms+5, 30*time.Millisecond+5, events.DNSInfo{QType: 28, Truncated: true}),
				dnsAt(p, 210*ms, 10*time.Millisecond, events.DNSInfo{}),
			)
			if s := h.stats(); s.Samples[events.SourceDNS] != 4 || s.Timestamps != 0 || s.DNSDuplicateQueries != 0 || s.DNSUnmatchedResponses != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestDNSDuplicatesAndStrays: a query repeated with its id still
// outstanding (a retransmission, or two queries with one id) makes the
// response ambiguous: no sample, counted; responses that answer nothing
// outstanding (to the dropped timing, a second response, one without a
// query, one of an unknown flow) are counted and give nothing; other ports
// are not DNS.
func TestDNSDuplicatesAndStrays(t *testing.T) {
	p := dnsPath4
	h := newHarness(t, dnsConfig())
	q := func(at int64, id uint16) step {
		return step{at, p.dnsUDP(true, dnsMsg{id: id, name: "a.example", qtype: 1}), true}
	}
	r := func(at int64, id uint16) step {
		return step{at, p.dnsUDP(false, dnsMsg{id: id, response: true, name: "a.example", qtype: 1}), false}
	}
	other := path{a: ep("10.0.0.1", 40054), b: ep("192.0.2.53", 5353)}
	h.run([]step{
		q(0, 7),
		q(1000*ms, 7), // retransmission: timing dropped
		r(1010*ms, 7), // nothing
		r(1011*ms, 7), // a duplicate response: unmatched
		r(1020*ms, 8), // never asked: unmatched
		q(2000*ms, 9), // a new id: timed
		r(2003*ms, 9), // 3 ms
		{2100 * ms, dnsPath6.dnsUDP(false, dnsMsg{id: 5, response: true, name: "b.example", qtype: 1}), false}, // unknown flow
		{2200 * ms, other.dnsUDP(true, dnsMsg{id: 1, name: "c.example", qtype: 1}), true},                      // port 5353: not DNS here
		{2201 * ms, other.dnsUDP(false, dnsMsg{id: 1, response: true, name: "c.example", qtype: 1}), false},
	})
	h.checkDNS(dnsAt(p, 2003*ms, 3*time.Millisecond, events.DNSInfo{QType: 1}))
	if s := h.stats(); s.DNSDuplicateQueries != 1 || s.DNSUnmatchedResponses != 4 || s.Timestamps != 0 || s.Flows != 1 {
		t.Errorf("stats %+v: want 1 duplicate query, 4 unmatched responses, no timestamp left, 1 flow", s)
	}

	// --dns-ports 5353 takes the other port instead.
	cfg := dnsConfig()
	cfg.DNSPorts = [loader.DNSPortSlots]uint16{5353}
	h = newHarness(t, cfg)
	h.run([]step{
		{0, other.dnsUDP(true, dnsMsg{id: 1, name: "c.example", qtype: 1}), true},
		{4 * ms, other.dnsUDP(false, dnsMsg{id: 1, response: true, name: "c.example", qtype: 1}), false},
		q(10*ms, 2), r(11*ms, 2),
	})
	h.checkDNS(dnsAt(other, 4*ms, 4*time.Millisecond, events.DNSInfo{QType: 1}))
}

// TestDNSOverTCP: over TCP the message follows its two-byte length; the
// segments carrying messages give DNS samples, the others (handshake,
// ACKs) stay TCP's.
func TestDNSOverTCP(t *testing.T) {
	for _, p := range []path{dnsPath4, dnsPath6} {
		t.Run(p.a.ip.String(), func(t *testing.T) {
			cfg := dnsConfig()
			cfg.TrackTCP = true
			h := newHarness(t, cfg)
			h.run([]step{
				{0, p.dnsTCP(true, 1, 1, dnsMsg{id: 0xabcd, name: "example.net", qtype: 15}), true},
				{1 * ms, p.ack(false, 5, 1), false},
				{7_000_003, p.dnsTCP(false, 1, 40, dnsMsg{id: 0xabcd, response: true, name: "example.net", qtype: 15, rcode: 2, answer: 40}), false},
			})
			f := p.tcpFlow(false)
			h.checkDNS(dnsSample{sample{Time: t0 + 7_000_003, Flow: f, RTT: 7_000_003}, events.SourceDNS, events.DNSInfo{QType: 15, RCode: 2}})
		})
	}
}

// TestDNSNames: with --dns-names the response's question name comes with
// the sample, escaped where it is not a plain hostname byte; without it,
// no name (the programs never read it).
func TestDNSNames(t *testing.T) {
	p := dnsPath4
	for _, names := range []bool{true, false} {
		cfg := dnsConfig()
		cfg.DNSNames = names
		h := newHarness(t, cfg)
		long := strings.Repeat("abcdefghij.", 20) + "example" // 218 bytes on the wire
		for i, name := range []string{"www.example.com", "we ird.exa\"mple", long} {
			at := int64(i) * 10 * ms
			h.feed(p.dnsUDP(true, dnsMsg{id: uint16(i), name: name, qtype: 1}), t0+at, true)
			h.feed(p.dnsUDP(false, dnsMsg{id: uint16(i), response: true, name: name, qtype: 1}), t0+at+ms, false)
		}
		want := []string{"www.example.com.", `we\032ird.exa\034mple.`, long + "."}
		got := h.takeRTTs()
		if len(got) != len(want) {
			t.Fatalf("names=%v: %d samples, want %d", names, len(got), len(want))
		}
		for i, r := range got {
			w := want[i]
			if !names {
				w = ""
			}
			if r.DNS.Name != w || r.DNS.QType != 1 {
				t.Errorf("names=%v: sample %d: name %q qtype %d, want %q", names, i, r.DNS.Name, r.DNS.QType, w)
			}
		}
	}
}
