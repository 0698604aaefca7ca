package parquetout

// BenchmarkFileSinks measures each file sink of --write (docs/files.md)
// on RTT samples of 1,000 TCP flows (10 ms to 59 ms, a sample per flow
// every 20 ms, counters growing): events per second through the format
// writer into output.Rotating, and bytes on disk per sample.
//
//	go test ./internal/parquetout/ -run '^$' -bench FileSinks -benchtime 1000000x

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/output"
)

// labSample is the i-th sample of the 1,000-flow workload.
func labSample(i int, e *events.RTT) {
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

func BenchmarkFileSinks(b *testing.B) {
	for _, sink := range []struct{ name, file, format string }{
		{"jsonl", "rtt.jsonl", "jsonl"},
		{"jsonl+zstd", "rtt.jsonl.zst", "jsonl"},
		{"jsonl+gzip", "rtt.jsonl.gz", "jsonl"},
		{"parquet", "rtt.parquet", "parquet"},
	} {
		b.Run(sink.name, func(b *testing.B) {
			dir := b.TempDir()
			r, err := output.OpenRotating(filepath.Join(dir, sink.file), output.RotateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var w format.Writer
			if sink.format == "parquet" {
				w, err = New(r, format.Options{})
			} else {
				w, err = format.New(sink.format, r, format.Options{})
			}
			if err != nil {
				b.Fatal(err)
			}
			r.SetRestarter(w)
			var e events.RTT
			n := 0
			b.ResetTimer()
			for b.Loop() {
				labSample(n, &e)
				if err := w.WriteRTT(&e); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			files, _ := r.Completed()
			var size int64
			for _, f := range files {
				st, err := os.Stat(f)
				if err != nil {
					b.Fatal(err)
				}
				size += st.Size()
			}
			b.ReportMetric(float64(size)/float64(n), "bytes/sample")
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
