package pdm

import (
	"io"
	"net/netip"
	"testing"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/probe"
)

// benchEvents are ring buffer records of 1,000 5-tuples with varied
// delays, as decodeEvent gives them.
func benchEvents() []probe.PdmPdmEvent {
	evs := make([]probe.PdmPdmEvent, 4096)
	for i := range evs {
		e := &evs[i]
		e.Timestamp = uint64(i) * 1000
		e.Saddr = netip.MustParseAddr("2001:db8::1").As16()
		e.Daddr = netip.MustParseAddr("2001:db8:1::1").As16()
		e.Sport, e.Dport, e.Proto = uint16(i%1000), 443, 6
		e.Flags = evRoundTrip
		e.RoundTrip = uint64(10_000_000 + i*997%5_000_000)
		e.Dtlr, e.ScaleDtlr = Encode(uint64(100_000 + i*7919%2_000_000))
		e.Dtls, e.ScaleDtls = Encode(uint64(20_000_000 + i*104729%3_000_000))
	}
	return evs
}

// BenchmarkUserSpaceInterval is the user-space cost per ring buffer
// record of --pdm-report interval: decoding and binning.
func BenchmarkUserSpaceInterval(b *testing.B) {
	evs := benchEvents()
	a := NewAggregator()
	var p events.PDM
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		NewRecord(&evs[i%len(evs)], 0, &p)
		a.Add(&p)
	}
}

// BenchmarkUserSpacePacket is the same for --pdm-report packet with
// jsonl output (to io.Discard).
func BenchmarkUserSpacePacket(b *testing.B) {
	evs := benchEvents()
	w, _ := format.New("jsonl", io.Discard, format.Options{})
	var p events.PDM
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		NewRecord(&evs[i%len(evs)], 0, &p)
		if err := w.WritePDM(&p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIntervalClose is the cost of closing an interval of 1,000
// 5-tuples (three distributions each) into jsonl records.
func BenchmarkIntervalClose(b *testing.B) {
	evs := benchEvents()
	w, _ := format.New("jsonl", io.Discard, format.Options{})
	a := NewAggregator()
	var p events.PDM
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range evs {
			NewRecord(&evs[i], 0, &p)
			a.Add(&p)
		}
		b.StartTimer()
		if err := a.Close(0, 1, w.WritePDMInterval); err != nil {
			b.Fatal(err)
		}
	}
}
