package pdm

import (
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
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

// BenchmarkLiveReader: the ingress program sends records at about 15,000
// a second (20 runs, then 0.5 ms of sleep) while the run loop reads them
// (packet mode, jsonl to io.Discard); reports the process's CPU time and
// context switches per record. It measures what waking the reader costs
// (the programs never wake it: it polls; docs/pdm.md, Cost). Root.
func BenchmarkLiveReader(b *testing.B) {
	testutil.RequireRoot(b)
	objs, err := Load(Config{MapSize: DefaultMapSize, Lifetime: DefaultLifetime})
	if err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	reply := pktcraft.Packet{Src: hostB, Dst: hostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}}
	frame := withPDM(reply, 34, 0, 7, 0, 0xE35F, 0)
	ctx, cancel := context.WithCancel(context.Background())
	w, _ := format.New("jsonl", io.Discard, format.Options{})
	done := make(chan error, 1)
	go func() { _, err := objs.loop(ctx, w, 0); done <- err }()
	var r0, r1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &r0)
	n := 0
	for b.Loop() {
		if _, err := objs.PdmTcIngress.Run(&ebpf.RunOptions{Data: frame, Repeat: 1}); err != nil {
			b.Fatal(err)
		}
		if n++; n%20 == 0 {
			time.Sleep(500 * time.Microsecond)
		}
	}
	_ = unix.Getrusage(unix.RUSAGE_SELF, &r1)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	cpu := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e3/float64(n), "cpu-µs/record")
	b.ReportMetric(float64(r1.Nvcsw-r0.Nvcsw+r1.Nivcsw-r0.Nivcsw)/float64(n), "ctxsw/record")
}
