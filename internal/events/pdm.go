package events

import (
	"time"

	"github.com/rttscope/rttscope/internal/hist"
)

// PDM is one RFC 8250 Performance and Diagnostic Metrics option seen by
// `rttscope pdm` (docs/pdm.md lists the fields as written).
type PDM struct {
	// Time is when the packet passed the hook (capture time when read
	// from a file), Unix ns.
	Time int64
	// Flow is the packet's: Src sent it (and the option).
	Flow Flow
	// Egress is true for a packet seen leaving (--passive), false for
	// one arriving.
	Egress bool
	// Ifindex is the interface (0 when read from a capture).
	Ifindex uint32
	// The option as on the wire, in host byte order.
	PSNThisPkt, PSNLastRecv      uint16
	ScaleDTLR, ScaleDTLS         uint8
	DeltaLastRecv, DeltaLastSent uint16
	// DTLR and DTLS decoded: the sender's delay between its last
	// reception and this packet (its server delay), and its round trip
	// from its previous send to its last reception. 0 when the sender
	// had no such delta.
	DTLR, DTLS time.Duration
	// RoundTrip is this host's round trip to the peer, from sending the
	// packet the option's PSNLR names to this arrival (HasRoundTrip).
	RoundTrip    time.Duration
	HasRoundTrip bool
	// NetworkRTT is the round trip without the peer's delay
	// (HasNetworkRTT): RoundTrip - DTLR, or with --passive DTLS minus
	// the DTLR of the packet PSNLR names.
	NetworkRTT    time.Duration
	HasNetworkRTT bool
}

// Direction names the hook: "ingress" or "egress".
func (p *PDM) Direction() string { return direction(p.Egress) }

func direction(egress bool) string {
	if egress {
		return "egress"
	}
	return "ingress"
}

// PDMInterval summarizes the PDM options of one 5-tuple and direction
// over one interval (`rttscope pdm --pdm-report interval`).
type PDMInterval struct {
	// Time is the end of the interval and Start its beginning, Unix ns.
	Time, Start int64
	// Flow names the sender of the options as Src, as PDM records do.
	Flow   Flow
	Egress bool
	// The delays of the options: the peer's DTLR and DTLS, and the
	// network RTT derived from them (as in PDM records).
	DTLR, DTLS, NetworkRTT Distribution
}

// Direction names the hook: "ingress" or "egress".
func (p *PDMInterval) Direction() string { return direction(p.Egress) }

// Distribution summarizes samples of one delay through the log-linear
// histogram of aggregated mode (internal/hist): exact count, minimum,
// mean and maximum, quantiles within half a bin, and the non-empty bins.
type Distribution struct {
	// Count is the number of samples; the other fields are zero when it
	// is.
	Count          uint64
	Min, Mean, Max time.Duration // exact
	// Sum is the exact sum of the samples (Mean is rounded down): what a
	// metrics sink's histogram carries; the formats print Mean.
	Sum                time.Duration
	P50, P90, P95, P99 time.Duration // from the histogram
	Histogram          []HistBin     // non-empty bins, ascending
}

// Set fills d from the samples' hist.Bins counts in h, their count, sum,
// minimum and maximum (ns). d.Histogram reuses its backing array.
func (d *Distribution) Set(h []uint32, count, sum, min, max uint64) {
	d.Histogram = d.Histogram[:0]
	d.Count = count
	if count == 0 {
		d.Min, d.Mean, d.Max, d.Sum, d.P50, d.P90, d.P95, d.P99 = 0, 0, 0, 0, 0, 0, 0, 0
		return
	}
	d.Min, d.Max = time.Duration(min), time.Duration(max)
	d.Mean, d.Sum = time.Duration(sum/count), time.Duration(sum)
	q := func(p float64) time.Duration {
		return time.Duration(hist.Quantile(h, count, p, min, max))
	}
	d.P50, d.P90, d.P95, d.P99 = q(0.5), q(0.9), q(0.95), q(0.99)
	for b, n := range h {
		if n == 0 {
			continue
		}
		hb := HistBin{Lower: hist.Lower(b), Count: uint64(n)}
		if b < hist.Overflow {
			hb.Upper = hist.Upper(b)
		}
		d.Histogram = append(d.Histogram, hb)
	}
}
