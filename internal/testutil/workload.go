package testutil

import (
	"net/netip"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// LabSample fills e with the i-th RTT sample of the sink benchmarks'
// workload: 1,000 TCP flows (10 ms to 59 ms), a sample per flow every
// 20 ms, counters growing.
func LabSample(i int, e *events.RTT) {
	const flows = 1000
	f := i % flows
	round := i / flows
	rtt := time.Duration(10+f%50)*time.Millisecond + time.Duration((i*7919)%2000)*time.Microsecond
	*e = events.RTT{
		Time: 1_700_000_000_000_000_000 + int64(round)*20_000_000 + int64(f)*20_000,
		Flow: events.Flow{
			Src:   events.Endpoint{IP: netip.AddrFrom4([4]byte{192, 0, 2, byte(f%8 + 1)}), Port: 443},
			Dst:   events.Endpoint{IP: netip.AddrFrom4([4]byte{10, 1, byte(f / 250), byte(f%250 + 1)}), Port: uint16(30000 + f)},
			Proto: events.ProtoTCP,
		},
		RTT: rtt, MinRTT: time.Duration(10+f%50) * time.Millisecond, SmoothedRTT: rtt,
		SentPackets: uint64(round*2 + 1), SentBytes: uint64(round * 1448), RecPackets: uint64(round*2 + 1), RecBytes: uint64(round * 1448),
	}
}
