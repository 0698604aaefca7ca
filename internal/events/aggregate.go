package events

import (
	"net/netip"
	"time"
)

// Protocol classes of the traffic counters, in bpf/agg.h order.
const (
	ClassTCP = iota
	ClassUDP
	ClassICMP // ICMP and ICMPv6
	ClassOther
	NumClasses
)

// ClassNames are the json keys of the protocol classes.
var ClassNames = [NumClasses]string{"tcp", "udp", "icmp", "other"}

// ECNNames are the json keys of the ECN codepoints (IP TOS & 3).
var ECNNames = [4]string{"not_ect", "ect1", "ect0", "ce"}

// ePPing's traffic classes (the keys of its rx_stats and tx_stats): TCP
// packets with the timestamp option (the ones tracked), other TCP packets,
// everything else.
const (
	EPPTCPTS = iota
	EPPTCPNoTS
	EPPOther
	NumEPPClasses
)

// EPPClassNames are ePPing's json keys of its traffic classes.
var EPPClassNames = [NumEPPClasses]string{"TCP_TS", "TCP_noTS", "other"}

// Traffic counts the packets of one direction of a prefix in one interval
// (from the prefix, or to it).
type Traffic struct {
	// Packets and Bytes (IP header and payload) by protocol class.
	Packets [NumClasses]uint64
	Bytes   [NumClasses]uint64
	// ECN counts packets by ECN codepoint: Not-ECT, ECT(1), ECT(0), CE.
	ECN [4]uint64
	// EPPPackets and EPPBytes count the same packets in ePPing's classes,
	// bytes from the link-layer header on (ePPing's unit).
	EPPPackets, EPPBytes [NumEPPClasses]uint64
}

// EPPTotals sums ePPing's classes: its rxpkts/rxbytes (or tx).
func (t *Traffic) EPPTotals() (pkts, bytes uint64) {
	for i := range t.EPPPackets {
		pkts += t.EPPPackets[i]
		bytes += t.EPPBytes[i]
	}
	return pkts, bytes
}

// TotalPackets sums the packets of every class.
func (t *Traffic) TotalPackets() (n uint64) {
	for _, v := range t.Packets {
		n += v
	}
	return n
}

// TotalBytes sums the bytes of every class.
func (t *Traffic) TotalBytes() (n uint64) {
	for _, v := range t.Bytes {
		n += v
	}
	return n
}

// HistBin is one non-empty bin of a log-linear histogram (internal/hist):
// Count samples in [Lower, Upper) ns. Upper is 0 for the overflow bin.
type HistBin struct {
	Lower, Upper uint64
	Count        uint64
}

// Aggregate is the summary of one IP prefix over one interval (aggregated
// mode, docs/aggregation.md).
type Aggregate struct {
	// Time is the end of the interval and Start its beginning, Unix ns
	// (capture time in replay).
	Time, Start int64
	Prefix      netip.Prefix
	// PrefixID, when not 0, is a number given to the prefix for the run
	// that stands in for it, which is then invalid (--anonymize drop).
	PrefixID uint64
	// RX counts packets from the prefix, TX packets to it (ePPing's
	// rx_stats and tx_stats), on either hook.
	RX, TX Traffic
	// Count is the number of RTT samples; the other RTT fields are zero
	// when it is.
	Count          uint64
	Min, Mean, Max time.Duration // exact
	// Sum is the exact sum of the samples (Mean is rounded down); the
	// metrics sink's histograms carry it, the formats print Mean.
	Sum                time.Duration
	P50, P90, P95, P99 time.Duration // from the histogram
	Histogram          []HistBin     // non-empty bins, ascending
	// BySource counts the samples of each source (indexed by Source).
	BySource [NumSources]uint64
	// LinHist is ePPing's histogram: counts in 4 ms bins from 0, up to
	// the bin of Max (the 250th bin also holds everything above 1 s).
	LinHist []uint32
	// Global, when not nil, makes this record ePPing's global record of
	// the interval instead of a prefix's: Prefix and the rest are unset.
	Global *GlobalCounters
	// Meta, when not nil, makes this record ePPing's first record of an
	// aggregated run, which describes the aggregation: only Time is set
	// besides.
	Meta *AggregateMeta
}

// AggregateMeta describes an aggregated run, as ePPing's first record.
type AggregateMeta struct {
	Interval, Timeout  time.Duration
	PrefixV4, PrefixV6 uint8
}

// Width and number of ePPing's histogram bins (bpf/agg.h).
const (
	LinBinWidth = 4 * time.Millisecond
	LinBins     = 250
)

// GlobalCounters is ePPing's global record of one interval: every packet
// seen, by IP protocol, by ECN codepoint, and the updates lost because a
// map was full.
type GlobalCounters struct {
	// ProtoPackets and ProtoBytes count IP packets by IP protocol number,
	// bytes from the link-layer header on; NonIP* the other packets.
	ProtoPackets, ProtoBytes [256]uint64
	NonIPPackets, NonIPBytes uint64
	// ECN counts IP packets by ECN codepoint: Not-ECT, ECT(1), ECT(0), CE.
	ECN [4]uint64
	// Errors: timestamps not stored, flows not created (maps full), and
	// prefix entries not created (counted in the backup entry instead).
	PacketTSStore, FlowCreate, AggSubnetCreate uint64
}
