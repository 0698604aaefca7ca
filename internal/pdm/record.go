package pdm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"

	"github.com/rttscope/rttscope/internal/probe"
)

// Event flags (PDM_EV_* in bpf/pdm.h).
const (
	evEgress    = 0x01
	evRoundTrip = 0x02
	evPaired    = 0x04
)

// Record is one PDM option seen, as written in json/jsonl (docs/pdm.md
// lists the fields). Durations are integer nanoseconds. The wire fields
// keep tshark's names (ipv6.opt.pdm.*).
type Record struct {
	Timestamp int64  `json:"timestamp"` // Unix ns
	SrcIP     string `json:"src_ip"`
	SrcPort   uint16 `json:"src_port"`
	DestIP    string `json:"dest_ip"`
	DestPort  uint16 `json:"dest_port"`
	Protocol  string `json:"protocol"`
	Direction string `json:"direction"` // ingress, or egress (--passive)
	Ifindex   uint32 `json:"ifindex"`

	PSNThisPkt    uint16 `json:"psn_this_pkt"`
	PSNLastRecv   uint16 `json:"psn_last_recv"`
	ScaleDTLR     uint8  `json:"scale_dtlr"`
	DeltaLastRecv uint16 `json:"delta_last_recv"`
	ScaleDTLS     uint8  `json:"scale_dtls"`
	DeltaLastSent uint16 `json:"delta_last_sent"`

	// DTLR decoded: how long the sender held the last packet it received
	// on this 5-tuple before sending this one (its server delay).
	DTLR int64 `json:"dtlr"`
	// DTLS decoded: the sender's round trip, from its previous send to
	// the last reception.
	DTLS int64 `json:"dtls"`
	// RoundTrip: this host's round trip, from sending the packet that
	// this one's PSNLR names to this arrival (ingress, omitted when the
	// PSNLR is not the last PSN sent).
	RoundTrip *int64 `json:"round_trip,omitempty"`
	// NetworkRTT: the round trip without the peer's server delay:
	// round_trip - dtlr; with --passive, dtls minus the DTLR of the
	// packet PSNLR names (omitted when there is no such pair).
	NetworkRTT *int64 `json:"network_rtt,omitempty"`
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 58:
		return "ICMPv6"
	}
	return fmt.Sprint(p)
}

// NewRecord turns a kernel event into a record; clockOffset maps the
// event's CLOCK_MONOTONIC timestamp to Unix time.
func NewRecord(e *probe.PdmPdmEvent, clockOffset int64) Record {
	r := Record{
		Timestamp:     int64(e.Timestamp) + clockOffset,
		SrcIP:         netip.AddrFrom16(e.Saddr).String(),
		SrcPort:       e.Sport,
		DestIP:        netip.AddrFrom16(e.Daddr).String(),
		DestPort:      e.Dport,
		Protocol:      protoName(e.Proto),
		Direction:     "ingress",
		Ifindex:       e.Ifindex,
		PSNThisPkt:    e.Psntp,
		PSNLastRecv:   e.Psnlr,
		ScaleDTLR:     e.ScaleDtlr,
		DeltaLastRecv: e.Dtlr,
		ScaleDTLS:     e.ScaleDtls,
		DeltaLastSent: e.Dtls,
		DTLR:          int64(Decode(e.Dtlr, e.ScaleDtlr)),
		DTLS:          int64(Decode(e.Dtls, e.ScaleDtls)),
	}
	if e.Flags&evEgress != 0 {
		r.Direction = "egress"
	}
	switch {
	case e.Flags&evRoundTrip != 0:
		rt := int64(e.RoundTrip)
		r.RoundTrip = &rt
		if rt >= r.DTLR {
			n := rt - r.DTLR
			r.NetworkRTT = &n
		}
	case e.Flags&evPaired != 0:
		if d := int64(Decode(e.PairDtlr, e.PairScale)); r.DTLS >= d {
			n := r.DTLS - d
			r.NetworkRTT = &n
		}
	}
	return r
}

// Formats of the command's -F flag.
var Formats = []string{"jsonl", "json"}

// Writer writes records as jsonl (one object per line) or json (one root
// array, closed by Close).
type Writer struct {
	w     *bufio.Writer
	array bool
	n     int
}

// NewWriter writes records in format (one of Formats) to w.
func NewWriter(w io.Writer, format string) (*Writer, error) {
	switch format {
	case "jsonl", "json":
	default:
		return nil, fmt.Errorf("invalid --format %q: want jsonl or json", format)
	}
	return &Writer{w: bufio.NewWriter(w), array: format == "json"}, nil
}

// Write writes one record.
func (w *Writer) Write(r any) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if w.array {
		sep := ",\n"
		if w.n == 0 {
			sep = "[\n"
		}
		_, _ = w.w.WriteString(sep)
	}
	w.n++
	_, _ = w.w.Write(b)
	if !w.array {
		_ = w.w.WriteByte('\n')
	}
	return nil
}

// Flush writes out buffered records.
func (w *Writer) Flush() error { return w.w.Flush() }

// Close ends the document (json) and flushes.
func (w *Writer) Close() error {
	if w.array {
		if w.n == 0 {
			_, _ = w.w.WriteString("[")
		}
		_, _ = w.w.WriteString("\n]\n")
	}
	return w.w.Flush()
}
