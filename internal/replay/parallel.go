package replay

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/events"
)

// Parallel replay. BPF_PROG_TEST_RUN costs a couple of microseconds per
// call in the kernel (it builds an skb and a socket for every run) and
// runs on the calling CPU, so one thread cannot replay more than a few
// hundred thousand packets per second. With several workers, packets are
// collected in batches; each flow (both directions of a 5-tuple) goes to
// one worker, so the programs see every flow's packets in capture order
// and different flows never touch the same map entries at the same time.
// After a batch, the events in the ring buffer are sorted by time (stably,
// so one flow's events keep the order the program produced them in) and
// written. Cleanups by capture time happen between batches, exactly where
// the sequential replay runs them. Only the order of events of different
// flows with the same timestamp, or of captures whose timestamps go
// backwards within a batch, can differ from a sequential replay.

// maxWorkers bounds the default number of workers.
const maxWorkers = 8

// DefaultWorkers is the number of workers a replay uses by default: one per
// CPU the Go runtime uses, at most maxWorkers.
func DefaultWorkers() int { return min(runtime.GOMAXPROCS(0), maxWorkers) }

const (
	// batchPackets and batchBytes bound a batch.
	batchPackets = 4096
	batchBytes   = 8 << 20
	// eventBytesPerPacket bounds the ring buffer space the events of one
	// packet take (an RTT and a flow event, with record headers), so a
	// batch never overflows the ring buffer before it is drained.
	eventBytesPerPacket = 256
)

type batchPkt struct {
	off, n int
	ts     int64
	index  int
	egress bool
}

// collected is one event waiting to be sorted.
type collected struct {
	kind events.Kind
	rtt  events.RTT
	flow events.FlowEvent
}

func (c *collected) time() int64 {
	if c.kind == events.KindRTT {
		return c.rtt.Time
	}
	return c.flow.Seen
}

func (c *collected) flowOf() *events.Flow {
	if c.kind == events.KindRTT {
		return &c.rtt.Flow
	}
	return &c.flow.Flow
}

// deliver hands the kept events to sink in order and forgets them.
func (s *collectSink) deliver(sink Sink) error {
	ev := s.ev
	s.ev = ev[:0]
	for i := range ev {
		var err error
		if ev[i].kind == events.KindRTT {
			err = sink.RTT(&ev[i].rtt)
		} else {
			err = sink.Flow(&ev[i].flow)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// collectSink keeps a batch's events.
type collectSink struct{ ev []collected }

func (s *collectSink) RTT(e *events.RTT) error {
	s.ev = append(s.ev, collected{kind: events.KindRTT, rtt: *e})
	return nil
}

func (s *collectSink) Flow(e *events.FlowEvent) error {
	s.ev = append(s.ev, collected{kind: events.KindFlow, flow: *e})
	return nil
}

type parallel struct {
	eng     *Engine
	name    string
	workers []*worker // workers[0] runs on the goroutine that flushes
	maxPkts int
	arena   []byte
	pkts    []batchPkt
	coll    collectSink
	pi      pktInfo
	wg      sync.WaitGroup
	closed  bool
}

type worker struct {
	p      *parallel
	runner packetRunner
	batch  *batchRunner // nil where the kernel cannot run batches
	idx    []int        // this batch's packets (indices into p.pkts)
	jobs   chan struct{}
	err    error
	errPkt int
}

func newParallel(eng *Engine, name string, n int) *parallel {
	p := &parallel{
		eng:     eng,
		name:    name,
		maxPkts: max(1, min(batchPackets, int(eng.objs.Config.RingbufSize)/eventBytesPerPacket)),
	}
	for i := range n {
		w := &worker{p: p, runner: eng.newRunner()}
		if _, ok := w.runner.(*xdpRunner); ok && eng.objs.RttscopeXdpReplayBatch != nil {
			w.batch = newBatchRunner(eng.objs.RttscopeXdpReplayBatch)
		}
		if i > 0 {
			w.jobs = make(chan struct{})
			go w.loop()
		}
		p.workers = append(p.workers, w)
	}
	return p
}

// close stops the worker goroutines.
func (p *parallel) close() {
	if p.closed {
		return
	}
	p.closed = true
	for _, w := range p.workers[1:] {
		close(w.jobs)
	}
}

func (w *worker) loop() {
	runtime.LockOSThread()
	for range w.jobs {
		w.run()
		w.p.wg.Done()
	}
}

// run feeds this worker's share of the batch, in capture order, many
// packets per BPF_PROG_TEST_RUN call where the kernel allows.
func (w *worker) run() {
	p := w.p
	first := -1 // capture index of the first packet queued in w.batch
	for _, i := range w.idx {
		pk := &p.pkts[i]
		frame := p.arena[pk.off : pk.off+pk.n]
		var err error
		switch {
		case w.batch != nil && w.batch.fits(len(frame)):
			if first < 0 {
				first = pk.index
			}
			if len(w.batch.recs) == replayBatchMax || !w.batch.room(len(frame)) {
				err = w.batch.flush()
				if err == nil {
					first = pk.index
				}
			}
			if err == nil {
				err = w.batch.add(frame, pk.ts, pk.egress)
			}
		default:
			if w.batch != nil {
				if err = w.batch.flush(); err == nil {
					first = -1
				}
			}
			if err == nil {
				if err = w.runner.feed(frame, pk.ts, pk.egress); err != nil {
					first = pk.index
				}
			}
		}
		if err != nil {
			w.err, w.errPkt = err, max(first, 0)
			return
		}
	}
	if w.batch != nil {
		if err := w.batch.flush(); err != nil {
			w.err, w.errPkt = err, max(first, 0)
		}
	}
}

// add queues a packet, running the batch first if it is full.
func (p *parallel) add(pk *capture.Packet, ts int64, egress bool) error {
	parsePkt(pk.Data, &p.pi)
	// Only the headers matter to the programs: trimmed frames are cheaper
	// to copy and many fit in one batched test run.
	data := pk.Data[:headerBytes(&p.pi, min(len(pk.Data), p.workers[0].runner.maxFrame()))]
	if len(p.pkts) >= p.maxPkts || len(p.arena)+len(data) > batchBytes {
		if err := p.flush(); err != nil {
			return err
		}
	}
	w := p.workers[shardOf(&p.pi)%uint64(len(p.workers))]
	w.idx = append(w.idx, len(p.pkts))
	p.pkts = append(p.pkts, batchPkt{off: len(p.arena), n: len(data), ts: ts, index: pk.Index, egress: egress})
	p.arena = append(p.arena, data...)
	return nil
}

// flush runs the queued packets on the workers, then hands their events to
// the engine's sink in time order.
func (p *parallel) flush() error {
	if len(p.pkts) == 0 {
		return nil
	}
	for _, w := range p.workers[1:] {
		if len(w.idx) > 0 {
			p.wg.Add(1)
			w.jobs <- struct{}{}
		}
	}
	p.workers[0].run()
	p.wg.Wait()

	// Deliver what the packets before a failing one produced.
	var err error
	errPkt := -1
	for _, w := range p.workers {
		if w.err != nil && (errPkt < 0 || w.errPkt < errPkt) {
			err, errPkt = w.err, w.errPkt
		}
		w.err, w.idx = nil, w.idx[:0]
	}
	p.pkts, p.arena = p.pkts[:0], p.arena[:0]

	sink := p.eng.sink
	p.eng.sink = &p.coll
	derr := p.eng.Drain()
	p.eng.sink = sink
	if derr != nil {
		return derr
	}
	slices.SortStableFunc(p.coll.ev, func(a, b collected) int { return cmp.Compare(a.time(), b.time()) })
	if werr := p.coll.deliver(sink); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("%s: packet %d: run BPF program on packet: %w", p.name, errPkt, err)
	}
	return nil
}

// shardOf hashes a packet's flow so that both directions get the same
// value: the sum of the hashes of the two endpoints.
func shardOf(pi *pktInfo) uint64 {
	if !pi.ok {
		return 0
	}
	return endpointHash(&pi.src, pi.sport, pi.proto) + endpointHash(&pi.dst, pi.dport, pi.proto)
}

// endpointHash is FNV-1a over an address, port and protocol.
func endpointHash(a *[16]byte, port uint16, proto uint8) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for _, b := range a {
		h = (h ^ uint64(b)) * prime
	}
	h = (h ^ uint64(port>>8)) * prime
	h = (h ^ uint64(port&0xff)) * prime
	h = (h ^ uint64(proto)) * prime
	return h
}
