package replay

// Per-packet cost of the tc programs, measured in the kernel by
// BPF_PROG_TEST_RUN with a repeat count (the kernel times the loop and
// reports the mean per run), so the syscall is not part of it. Compare
// BenchmarkProgramTCP with BenchmarkProgramEmpty, the cost of running any
// tc program on the same packet:
//
//	go test ./internal/replay/ -run '^$' -bench 'Program' -benchtime 1000000x

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
)

// benchProg runs prog b.N times on frame inside one BPF_PROG_TEST_RUN and
// reports the kernel's mean time per run.
func benchProg(b *testing.B, prog *ebpf.Program, frame []byte) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	_, perRun, err := prog.Benchmark(frame, b.N, b.ResetTimer)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(perRun)/float64(time.Nanosecond), "ns/op")
}

// BenchmarkProgramTCP: the live (non-replay) programs as the monitor loads
// them, on packets of an established flow. After the first run the data
// packet's TSval is known, which is the common case between timestamps
// (rate limit): parse, flow lookup, counters.
func BenchmarkProgramTCP(b *testing.B) {
	testutil.RequireRoot(b)
	objs, err := loader.Load(loader.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	p := pathV4
	data := p.tcp(true, pktcraft.TCP{ACK: true, PSH: true, Seq: 1, TSval: 100, TSecr: 7, Payload: payload(1400)})
	ack := p.ack(false, 8, 99)
	b.Run("egress-data", func(b *testing.B) { benchProg(b, objs.RttscopeTcEgress, data) })
	b.Run("ingress-ack", func(b *testing.B) { benchProg(b, objs.RttscopeTcIngress, ack) })
	v6 := pathV6
	v6.ext = []pktcraft.ExtHeader{pktcraft.HopByHop(), pktcraft.DestOpts()}
	data6 := v6.tcp(true, pktcraft.TCP{ACK: true, PSH: true, Seq: 1, TSval: 100, TSecr: 7, Payload: payload(1400)})
	b.Run("egress-data-ipv6-ext", func(b *testing.B) { benchProg(b, objs.RttscopeTcEgress, data6) })
}

// BenchmarkProgramEmpty: a tc program that returns at once (bpf/empty.c).
func BenchmarkProgramEmpty(b *testing.B) {
	testutil.RequireRoot(b)
	var objs probe.EmptyObjects
	if err := probe.LoadEmptyObjects(&objs, nil); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	data := pathV4.tcp(true, pktcraft.TCP{ACK: true, PSH: true, Seq: 1, TSval: 100, TSecr: 7, Payload: payload(1400)})
	benchProg(b, objs.EmptyTc, data)
}
