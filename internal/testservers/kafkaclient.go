package testservers

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// client returns a franz-go client of the broker, closed at the end of the
// test.
func (k *Kafka) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates a topic of that many partitions (one replica).
func (k *Kafka) CreateTopic(t testing.TB, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := req.RequestWith(ctx, k.client(t))
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
	}
}

// ends returns the high watermark (the offset after the last message) of
// each partition of topic.
func (k *Kafka) ends(t testing.TB, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	meta, err := mreq.RequestWith(ctx, cl)
	if err != nil || len(meta.Topics) != 1 {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, p := range meta.Topics[0].Partitions {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p.Partition, -1 // latest
		lt.Partitions = append(lt.Partitions, lp)
	}
	req.Topics = append(req.Topics, lt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("list offsets of %s/%d: %v", topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// ReadAll returns every message of topic, by partition, in offset order.
func (k *Kafka) ReadAll(t testing.TB, topic string) map[int32][]*kgo.Record {
	t.Helper()
	cl := k.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ends := k.ends(t, cl, topic)
	out := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	left := 0
	for p, e := range ends {
		if e > 0 {
			left++
		}
		next[p] = 0
	}
	// The limit only turns a broker that stops answering into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for left > 0 {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d partitions not read to their end %v (read up to %v)", topic, left, ends, next)
		}
		f.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		f.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Errorf("%s/%d: offset %d after %d", topic, r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			out[r.Partition] = append(out[r.Partition], r)
			if next[r.Partition] == ends[r.Partition] {
				left--
			}
		})
	}
	return out
}
