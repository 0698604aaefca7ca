package metrics

import (
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/hist"
)

// NativeSchema is the resolution of the native histograms: schema 4, 16
// buckets per power of two, each 4.4% wide. The kernel's bins are at most
// 3.1% wide (internal/hist), so each falls mostly into one bucket.
const NativeSchema = 4

// DefaultBuckets are the upper bounds (seconds) of the classic buckets.
var DefaultBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// rttHistogram is the RTT histogram of one prefix since the start of the
// run: the sum of its aggregated records' kernel histograms, kept as the
// buckets it is exposed with. A kernel bin [lower, upper) goes, whole, to
// the bucket that holds its midpoint: the bucket counts are those of the
// kernel's histogram, placed within a bin's width (at most 3.1% of the
// value from 1 µs up; docs/sinks.md). Count and Sum are exact.
type rttHistogram struct {
	count   uint64
	sum     time.Duration
	classic []uint64      // per bound of DefaultBuckets, not cumulative; last is +Inf
	native  map[int]int64 // bucket index (schema NativeSchema) -> count
}

func newRTTHistogram(bounds int) *rttHistogram {
	return &rttHistogram{classic: make([]uint64, bounds+1), native: map[int]int64{}}
}

// add adds an aggregated record's samples.
func (h *rttHistogram) add(a *events.Aggregate, bounds []float64) {
	h.count += a.Count
	h.sum += a.Sum
	for _, b := range a.Histogram {
		mid := binMidpoint(b)
		i, _ := slices.BinarySearch(bounds, mid) // first bound >= mid
		h.classic[i] += b.Count
		h.native[nativeIndex(mid)] += int64(b.Count)
	}
}

// binMidpoint returns the middle of a kernel bin in seconds; for the
// overflow bin (Upper 0), its lower bound.
func binMidpoint(b events.HistBin) float64 {
	if b.Upper == 0 || b.Lower >= 1<<hist.MaxExp {
		return float64(b.Lower) / 1e9
	}
	return (float64(b.Lower) + float64(b.Upper)) / 2 / 1e9
}

// nativeIndex returns the native bucket of v > 0 seconds: bucket i holds
// (2^((i-1)/16), 2^(i/16)].
func nativeIndex(v float64) int {
	return int(math.Ceil(math.Log2(v) * (1 << NativeSchema)))
}

// metric returns h as one Prometheus histogram with both classic buckets
// and native ones (a server that takes native histograms uses those).
func (h *rttHistogram) metric(desc *prometheus.Desc, bounds []float64, created time.Time, labels ...string) prometheus.Metric {
	m := &dto.Histogram{
		SampleCount: proto.Uint64(h.count),
		SampleSum:   proto.Float64(h.sum.Seconds()),
		Schema:      proto.Int32(NativeSchema),
		// A zero threshold above 0 (client_golang's default, 2^-128 s:
		// no RTT is that small) marks the histogram as native even
		// when it has no bucket yet: Prometheus 2.42 (Debian 12) reads
		// an empty one as classic, and with it the whole family.
		ZeroThreshold:    proto.Float64(prometheus.DefNativeHistogramZeroThreshold),
		ZeroCount:        proto.Uint64(0),
		CreatedTimestamp: timestamppb.New(created),
	}
	var cum uint64
	for i, ub := range bounds {
		cum += h.classic[i]
		m.Bucket = append(m.Bucket, &dto.Bucket{UpperBound: proto.Float64(ub), CumulativeCount: proto.Uint64(cum)})
	}
	m.PositiveSpan, m.PositiveDelta = spans(h.native)
	return &histogramMetric{desc: desc, h: m, labels: prometheus.MakeLabelPairs(desc, labels)}
}

// spans encodes sparse buckets as the exposition format's spans (runs of
// consecutive indexes) and deltas (each count minus the previous one).
func spans(buckets map[int]int64) ([]*dto.BucketSpan, []int64) {
	idx := make([]int, 0, len(buckets))
	for i, n := range buckets {
		if n != 0 {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	var sp []*dto.BucketSpan
	var deltas []int64
	var prevCount int64
	for k, i := range idx {
		switch {
		case k == 0:
			sp = append(sp, &dto.BucketSpan{Offset: proto.Int32(int32(i)), Length: proto.Uint32(1)})
		case i == idx[k-1]+1:
			*sp[len(sp)-1].Length++
		default:
			sp = append(sp, &dto.BucketSpan{Offset: proto.Int32(int32(i - idx[k-1] - 1)), Length: proto.Uint32(1)})
		}
		deltas = append(deltas, buckets[i]-prevCount)
		prevCount = buckets[i]
	}
	return sp, deltas
}

// histogramMetric is a prometheus.Metric of a prepared dto.Histogram
// (client_golang's const histograms take either classic or native
// buckets, not both).
type histogramMetric struct {
	desc   *prometheus.Desc
	h      *dto.Histogram
	labels []*dto.LabelPair
}

func (m *histogramMetric) Desc() *prometheus.Desc { return m.desc }

func (m *histogramMetric) Write(out *dto.Metric) error {
	out.Label, out.Histogram = m.labels, m.h
	return nil
}
