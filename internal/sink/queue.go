package sink

import (
	"sync"
	"sync/atomic"

	"github.com/rttscope/rttscope/internal/events"
)

// batchSize is how many records go through a queue's channel at once: one
// channel operation per record would cost more than formatting it.
const batchSize = 256

// batch is a run of records, handed from the Fanout to a sink's goroutine
// whole. flush asks the sink to flush after writing them.
type batch struct {
	items []item
	flush bool
}

// queue is one sink: its records' way from the Fanout (the producer, under
// the Fanout's lock) to the sink's writer (its own goroutine).
type queue struct {
	Sink // Kinds set: the record types the sink takes
	// cur is the batch being filled (producer side only).
	cur *batch
	// full carries filled batches to the writer goroutine, free returns
	// them. There are at most cap(full)+2 batches: whatever full holds and
	// the writer has, one is left to fill, so send waits only on full.
	// They are made as needed (made counts them): a queue that never
	// fills costs a few batches of memory, not its bound.
	full, free chan *batch
	made       int
	done       chan struct{}

	records, dropped atomic.Uint64
	queued           atomic.Int64
	// err is the first error of the sink's writer; later records are
	// counted as dropped, and the Fanout reports the error.
	errOnce sync.Once
	err     atomic.Pointer[error]
}

func newQueue(s Sink, batches int) *queue {
	if s.Kinds == 0 {
		s.Kinds = kindsOf(s.Writer.Capabilities())
	}
	q := &queue{Sink: s, full: make(chan *batch, batches), free: make(chan *batch, batches+1), done: make(chan struct{})}
	q.cur = q.newBatch()
	go q.run()
	return q
}

// add returns the slot of the next record, sending the current batch on
// when it is full.
func (q *queue) add() *item {
	q.records.Add(1)
	q.queued.Add(1)
	if len(q.cur.items) == batchSize {
		q.send(false)
	}
	q.cur.items = q.cur.items[:len(q.cur.items)+1]
	return &q.cur.items[len(q.cur.items)-1]
}

// send hands the current batch to the writer goroutine and starts a new
// one. Under the drop policy a batch that does not fit is dropped (and
// counted), unless wait is set (the last batch, at Close).
func (q *queue) send(wait bool) {
	b := q.cur
	n := int64(len(b.items))
	if q.Policy == Drop && !wait {
		select {
		case q.full <- b:
		default:
			q.queued.Add(-n)
			q.dropped.Add(uint64(n))
			b.items, b.flush = b.items[:0], false
			return
		}
	} else {
		q.full <- b
	}
	select {
	case q.cur = <-q.free:
	default:
		if q.made < cap(q.full)+2 {
			q.cur = q.newBatch()
		} else {
			q.cur = <-q.free
		}
	}
}

// newBatch makes one more batch.
func (q *queue) newBatch() *batch {
	q.made++
	return &batch{items: make([]item, 0, batchSize)}
}

// run writes batches until full is closed.
func (q *queue) run() {
	defer close(q.done)
	for b := range q.full {
		for i := range b.items {
			it := &b.items[i]
			if q.err.Load() != nil {
				q.dropped.Add(1)
			} else if err := it.write(q.Writer); err != nil {
				q.fail(err)
				q.dropped.Add(1)
			}
			it.other = nil
		}
		if b.flush && q.err.Load() == nil {
			if err := q.Writer.Flush(); err != nil {
				q.fail(err)
			}
		}
		q.queued.Add(-int64(len(b.items)))
		b.items, b.flush = b.items[:0], false
		q.free <- b
	}
}

func (q *queue) fail(err error) { q.errOnce.Do(func() { q.err.Store(&err) }) }

// error returns the sink's first error.
func (q *queue) error() error {
	if p := q.err.Load(); p != nil {
		return *p
	}
	return nil
}

// stats returns the sink's counters.
func (q *queue) stats() events.SinkStats {
	s := events.SinkStats{Name: q.Name, Policy: q.Policy.String(),
		Records: q.records.Load(), Dropped: q.dropped.Load(), Queued: uint64(max(q.queued.Load(), 0))}
	if q.Counters != nil {
		q.Counters(&s)
	}
	return s
}

// close sends what is left, waits until the writer goroutine has written
// it, and closes the sink's writer.
func (q *queue) close() error {
	q.send(true)
	close(q.full)
	<-q.done
	return q.Writer.Close()
}
