package sink_test

// BenchmarkSinks measures the sinks of docs/sinks.md on the workload of
// BenchmarkFileSinks (testutil.LabSample, 1,000 TCP flows): events per
// second into each, and for Kafka the bytes per sample in the broker's log
// (zstd batches, as produced). Kafka runs a real broker on this machine
// (internal/testservers), so its figures include the broker's CPU on the
// same cores; each run waits for every acknowledgement.
//
//	go test ./internal/sink/ -run '^$' -bench . -benchtime 200000x

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/kafkasink"
	"github.com/rttscope/rttscope/internal/metrics"
	"github.com/rttscope/rttscope/internal/output"
	"github.com/rttscope/rttscope/internal/sink"
	"github.com/rttscope/rttscope/internal/testservers"
	"github.com/rttscope/rttscope/internal/testutil"
)

// jsonlFiles returns a jsonl writer into rotating files in a temporary
// directory, closing them with the writer.
func jsonlFiles(b *testing.B) format.Writer {
	r, err := output.OpenRotating(filepath.Join(b.TempDir(), "rtt.jsonl"), output.RotateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := format.New("jsonl", r, format.Options{})
	if err != nil {
		b.Fatal(err)
	}
	r.SetRestarter(w)
	return closeBoth{w, r}
}

type closeBoth struct {
	format.Writer
	r *output.Rotating
}

func (c closeBoth) Close() error {
	err := c.Writer.Close()
	if rerr := c.r.Close(); err == nil {
		err = rerr
	}
	return err
}

// cpuTime is the CPU time this process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run writes b.N samples to w, flushing every 10,000 as the monitor does
// every 200 ms, closes it and reports events/s and this process's CPU
// time per event (for Kafka: the producer's share, without the broker's).
// Both count until Close has returned (for Kafka: every message
// acknowledged), which b.Elapsed, stopped when b.Loop ends, would not.
func run(b *testing.B, w format.Writer) int {
	var e events.RTT
	n := 0
	cpu, start := cpuTime(b), time.Now()
	for b.Loop() {
		testutil.LabSample(n, &e)
		if err := w.WriteRTT(&e); err != nil {
			b.Fatal(err)
		}
		n++
		if n%10_000 == 0 {
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(n), "cpu-ns/event")
	return n
}

func BenchmarkSinks(b *testing.B) {
	testutil.RequireRoot(b) // as the rest of make bench
	// Files through a Fanout's queue (as with several sinks), to compare
	// with BenchmarkFileSinks/jsonl (the writer called directly).
	b.Run("files-queued", func(b *testing.B) {
		f, err := sink.New(sink.DefaultQueue, sink.Sink{Name: "files", Writer: jsonlFiles(b)})
		if err != nil {
			b.Fatal(err)
		}
		run(b, f)
	})
	k := testservers.StartKafkaJIT(b)
	topics := 0
	newKafka := func(b *testing.B, f string) (*kafkasink.Writer, string) {
		topics++
		topic := fmt.Sprintf("bench-%s-%d", f, topics)
		k.CreateTopic(b, topic, 4)
		o, err := kafkasink.ParseSpec("brokers=" + k.Addr + ",topic=" + topic + ",format=" + f)
		if err != nil {
			b.Fatal(err)
		}
		o.SpoolDir, o.SpoolSize = b.TempDir(), 1<<30
		w, err := kafkasink.New(o, format.Options{}, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		return w, topic
	}
	for _, f := range []string{"jsonl", "protobuf"} {
		b.Run("kafka-"+f, func(b *testing.B) {
			w, topic := newKafka(b, f)
			n := run(b, w)
			var s events.SinkStats
			w.Counters(&s)
			if s.Acked != uint64(n) {
				b.Fatalf("%d of %d acknowledged", s.Acked, n)
			}
			b.ReportMetric(float64(k.TopicBytes(b, topic))/float64(n), "bytes/sample")
		})
	}
	// Files, Kafka (protobuf) and metrics at once, each behind its queue.
	b.Run("files+kafka+metrics", func(b *testing.B) {
		kw, _ := newKafka(b, "protobuf")
		m, err := metrics.New(metrics.Options{Addr: "127.0.0.1:0", MaxPrefixes: 1000})
		if err != nil {
			b.Fatal(err)
		}
		f, err := sink.New(sink.DefaultQueue,
			sink.Sink{Name: "files", Writer: jsonlFiles(b)},
			sink.Sink{Name: "kafka", Policy: sink.Spool, Writer: kw, Counters: kw.Counters},
			sink.Sink{Name: "metrics", Policy: sink.Drop, Writer: m, Kinds: sink.Stats | sink.Aggregates})
		if err != nil {
			b.Fatal(err)
		}
		run(b, f)
		for _, s := range f.Stats() {
			if s.Dropped != 0 {
				b.Fatalf("%s dropped %d", s.Name, s.Dropped)
			}
		}
	})
}

// BenchmarkMetricsAggregates measures the metrics sink on aggregated
// records of 1,000 prefixes (100 histogram bins each): records per second
// added, and the size of a scrape per prefix (text format).
func BenchmarkMetricsAggregates(b *testing.B) {
	m, err := metrics.New(metrics.Options{Addr: "127.0.0.1:0", MaxPrefixes: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.Close() }()
	recs := make([]events.Aggregate, 1000)
	for i := range recs {
		a := &recs[i]
		a.Prefix = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i / 256), byte(i % 256), 0}), 24)
		for j := range 100 {
			lo := uint64(1_000_000 + 40_000*j)
			a.Histogram = append(a.Histogram, events.HistBin{Lower: lo, Upper: lo + 31_250, Count: uint64(j%7 + 1)})
			a.Count += uint64(j%7 + 1)
		}
		a.Sum = time.Duration(a.Count) * 3 * time.Millisecond
	}
	n := 0
	for b.Loop() {
		if err := m.WriteAggregate(&recs[n%len(recs)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	b.StopTimer()
	resp, err := http.Get("http://" + m.Addr().String() + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	b.ReportMetric(float64(len(body))/float64(min(n, len(recs))), "scrape-bytes/prefix")
}

// discard is a sink writer that does nothing: what the queue alone costs.
type discard struct{ format.Writer }

func (discard) WriteRTT(*events.RTT) error { return nil }
func (discard) Flush() error               { return nil }
func (discard) Close() error               { return nil }

// BenchmarkFanoutOverhead is the cost of a Fanout's queue per record and
// sink: samples into one and into three sinks that discard them.
func BenchmarkFanoutOverhead(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("%d-sinks", n), func(b *testing.B) {
			null, err := format.New("jsonl", io.Discard, format.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var sinks []sink.Sink
			for i := range n {
				sinks = append(sinks, sink.Sink{Name: fmt.Sprint(i), Writer: discard{null}})
			}
			f, err := sink.New(sink.DefaultQueue, sinks...)
			if err != nil {
				b.Fatal(err)
			}
			run(b, f)
		})
	}
}
