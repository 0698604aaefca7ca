package privacy

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/rttscope/rttscope/internal/anon"
	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

// Sizes that bound the process's memory: distinct addresses whose
// anonymized form is cached, and flows and prefixes per numbering
// generation (numbers.go) with --anonymize drop.
const (
	cacheSize   = 1 << 16
	numberLimit = 1 << 18
)

// Writer is a format.Writer that applies Options to every record and
// passes it on. It is safe for concurrent use: records are changed in
// scratch copies under one lock, so writing does not allocate once the
// caches are warm.
type Writer struct {
	next format.Writer
	opts Options
	mode anon.Mode

	mu        sync.Mutex
	keys      *keyring
	scheme    anon.Scheme      // nil for none and drop
	ports     *anon.PortMapper // nil without AnonymizePorts
	keyed     bool             // scheme or ports use a key
	keyStart  int64            // traffic time the current key started
	started   bool             // a record has been written
	origin    int64            // subtracted from every time (RelativeTime)
	originSet bool
	flows     *numbers[flowKey]
	prefixes  *numbers[netip.Prefix]

	rtt     events.RTT
	flow    events.FlowEvent
	stats   events.Stats
	agg     events.Aggregate
	summary events.FlowSummary
	notice  events.AnonKey
	pdm     events.PDM
	pdmInt  events.PDMInterval
}

// flowKey names a connection in both directions: the lower endpoint first.
type flowKey struct {
	a, b  events.Endpoint
	proto events.Protocol
}

// New returns a Writer that applies o, or nil when o changes nothing; Wrap
// then puts it in front of a format writer. It reads the key file and makes
// the first key now, so that a bad key is reported before any output is
// opened.
func New(o Options) (*Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !o.Active() {
		return nil, nil
	}
	m, _ := o.mode() // Validate checked it
	if o.Minimal {
		o.RelativeTime = true
	}
	w := &Writer{opts: o, mode: m}
	switch m.Kind {
	case "drop":
		w.flows = newNumbers[flowKey](numberLimit)
		w.prefixes = newNumbers[netip.Prefix](numberLimit)
	case "trunc":
		s, err := anon.NewTruncate(m.V4Bits, m.V6Bits)
		if err != nil {
			return nil, err
		}
		w.scheme = s
	}
	w.keyed = m.KeySize() > 0 || o.AnonymizePorts
	if w.keyed {
		k, err := newKeyring(o, m)
		if err != nil {
			return nil, err
		}
		w.keys = k
		if err := w.newKey(); err != nil {
			w.keys.wipe()
			return nil, err
		}
	}
	return w, nil
}

// Wrap makes next the writer w passes records to and returns w, or next
// itself when w is nil (nothing to change). Call it once, before the
// first record.
func (w *Writer) Wrap(next format.Writer) format.Writer {
	if w == nil {
		return next
	}
	w.next = next
	return w
}

// SetOrigin sets (on a non-nil w) the time that RelativeTime subtracts (Unix ns): the start
// of monitoring, or a capture's first packet. Without it the first
// record's time is the origin. It has no effect once a record is written.
func (w *Writer) SetOrigin(ns int64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		w.origin, w.originSet = ns, true
	}
}

// newKey replaces the keyed parts with ones made from the next key, which
// is wiped once they are made.
func (w *Writer) newKey() error {
	key, err := w.keys.next()
	if err != nil {
		return fmt.Errorf("making an anonymization key: %w", err)
	}
	defer anon.Wipe(key)
	if w.mode.KeySize() > 0 {
		s, err := anon.New(w.mode, key)
		if err != nil {
			return err
		}
		w.scheme = anon.Cached(s, cacheSize)
	}
	if w.opts.AnonymizePorts {
		pk := derive(key, "rttscope ports", portKeySize)
		defer anon.Wipe(pk)
		p, err := anon.NewPortMapper(pk)
		if err != nil {
			return err
		}
		w.ports = p
	}
	w.notice = events.AnonKey{Scheme: w.keyScheme(), KeyID: anon.KeyID(key)}
	return nil
}

// keyScheme names what the key is used for in AnonKey records.
func (w *Writer) keyScheme() string {
	switch {
	case w.mode.KeySize() == 0:
		return "ports"
	case w.opts.AnonymizePorts:
		return w.mode.String() + "+ports"
	}
	return w.mode.String()
}

// before runs ahead of every record of traffic time t: the origin and the
// first key record at the first one, a new key when the current one has
// served KeyRotate.
func (w *Writer) before(t int64) error {
	if !w.started {
		w.started = true
		if !w.originSet {
			w.origin = t
		}
		w.keyStart = t
		return w.announceKey(t, false)
	}
	if w.opts.KeyRotate > 0 && w.keyed && t-w.keyStart >= int64(w.opts.KeyRotate) {
		if err := w.newKey(); err != nil {
			return err
		}
		w.keyStart = t
		return w.announceKey(t, true)
	}
	return nil
}

// announceKey writes the AnonKey record of the current key, when there is
// a key and the next writer takes such records.
func (w *Writer) announceKey(t int64, rotated bool) error {
	if !w.keyed || w.next.Capabilities()&format.AnonKeys == 0 {
		return nil
	}
	w.notice.Time, w.notice.Rotated = w.time(t), rotated
	return w.next.WriteAnonKey(&w.notice)
}

// time returns traffic time t as reported: relative to the origin and
// rounded down to the resolution.
func (w *Writer) time(t int64) int64 {
	if w.opts.RelativeTime {
		t -= w.origin
	}
	if r := int64(w.opts.TimeResolution); r > 0 {
		m := t % r
		if m < 0 {
			m += r // round toward minus infinity, also before the origin
		}
		t -= m
	}
	return t
}

// anonymizing reports whether addresses are anonymized or dropped.
func (w *Writer) anonymizing() bool { return w.flows != nil || w.scheme != nil }

// anonFlow rewrites f's addresses and ports.
func (w *Writer) anonFlow(f *events.Flow) {
	switch {
	case w.flows != nil:
		f.ID = w.flows.get(connection(f))
		f.Src.IP, f.Dst.IP = netip.Addr{}, netip.Addr{}
	case w.scheme != nil:
		f.Src.IP, f.Dst.IP = w.scheme.Addr(f.Src.IP), w.scheme.Addr(f.Dst.IP)
	}
	if w.ports != nil {
		f.Src.Port = w.ports.Map(uint8(f.Proto), f.Src.Port)
		f.Dst.Port = w.ports.Map(uint8(f.Proto), f.Dst.Port)
	}
}

// connection returns the key of f's connection, the same in both
// directions.
func connection(f *events.Flow) flowKey {
	a, b := f.Src, f.Dst
	if c := a.IP.Compare(b.IP); c > 0 || c == 0 && a.Port > b.Port {
		a, b = b, a
	}
	return flowKey{a: a, b: b, proto: f.Proto}
}

func (w *Writer) anonPrefix(a *events.Aggregate) {
	switch {
	case w.prefixes != nil:
		a.PrefixID = w.prefixes.get(a.Prefix)
		a.Prefix = netip.Prefix{}
	case w.mode.Kind == "trunc":
		// A prefix longer than the kept bits is reported at that length:
		// 10.1.2.0/24 with 16 bits kept is 10.1.0.0/16, not a /24 that
		// looks like a real one.
		p := w.scheme.Prefix(a.Prefix)
		keep := w.mode.V6Bits
		if p.Addr().Is4() {
			keep = w.mode.V4Bits
		}
		a.Prefix = netip.PrefixFrom(p.Addr(), min(p.Bits(), keep)).Masked()
	case w.scheme != nil:
		a.Prefix = w.scheme.Prefix(a.Prefix)
	}
}
