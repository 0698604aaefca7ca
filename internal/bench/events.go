package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/privacy"
)

// The events phase measures how many RTT events user space consumes: the
// rttscope programs (per-sample, rate limit 0) are fed matched data/ACK
// pairs with BPF_PROG_TEST_RUN, each pair giving one RTT record in the
// ring buffer, and a reader like the monitor's (ReadInto, decode, jsonl
// formatting, output discarded) consumes them.
//
//   - ringbuf-read, ringbuf-jsonl: a burst of EventsBurst records is
//     produced with the reader stopped (into a ring buffer large enough
//     to hold it all: nothing is lost), then the reader drains it; the
//     rate is the consumer's capacity (read only; read+decode+jsonl).
//   - concurrent: producers on every CPU and the consumer run at the same
//     time, with the monitor's default ring buffer size: events produced
//     and consumed per second and ring buffer overflows (ringbuf_full).
//   - decode-jsonl: decoding and formatting alone, from records in memory.
//   - decode-jsonl-anon: the same through the privacy writer with
//     --anonymize pfx --anonymize-ports (cache warm: the records' few
//     flows are anonymized once; internal/anon's benchmarks give the cost
//     of a new address).

// Cases of the events phase.
const (
	CaseEvDecode     = "decode-jsonl"
	CaseEvDecodeAnon = "decode-jsonl-anon"
	CaseEvDrainRead  = "ringbuf-read"
	CaseEvDrainJSONL = "ringbuf-jsonl"
	CaseEvConcurrent = "concurrent"
)

// Metrics of the events phase.
const (
	MetricEventsPerS   = "events_per_s"
	MetricProducedPerS = "produced_per_s"
	MetricRingbufFull  = "ringbuf_full"
)

// EventsRun is the raw record of one events measurement.
type EventsRun struct {
	Case        string  `json:"case"`
	Rep         int     `json:"rep"`
	Events      uint64  `json:"events"` // consumed
	Produced    uint64  `json:"produced,omitempty"`
	RingbufFull uint64  `json:"ringbuf_full"`
	Seconds     float64 `json:"seconds"`
	Producers   int     `json:"producers,omitempty"`
	RingbufSize uint32  `json:"ringbuf_size,omitempty"`
}

// EventsSettings are the parameters of the events phase.
type EventsSettings struct {
	Reps       int    `json:"reps"`
	Burst      int    `json:"burst"`
	BurstRing  uint32 `json:"burst_ringbuf_size"`
	Concurrent string `json:"concurrent_duration"`
	LiveRing   uint32 `json:"concurrent_ringbuf_size"`
	Producers  int    `json:"producers"`
	Consumer   string `json:"consumer"`
}

// evRecordSize is what one RTT record takes in the ring buffer: the
// 120-byte record plus the 8-byte header, rounded to 8.
const evRecordSize = 128

// pairProducer feeds one flow's data/ACK pairs through the programs.
type pairProducer struct {
	eg, in    *ebpf.Program
	data, ack []byte
	tsOff     int // TSval in data
	ecrOff    int // TSecr in ack
	tsval     uint32
}

func newPairProducer(objs *loader.Objects, flow int) (*pairProducer, error) {
	const mark = 0x5a5a0000
	data, ack, err := pairFramesPort(uint16(portEvents+flow), mark)
	if err != nil {
		return nil, err
	}
	var m [4]byte
	binary.BigEndian.PutUint32(m[:], mark)
	p := &pairProducer{eg: objs.RttscopeTcEgress, in: objs.RttscopeTcIngress, data: data, ack: ack,
		tsOff: bytes.Index(data, m[:]), ecrOff: bytes.LastIndex(ack, m[:]), tsval: mark}
	if p.tsOff < 0 || p.ecrOff < 0 {
		return nil, errors.New("events: TSval not found in the crafted frames")
	}
	return p, nil
}

// pair runs one data/ACK pair with a new TSval.
func (p *pairProducer) pair() error {
	p.tsval++
	binary.BigEndian.PutUint32(p.data[p.tsOff:], p.tsval)
	binary.BigEndian.PutUint32(p.ack[p.ecrOff:], p.tsval)
	if _, err := p.eg.Run(&ebpf.RunOptions{Data: p.data}); err != nil {
		return err
	}
	_, err := p.in.Run(&ebpf.RunOptions{Data: p.ack})
	return err
}

// consumer is the monitor's reader loop in miniature.
type consumer struct {
	rd   *ringbuf.Reader
	rec  ringbuf.Record
	dec  events.Decoder
	rtt  events.RTT
	flow events.FlowEvent
	out  format.Writer // nil: read only
}

// anonymized are the privacy options of the decode-jsonl-anon case.
var anonymized = privacy.Options{Anonymize: "pfx", AnonymizePorts: true}

// newConsumer reads m; withFormat adds decoding and jsonl formatting, and
// anon puts the privacy writer with options anonymized in front of it.
func newConsumer(m *ebpf.Map, withFormat, anon bool) (*consumer, error) {
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, err
	}
	c := &consumer{rd: rd}
	if withFormat {
		if c.out, err = format.New("jsonl", io.Discard, format.Options{}); err != nil {
			rd.Close()
			return nil, err
		}
	}
	if anon {
		pw, err := privacy.New(anonymized)
		if err != nil {
			rd.Close()
			return nil, err
		}
		c.out = pw.Wrap(c.out)
	}
	return c, nil
}

func (c *consumer) handle() error {
	if c.out == nil {
		return nil
	}
	kind, err := c.dec.Decode(c.rec.RawSample, &c.rtt, &c.flow)
	if err != nil {
		return err
	}
	switch kind {
	case events.KindRTT:
		return c.out.WriteRTT(&c.rtt)
	case events.KindFlow:
		return c.out.WriteFlow(&c.flow)
	}
	return nil
}

func (c *consumer) close() {
	if c.out != nil {
		_ = c.out.Close() // writes to io.Discard
	}
	c.rd.Close()
}

func runEvents(ctx context.Context, o *Options, res *Result) error {
	producers := max(runtime.NumCPU(), 1)
	burstRing := nextPow2(uint32(o.EventsBurst)*evRecordSize + 1<<20)
	res.Settings.Events = &EventsSettings{
		Reps: o.Reps, Burst: o.EventsBurst, BurstRing: burstRing, Concurrent: o.EventsDuration.String(),
		LiveRing: loader.DefaultConfig().RingbufSize, Producers: producers,
		Consumer: "ringbuf.Reader.ReadInto, events.Decoder, jsonl format.Writer on io.Discard (as the monitor's reader, minus the output file)",
	}
	var total uint64
	for rep := 1; rep <= o.Reps; rep++ {
		for _, cas := range rotate([]string{CaseEvDrainJSONL, CaseEvDrainRead, CaseEvConcurrent, CaseEvDecode, CaseEvDecodeAnon}, rep-1) {
			if err := ctx.Err(); err != nil {
				return err
			}
			var r EventsRun
			var err error
			switch cas {
			case CaseEvDrainRead, CaseEvDrainJSONL:
				r, err = eventsBurst(ctx, o.EventsBurst, burstRing, producers, cas == CaseEvDrainJSONL)
			case CaseEvConcurrent:
				r, err = eventsConcurrent(ctx, o.EventsDuration, producers)
			case CaseEvDecode, CaseEvDecodeAnon:
				r, err = eventsDecode(o.EventsBurst, cas == CaseEvDecodeAnon)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", cas, err)
			}
			r.Case, r.Rep = cas, rep
			total += r.Events
			res.EventsRuns = append(res.EventsRuns, r)
			mode := map[string]string{
				CaseEvDrainRead:  fmt.Sprintf("burst of %d records produced first, then drained: ReadInto only", o.EventsBurst),
				CaseEvDrainJSONL: fmt.Sprintf("burst of %d records produced first, then drained: ReadInto+decode+jsonl to io.Discard", o.EventsBurst),
				CaseEvConcurrent: fmt.Sprintf("%d TEST_RUN producers and the reader at once for %v, %d-byte ring buffer", producers, o.EventsDuration, loader.DefaultConfig().RingbufSize),
				CaseEvDecode:     fmt.Sprintf("decode+jsonl of %d records from memory", o.EventsBurst),
				CaseEvDecodeAnon: fmt.Sprintf("decode+anonymize (pfx, ports; warm cache)+jsonl of %d records from memory", o.EventsBurst),
			}[cas]
			res.series(GroupEvents, cas, ProgRttscope, "", MetricEventsPerS, "events/s", mode).Add(float64(r.Events) / r.Seconds)
			if cas == CaseEvConcurrent {
				res.series(GroupEvents, cas, ProgRttscope, "", MetricProducedPerS, "events/s", mode).Add(float64(r.Produced) / r.Seconds)
				res.series(GroupEvents, cas, ProgRttscope, "", MetricRingbufFull, "events", mode).Add(float64(r.RingbufFull))
			} else if cas != CaseEvDecode && cas != CaseEvDecodeAnon {
				res.series(GroupEvents, cas, ProgRttscope, "", MetricRingbufFull, "events", mode).Add(float64(r.RingbufFull))
			}
			o.progress("events: rep %d/%d %-14s %.0f events/s (%d events in %.2fs, ringbuf_full %d)", rep, o.Reps, cas,
				float64(r.Events)/r.Seconds, r.Events, r.Seconds, r.RingbufFull)
		}
	}
	res.Checks["events_consumed"] = total
	return nil
}

func nextPow2(n uint32) uint32 {
	p := uint32(4096)
	for p < n && p < 1<<31 {
		p <<= 1
	}
	return p
}

func eventsConfig(ring uint32) loader.Config {
	c := loader.DefaultConfig()
	c.RateLimit = 0
	c.RingbufSize = ring
	return c
}

// produce runs pairs from n goroutines (one flow each) until each ran
// perProducer pairs or stop is set.
func produce(objs *loader.Objects, n, perProducer int, stop *atomic.Bool) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for g := 0; g < n; g++ {
		p, err := newPairProducer(objs, g)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; perProducer <= 0 || i < perProducer; i++ {
				if stop != nil && stop.Load() {
					return
				}
				if err := p.pair(); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func eventsBurst(ctx context.Context, burst int, ring uint32, producers int, withFormat bool) (EventsRun, error) {
	r := EventsRun{Producers: producers, RingbufSize: ring}
	objs, err := loader.Load(eventsConfig(ring))
	if err != nil {
		return r, err
	}
	defer objs.Close()
	c, err := newConsumer(objs.Events, withFormat, false)
	if err != nil {
		return r, err
	}
	defer c.close()
	per := (burst + producers - 1) / producers
	if err := produce(objs, producers, per, nil); err != nil {
		return r, err
	}
	var st events.Stats
	if err := objs.Stats(&st); err != nil {
		return r, err
	}
	// Records: one RTT event per pair plus a flow-opening event per flow.
	r.Produced, r.RingbufFull = st.RTTEvents+st.FlowEvents, st.RingbufFull
	if err := ctx.Err(); err != nil {
		return r, err
	}
	start := time.Now()
	for c.rd.AvailableBytes() > 0 {
		if err := c.rd.ReadInto(&c.rec); err != nil {
			return r, err
		}
		if err := c.handle(); err != nil {
			return r, err
		}
		r.Events++
	}
	if c.out != nil {
		if err := c.out.Flush(); err != nil {
			return r, err
		}
	}
	r.Seconds = time.Since(start).Seconds()
	if r.Events != r.Produced {
		return r, fmt.Errorf("drained %d records, the programs reported %d RTT and flow events", r.Events, r.Produced)
	}
	return r, nil
}

func eventsConcurrent(ctx context.Context, d time.Duration, producers int) (EventsRun, error) {
	ring := loader.DefaultConfig().RingbufSize
	r := EventsRun{Producers: producers, RingbufSize: ring}
	objs, err := loader.Load(eventsConfig(ring))
	if err != nil {
		return r, err
	}
	defer objs.Close()
	c, err := newConsumer(objs.Events, true, false)
	if err != nil {
		return r, err
	}
	defer c.close()
	var consumed atomic.Uint64
	readDone := make(chan error, 1)
	go func() {
		for {
			if err := c.rd.ReadInto(&c.rec); err != nil {
				if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, ringbuf.ErrFlushed) {
					readDone <- nil
				} else {
					readDone <- err
				}
				return
			}
			if err := c.handle(); err != nil {
				readDone <- err
				return
			}
			consumed.Add(1)
		}
	}()
	var stop atomic.Bool
	prodDone := make(chan error, 1)
	start := time.Now()
	go func() { prodDone <- produce(objs, producers, 0, &stop) }()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	stop.Store(true)
	perr := <-prodDone
	// Let the reader catch up with what is in the ring, then stop it.
	if err := c.rd.Flush(); err != nil {
		return r, err
	}
	rerr := <-readDone
	r.Seconds = time.Since(start).Seconds()
	if err := errors.Join(perr, rerr, ctx.Err()); err != nil {
		return r, err
	}
	var st events.Stats
	if err := objs.Stats(&st); err != nil {
		return r, err
	}
	r.Events, r.Produced, r.RingbufFull = consumed.Load(), st.RTTEvents+st.FlowEvents, st.RingbufFull
	return r, nil
}

func eventsDecode(n int, anon bool) (EventsRun, error) {
	var r EventsRun
	// Real records: a few thousand pairs through the programs.
	objs, err := loader.Load(eventsConfig(1 << 20))
	if err != nil {
		return r, err
	}
	defer objs.Close()
	c, err := newConsumer(objs.Events, true, anon)
	if err != nil {
		return r, err
	}
	defer c.close()
	if err := produce(objs, 1, 4096, nil); err != nil {
		return r, err
	}
	var recs [][]byte
	for c.rd.AvailableBytes() > 0 {
		if err := c.rd.ReadInto(&c.rec); err != nil {
			return r, err
		}
		recs = append(recs, bytes.Clone(c.rec.RawSample))
	}
	if len(recs) == 0 {
		return r, errors.New("no RTT records produced")
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		c.rec.RawSample = recs[i%len(recs)]
		if err := c.handle(); err != nil {
			return r, err
		}
	}
	if err := c.out.Flush(); err != nil {
		return r, err
	}
	r.Seconds = time.Since(start).Seconds()
	r.Events = uint64(n)
	return r, nil
}

// portEvents is the first client port of the events phase's flows.
const portEvents = 42000

// pairFramesPort is a data segment (100 bytes of payload) with TSval tsval
// on the flow from client port port, and the pure ACK echoing it.
func pairFramesPort(port uint16, tsval uint32) (data, ack []byte, err error) {
	data, err = tcpFrame(benchClient4, benchServer4, port, serverPort, nil,
		pktcraft.TCP{ACK: true, PSH: true, Seq: 1, Ack: 1, Window: 502, TSval: tsval, TSecr: 500, Payload: payload(100)})
	if err != nil {
		return nil, nil, err
	}
	ack, err = tcpFrame(benchServer4, benchClient4, serverPort, port, nil,
		pktcraft.TCP{ACK: true, Seq: 1, Ack: 101, Window: 502, TSval: 600, TSecr: tsval})
	return data, ack, err
}
