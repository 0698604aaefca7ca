package parquetout

// BenchmarkFileSinks measures each file sink of --write (docs/files.md)
// on RTT samples of 1,000 TCP flows (testutil.LabSample): events per
// second through the format writer into output.Rotating, and bytes on
// disk per sample. internal/sink's BenchmarkSinks measures the others.
//
//	go test ./internal/parquetout/ -run '^$' -bench FileSinks -benchtime 1000000x

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/output"
	"github.com/rttscope/rttscope/internal/testutil"
)

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
				testutil.LabSample(n, &e)
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
