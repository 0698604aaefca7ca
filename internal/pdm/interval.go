package pdm

import (
	"bytes"
	"cmp"
	"math"
	"slices"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/hist"
)

// Aggregator folds PDM records into per-5-tuple distributions of DTLR,
// DTLS and network RTT over intervals (--pdm-report interval), binned in
// user space with the log-linear histogram of aggregated mode
// (internal/hist; docs/pdm.md says why not in the kernel). A record
// belongs to the interval that holds its timestamp: Split starts routing
// records at or after a boundary to the next interval, Close ends the
// current one. Not safe for concurrent use.
type Aggregator struct {
	cur, next map[tupleKey]*tupleAcc
	boundary  int64    // records at or after it go to next
	h         []uint32 // scratch: one distribution's bins, dense
	keys      []tupleKey
	out       events.PDMInterval
	closedAt  int64 // end of the last interval closed
	// Late counts records timed before the end of an interval already
	// closed, folded into the current one instead: none when every
	// record of an interval is read before it closes (Run waits for the
	// programs, Read feeds the capture in order).
	Late uint64
}

// tupleKey names the sender of the options (src) and where they were
// seen: plain bytes, which hash several times faster than events.Flow.
type tupleKey struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        events.Protocol
	egress       bool
}

type tupleAcc struct {
	flow            events.Flow
	dtlr, dtls, net acc
}

// acc holds the samples of one delay: exact count, sum, min and max, and
// the non-empty histogram bins (a 5-tuple's samples fill few of the
// 865, so a map is far smaller than the dense array).
type acc struct {
	count, sum, min, max uint64
	bins                 map[uint16]uint32
}

func (a *acc) add(d int64) {
	v := uint64(max(d, 0))
	if a.count == 0 || v < a.min {
		a.min = v
	}
	a.max = max(a.max, v)
	a.count++
	a.sum += v
	if a.bins == nil {
		a.bins = make(map[uint16]uint32, 4)
	}
	a.bins[uint16(hist.Bin(v))]++
}

// NewAggregator returns an Aggregator with an empty interval.
func NewAggregator() *Aggregator {
	return &Aggregator{cur: map[tupleKey]*tupleAcc{}, next: map[tupleKey]*tupleAcc{},
		boundary: math.MaxInt64, closedAt: math.MinInt64, h: make([]uint32, hist.Bins)}
}

// Add folds the delays of p into its 5-tuple's distributions. What is a
// sample: a DTLR or DTLS that is not 0 on the wire (0: the sender had no
// such delta yet), and a network RTT when the record has one.
func (a *Aggregator) Add(p *events.PDM) {
	if p.DeltaLastRecv == 0 && p.DeltaLastSent == 0 && !p.HasNetworkRTT {
		return
	}
	m := a.cur
	if p.Time >= a.boundary {
		m = a.next
	}
	if p.Time < a.closedAt {
		a.Late++
	}
	f := &p.Flow
	k := tupleKey{src: f.Src.IP.As16(), dst: f.Dst.IP.As16(), sport: f.Src.Port, dport: f.Dst.Port, proto: f.Proto, egress: p.Egress}
	t := m[k]
	if t == nil {
		t = &tupleAcc{flow: *f}
		m[k] = t
	}
	if p.DeltaLastRecv != 0 {
		t.dtlr.add(int64(p.DTLR))
	}
	if p.DeltaLastSent != 0 {
		t.dtls.add(int64(p.DTLS))
	}
	if p.HasNetworkRTT {
		t.net.add(int64(p.NetworkRTT))
	}
}

// Split makes records timed at or after boundary (Unix ns) go to the next
// interval until Close.
func (a *Aggregator) Split(boundary int64) { a.boundary = boundary }

// Close ends the interval [start, end) and calls fn with the record of
// each 5-tuple that had samples in it, ordered by addresses, ports,
// protocol and direction. The record is only valid during the call. The
// next interval holds what came at or after the Split boundary.
func (a *Aggregator) Close(start, end int64, fn func(*events.PDMInterval) error) error {
	a.keys = a.keys[:0]
	for k := range a.cur {
		a.keys = append(a.keys, k)
	}
	slices.SortFunc(a.keys, compareKeys)
	var err error
	for _, k := range a.keys {
		if err != nil {
			break
		}
		t := a.cur[k]
		r := &a.out
		r.Time, r.Start, r.Flow, r.Egress = end, start, t.flow, k.egress
		a.set(&r.DTLR, &t.dtlr)
		a.set(&r.DTLS, &t.dtls)
		a.set(&r.NetworkRTT, &t.net)
		err = fn(r)
	}
	clear(a.cur)
	a.cur, a.next = a.next, a.cur
	a.boundary = math.MaxInt64
	a.closedAt = max(a.closedAt, end)
	return err
}

func (a *Aggregator) set(d *events.Distribution, s *acc) {
	clear(a.h)
	for b, n := range s.bins {
		a.h[b] = n
	}
	d.Set(a.h, s.count, s.sum, s.min, s.max)
}

func compareKeys(x, y tupleKey) int {
	return cmp.Or(bytes.Compare(x.src[:], y.src[:]), bytes.Compare(x.dst[:], y.dst[:]),
		cmp.Compare(x.sport, y.sport), cmp.Compare(x.dport, y.dport),
		cmp.Compare(x.proto, y.proto), cmp.Compare(boolInt(x.egress), boolInt(y.egress)))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
