// Package pdmtest holds a capture of a PDM conversation for the tests of
// `rttscope pdm --read` and `rttscope replay --pdm`: a UDP exchange whose
// packets all carry PDM options with known values (internal/pdm's tests
// work out the records by hand).
package pdmtest

import (
	"net/netip"
	"path/filepath"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// T0 is the capture time of the conversation's first packet.
const T0 = int64(1763900000123456789)

// The two hosts: A speaks first.
var (
	HostA = netip.MustParseAddr("2001:db8::a")
	HostB = netip.MustParseAddr("2001:db8::b")
)

// WithPDM returns pkt's frame with a Destination Options header carrying
// a PDM option of the given fields in front of its other extension
// headers.
func WithPDM(pkt pktcraft.Packet, sDTLR, sDTLS uint8, psntp, psnlr, dtlr, dtls uint16) []byte {
	pkt.IPv6ExtHeaders = append([]pktcraft.ExtHeader{pktcraft.DestOpts(pktcraft.PDMOption(sDTLR, sDTLS, psntp, psnlr, dtlr, dtls)...)}, pkt.IPv6ExtHeaders...)
	return pkt.MustBytes()
}

// Conversation is a UDP exchange between HostA:40000 and HostB:53, every
// packet carrying PDM, plus an IPv4 packet and an IPv6 packet without
// PDM, which give no record. fromA says which packets A sent.
func Conversation() (frames []capture.TimedFrame, fromA []bool) {
	a2b := pktcraft.Packet{Src: HostA, Dst: HostB, UDP: &pktcraft.UDP{SrcPort: 40000, DstPort: 53, Payload: []byte("query")}}
	b2a := pktcraft.Packet{Src: HostB, Dst: HostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 40000, Payload: []byte("answer")}}
	v4 := pktcraft.Packet{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"), UDP: &pktcraft.UDP{SrcPort: 1, DstPort: 2}}
	ms := int64(time.Millisecond)
	add := func(ts int64, a bool, b []byte) {
		frames = append(frames, capture.TimedFrame{Timestamp: T0 + ts, Data: b})
		fromA = append(fromA, a)
	}
	add(0, true, WithPDM(a2b, 0, 0, 100, 0, 0, 0))
	add(1*ms, true, v4.MustBytes())
	add(10*ms, false, WithPDM(b2a, 34, 0, 500, 100, 0xE35F, 0))
	add(20*ms, false, b2a.MustBytes())
	add(30*ms, true, WithPDM(a2b, 35, 36, 101, 500, 0x8000, 0xC000))
	add(35*ms, false, WithPDM(b2a, 24, 36, 501, 101, 0xE8D4, 0xC000))
	return frames, fromA
}

// TB is the part of testing.TB that WritePcap uses. The package does not
// import testing: the bench, which goes into the rttscope binary, uses it.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// WritePcap writes the conversation as a pcap file in dir and returns its
// path.
func WritePcap(t TB, dir string) string {
	t.Helper()
	frames, _ := Conversation()
	p := filepath.Join(dir, "pdm-conversation.pcap")
	if err := capture.WritePcap(p, capture.LinkTypeEthernet, true, frames); err != nil {
		t.Fatal(err)
	}
	return p
}
