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

// Traffic counts the packets and bytes (IP header and payload) of one
// direction of a prefix in one interval.
type Traffic struct {
	Packets [NumClasses]uint64
	Bytes   [NumClasses]uint64
	// ECN counts packets by ECN codepoint: Not-ECT, ECT(1), ECT(0), CE.
	ECN [4]uint64
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
	// RX counts packets from the prefix seen on ingress, TX packets to it
	// seen on egress (swapped with --aggregate-reverse).
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
}
