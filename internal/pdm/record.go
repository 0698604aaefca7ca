package pdm

import (
	"net/netip"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/probe"
)

// Event flags (PDM_EV_* in bpf/pdm.h).
const (
	evEgress    = 0x01
	evRoundTrip = 0x02
	evPaired    = 0x04
)

// NewRecord fills p from a kernel event; clockOffset maps the event's
// CLOCK_MONOTONIC timestamp to Unix time. The derived delays are those
// docs/pdm.md describes: the round trip when the peer's PSNLR names the
// last packet this host sent, the network RTT as the round trip minus the
// peer's DTLR (or, passive, this packet's DTLS minus the DTLR of the
// packet its PSNLR names), when not negative.
func NewRecord(e *probe.PdmPdmEvent, clockOffset int64, p *events.PDM) {
	*p = events.PDM{
		Time: int64(e.Timestamp) + clockOffset,
		Flow: events.Flow{
			Src:   events.Endpoint{IP: netip.AddrFrom16(e.Saddr), Port: e.Sport},
			Dst:   events.Endpoint{IP: netip.AddrFrom16(e.Daddr), Port: e.Dport},
			Proto: events.Protocol(e.Proto),
		},
		Egress:        e.Flags&evEgress != 0,
		Ifindex:       e.Ifindex,
		PSNThisPkt:    e.Psntp,
		PSNLastRecv:   e.Psnlr,
		ScaleDTLR:     e.ScaleDtlr,
		DeltaLastRecv: e.Dtlr,
		ScaleDTLS:     e.ScaleDtls,
		DeltaLastSent: e.Dtls,
		DTLR:          Decode(e.Dtlr, e.ScaleDtlr),
		DTLS:          Decode(e.Dtls, e.ScaleDtls),
	}
	switch {
	case e.Flags&evRoundTrip != 0:
		p.RoundTrip, p.HasRoundTrip = time.Duration(e.RoundTrip), true
		if p.RoundTrip >= p.DTLR {
			p.NetworkRTT, p.HasNetworkRTT = p.RoundTrip-p.DTLR, true
		}
	case e.Flags&evPaired != 0:
		if d := Decode(e.PairDtlr, e.PairScale); p.DTLS >= d {
			p.NetworkRTT, p.HasNetworkRTT = p.DTLS-d, true
		}
	}
}
