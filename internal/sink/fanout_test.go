package sink

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

// collector is a sink writer that keeps what it gets; gate, when set,
// holds every write until it is closed (a stuck destination).
type collector struct {
	mu      sync.Mutex
	rtts    []int64
	stats   []events.Stats
	aggs    int
	pdms    int
	flushes int
	closed  bool
	gate    chan struct{}
	fail    error
}

func (c *collector) wait() {
	if c.gate != nil {
		<-c.gate
	}
}

func (c *collector) WriteRTT(e *events.RTT) error {
	c.wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	c.rtts = append(c.rtts, e.Time)
	return nil
}
func (c *collector) WriteFlow(*events.FlowEvent) error { return nil }
func (c *collector) WriteStats(s *events.Stats) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats = append(c.stats, *s)
	return nil
}
func (c *collector) WriteAggregate(*events.Aggregate) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aggs++
	return nil
}
func (c *collector) WriteFlowSummary(*events.FlowSummary) error { return nil }
func (c *collector) WriteAnonKey(*events.AnonKey) error         { return nil }
func (c *collector) WritePDM(*events.PDM) error                 { return nil }
func (c *collector) WritePDMInterval(*events.PDMInterval) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pdms++
	return nil
}
func (c *collector) Restart(reopen func() error) error { return reopen() }
func (c *collector) Capabilities() format.Capability   { return format.All }
func (c *collector) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushes++
	return nil
}
func (c *collector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func writeRTTs(t *testing.T, f *Fanout, n int) {
	t.Helper()
	for i := range n {
		if err := f.WriteRTT(&events.RTT{Time: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFanoutEverySinkInOrder: with the block policy every sink gets every
// record, in order, and is closed by Close.
func TestFanoutEverySinkInOrder(t *testing.T) {
	a, b := &collector{}, &collector{}
	f, err := New(1000, Sink{Name: "files", Writer: a}, Sink{Name: "kafka", Policy: Spool, Writer: b})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	writeRTTs(t, f, n)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*collector{a, b} {
		if len(c.rtts) != n || !c.closed {
			t.Fatalf("sink got %d of %d records (closed %v)", len(c.rtts), n, c.closed)
		}
		for i, v := range c.rtts {
			if v != int64(i) {
				t.Fatalf("record %d is %d: out of order", i, v)
			}
		}
	}
}

// TestFanoutSlowSinkDrops: a stuck sink with the drop policy neither
// blocks the writer nor the other sink; what it drops is counted, and
// records + dropped + delivered add up.
func TestFanoutSlowSinkDrops(t *testing.T) {
	fast := &collector{}
	stuck := &collector{gate: make(chan struct{})}
	f, err := New(512, Sink{Name: "files", Writer: fast}, Sink{Name: "metrics", Policy: Drop, Writer: stuck})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20_000
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeRTTs(t, f, n)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // only turns a hang into a failure
		t.Fatal("a stuck sink with the drop policy blocked the writer")
	}
	st := f.Stats()
	if st[1].Records != n || st[1].Dropped == 0 || st[1].Dropped+st[1].Queued > n {
		t.Fatalf("stuck sink: %+v", st[1])
	}
	close(stuck.gate)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st = f.Stats()
	if len(fast.rtts) != n {
		t.Errorf("the other sink got %d of %d", len(fast.rtts), n)
	}
	if got := uint64(len(stuck.rtts)) + st[1].Dropped; got != n || st[1].Queued != 0 {
		t.Errorf("stuck sink: %d written + %d dropped != %d records (queued %d)", len(stuck.rtts), st[1].Dropped, n, st[1].Queued)
	}
	t.Logf("stuck sink: %d written, %d dropped", len(stuck.rtts), st[1].Dropped)
}

// TestFanoutStatsAndKinds: the stats record carries every sink's counters
// (and a sink's own via Counters); a sink that takes only some record
// types gets only those; capabilities are the union.
func TestFanoutStatsAndKinds(t *testing.T) {
	all, some := &collector{}, &collector{}
	f, err := New(10, Sink{Name: "files", Writer: all},
		Sink{Name: "kafka", Policy: Spool, Writer: some, Kinds: Stats | Aggregates,
			Counters: func(s *events.SinkStats) { s.Acked = 42 }})
	if err != nil {
		t.Fatal(err)
	}
	writeRTTs(t, f, 3)
	if err := f.WriteAggregate(&events.Aggregate{Histogram: []events.HistBin{{Lower: 1, Upper: 2, Count: 3}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteStats(&events.Stats{Packets: 7}); err != nil {
		t.Fatal(err)
	}
	if err := f.WritePDMInterval(&events.PDMInterval{DTLR: events.Distribution{Histogram: []events.HistBin{{Count: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if len(some.rtts) != 0 || some.aggs != 1 || len(some.stats) != 1 || some.pdms != 0 || len(all.rtts) != 3 || all.aggs != 1 || all.pdms != 1 {
		t.Fatalf("routing: all %d rtt %d agg; some %d rtt %d agg %d stats", len(all.rtts), all.aggs, len(some.rtts), some.aggs, len(some.stats))
	}
	s := all.stats[0]
	sinks := s.SinkList()
	if s.Packets != 7 || len(sinks) != 2 || sinks[0].Name != "files" || sinks[0].Records != 4 ||
		sinks[1].Policy != "spool" || sinks[1].Records != 1 || sinks[1].Acked != 42 {
		t.Fatalf("stats record: %+v", s)
	}
	var buf bytes.Buffer
	w, _ := format.New("jsonl", &buf, format.Options{})
	if err := w.WriteStats(&s); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	want := `"sinks":[{"name":"files","policy":"block","records":4,"queued":4,"dropped":0},{"name":"kafka","policy":"spool","records":1,"queued":1,"dropped":0,"produced":0,"acked":42,"spooled":0}]`
	if !strings.Contains(buf.String(), want) {
		t.Errorf("json stats record lacks\n%s\n%s", want, buf.String())
	}
	if f.Capabilities() != format.All&^format.Restarts {
		t.Errorf("capabilities %v", f.Capabilities())
	}
}

// TestFanoutSinkError: a sink's write error is reported by the next
// write, and the sink's later records are counted as dropped.
func TestFanoutSinkError(t *testing.T) {
	bad := &collector{fail: errors.New("disk full")}
	f, err := New(10, Sink{Name: "files", Writer: bad})
	if err != nil {
		t.Fatal(err)
	}
	var reported error
	for i := range 300 {
		if err := f.WriteRTT(&events.RTT{Time: int64(i)}); err != nil && reported == nil {
			reported = err // the writes after the failure report it
		}
	}
	if err := f.Flush(); err != nil && reported == nil {
		reported = err
	}
	t.Logf("first error reported by a write or flush: %v", reported)
	err = f.Close()
	if err == nil || !strings.Contains(err.Error(), "files: disk full") {
		t.Fatalf("close: %v, want the sink's error", err)
	}
	if st := f.Stats()[0]; st.Dropped != 300 {
		t.Errorf("dropped %d, want 300", st.Dropped)
	}
}

// TestParsePolicy refuses unknown names with the valid ones.
func TestParsePolicy(t *testing.T) {
	for _, n := range []string{"block", "drop", "spool"} {
		if p, err := ParsePolicy(n); err != nil || p.String() != n {
			t.Errorf("%s: %v %v", n, p, err)
		}
	}
	if _, err := ParsePolicy("lose"); err == nil || !strings.Contains(err.Error(), "block, drop, spool") {
		t.Errorf("lose: %v", err)
	}
}
