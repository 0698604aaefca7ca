package kafkasink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/recordpb"
)

// Writer is the Kafka sink: a format.Writer with every capability but
// Restarts. It is meant to be written by one goroutine (a sink.Fanout's
// queue); Counters may be called from any.
type Writer struct {
	opts   Options
	cl     *kgo.Client
	log    io.Writer
	spool  *spool // nil with SpoolSize 0
	closed bool

	// The encoders of the two formats and their scratch space.
	jsonl   format.Writer
	jsonBuf bytes.Buffer
	pb      recordpb.Encoder
	marshal proto.MarshalOptions
	keyBuf  []byte

	produced, acked, spooled, dropped atomic.Uint64
	// errOnce logs the first message the brokers refused.
	errOnce sync.Once
}

// New connects the Kafka client (the brokers are contacted in the
// background: an unreachable broker is not an error here) and creates the
// spool file. fo shapes the jsonl values as in the file formats. log gets
// the first delivery error and the summary at Close.
func New(o Options, fo format.Options, log io.Writer) (*Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	kopts, err := o.clientOptions()
	if err != nil {
		return nil, err
	}
	w := &Writer{opts: o, log: log, marshal: proto.MarshalOptions{}}
	w.jsonl, err = format.New("jsonl", &w.jsonBuf, fo)
	if err != nil {
		return nil, err
	}
	if o.SpoolSize > 0 {
		if w.spool, err = newSpool(o.SpoolDir, o.SpoolSize); err != nil {
			return nil, err
		}
	}
	if w.cl, err = kgo.NewClient(kopts...); err != nil {
		if w.spool != nil {
			_ = w.spool.remove() // the client error is the one to report
		}
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return w, nil
}

// Counters adds the sink's counters to s (sink.Sink.Counters).
func (w *Writer) Counters(s *events.SinkStats) {
	s.Produced, s.Acked, s.Spooled = w.produced.Load(), w.acked.Load(), w.spooled.Load()
	s.Dropped += w.dropped.Load()
}

// The format.Writer methods: each record is one message, keyed by its
// flow (aggregates by their prefix; stats and key notices have no key).

// WriteRTT implements format.Writer.
func (w *Writer) WriteRTT(e *events.RTT) error {
	return write(w, w.flowKey(&e.Flow), e, w.pb.RTT, w.jsonl.WriteRTT)
}

// WriteFlow implements format.Writer.
func (w *Writer) WriteFlow(e *events.FlowEvent) error {
	return write(w, w.flowKey(&e.Flow), e, w.pb.FlowEvent, w.jsonl.WriteFlow)
}

// WriteStats implements format.Writer.
func (w *Writer) WriteStats(s *events.Stats) error {
	return write(w, nil, s, w.pb.Stats, w.jsonl.WriteStats)
}

// WriteAggregate implements format.Writer.
func (w *Writer) WriteAggregate(a *events.Aggregate) error {
	var key []byte // ePPing's global and first records: no prefix
	if a.Global == nil && a.Meta == nil {
		w.keyBuf = aggregateKey(w.keyBuf[:0], a)
		key = w.keyBuf
	}
	return write(w, key, a, w.pb.Aggregate, w.jsonl.WriteAggregate)
}

// WriteFlowSummary implements format.Writer.
func (w *Writer) WriteFlowSummary(s *events.FlowSummary) error {
	return write(w, w.flowKey(&s.Flow), s, w.pb.FlowSummary, w.jsonl.WriteFlowSummary)
}

// WriteAnonKey implements format.Writer.
func (w *Writer) WriteAnonKey(k *events.AnonKey) error {
	return write(w, nil, k, w.pb.AnonKey, w.jsonl.WriteAnonKey)
}

// WritePDM implements format.Writer.
func (w *Writer) WritePDM(p *events.PDM) error {
	return write(w, w.flowKey(&p.Flow), p, w.pb.PDM, w.jsonl.WritePDM)
}

// WritePDMInterval implements format.Writer.
func (w *Writer) WritePDMInterval(p *events.PDMInterval) error {
	return write(w, w.flowKey(&p.Flow), p, w.pb.PDMInterval, w.jsonl.WritePDMInterval)
}

// write sends record r as a message with key, encoded by pb (protobuf) or
// rendered by the jsonl writer's method.
func write[T any](w *Writer, key []byte, r *T, pb func(*T) *recordpb.Record, jsonl func(*T) error) error {
	return w.send(key, func() ([]byte, error) {
		if w.opts.Format == "protobuf" {
			return w.marshal.Marshal(pb(r))
		}
		return w.jsonLine(jsonl(r))
	})
}

func (w *Writer) flowKey(f *events.Flow) []byte {
	if w.opts.Key == "prefix" {
		w.keyBuf = prefixKey(w.keyBuf[:0], f)
	} else {
		w.keyBuf = flowKey(w.keyBuf[:0], f)
	}
	return w.keyBuf
}

// jsonLine returns the line the jsonl writer just rendered, without its
// newline, as a new slice.
func (w *Writer) jsonLine(err error) ([]byte, error) {
	if err == nil {
		err = w.jsonl.Flush()
	}
	line := bytes.TrimSuffix(w.jsonBuf.Bytes(), []byte{'\n'})
	v := bytes.Clone(line)
	w.jsonBuf.Reset()
	return v, err
}

// send produces the message that value encodes, or spools it: when the
// spool is not empty (order) or the client holds Buffer messages already.
// key is copied when produced (the spool copies it to its file).
func (w *Writer) send(key []byte, value func() ([]byte, error)) error {
	if w.closed {
		return format.ErrClosed
	}
	v, err := value()
	if err != nil {
		return err
	}
	if err := w.drain(context.Background(), false); err != nil {
		return err
	}
	if w.spool == nil || (w.spool.len() == 0 && w.room()) {
		w.produce(context.Background(), bytes.Clone(key), v) // nil stays nil
		return nil
	}
	switch err := w.spool.append(key, v); {
	case errors.Is(err, errSpoolFull):
		w.dropped.Add(1)
	case err != nil:
		return err
	default:
		w.spooled.Add(1)
	}
	return nil
}

// room reports whether the client takes another message without waiting.
func (w *Writer) room() bool { return w.cl.BufferedProduceRecords() < int64(w.opts.Buffer) }

// produce hands a message to the client. Without a spool it waits for
// room in the client's buffer (the sink's queue then fills up).
func (w *Writer) produce(ctx context.Context, key, value []byte) {
	w.produced.Add(1)
	w.cl.Produce(ctx, &kgo.Record{Key: key, Value: value}, w.promise)
}

// promise counts the brokers' answer for one message.
func (w *Writer) promise(_ *kgo.Record, err error) {
	if err == nil {
		w.acked.Add(1)
		return
	}
	w.dropped.Add(1)
	w.errOnce.Do(func() {
		fmt.Fprintf(w.log, "rttscope: kafka: a message was not delivered (counted as dropped; later failures are only counted): %v\n", err)
	})
}

// drain produces spooled messages, oldest first, while the client has
// room; with wait, all of them, waiting for room (until ctx ends).
func (w *Writer) drain(ctx context.Context, wait bool) error {
	for w.spool != nil && w.spool.len() > 0 && (wait || w.room()) {
		if ctx.Err() != nil {
			return nil
		}
		k, v, _, err := w.spool.next()
		if err != nil {
			return err
		}
		w.produce(ctx, k, v)
	}
	return nil
}

// Flush implements format.Writer: it moves spooled messages to the client
// as far as it has room. It does not wait for the brokers.
func (w *Writer) Flush() error {
	if w.closed {
		return nil
	}
	return w.drain(context.Background(), false)
}

// Close implements format.Writer: it hands the spool to the client and
// waits until the brokers acknowledged everything, for at most
// CloseTimeout; what is left then is counted as dropped. It logs the
// sink's counts.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.CloseTimeout)
	defer cancel()
	err := w.drain(ctx, true)
	ferr := w.cl.Flush(ctx)
	// Close fails what the client still holds, through the promises.
	w.cl.Close()
	if w.spool != nil {
		w.dropped.Add(uint64(w.spool.len()))
		err = errors.Join(err, w.spool.remove())
	}
	if ferr != nil {
		fmt.Fprintf(w.log, "rttscope: kafka: not every message was acknowledged within close-timeout=%v: %v\n", w.opts.CloseTimeout, ferr)
	}
	var s events.SinkStats
	w.Counters(&s)
	fmt.Fprintf(w.log, "rttscope: kafka: %d messages produced, %d acknowledged, %d spooled, %d dropped by the sink\n", s.Produced, s.Acked, s.Spooled, s.Dropped)
	return err
}

// Restart implements format.Writer: there is no document to restart.
func (w *Writer) Restart(reopen func() error) error { return reopen() }

// Capabilities implements format.Writer: every record type.
func (w *Writer) Capabilities() format.Capability { return format.All &^ format.Restarts }

// Ping waits until a broker answers (tests and tools; the sink itself
// does not need the brokers at start).
func (w *Writer) Ping(ctx context.Context) error { return w.cl.Ping(ctx) }
