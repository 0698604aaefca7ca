// Package format renders rttscope events in the output formats of ePPing
// (README.md, "Output formats"): "standard" (human-readable lines), "ppviz" (Kathie Nichols'
// pping viewer), "json" (one root array) and "jsonl" (one object per line).
//
// Every format is written with append-style encoders into a reused buffer
// and then into a bufio.Writer, so writing an event does not allocate.
// Records are never split across two writes to the underlying io.Writer
// (a record that does not fit in the buffer's free space first flushes the
// buffer), so an underlying writer that is switched between writes (log
// rotation, see Writer.Restart) only ever sees whole records.
//
// Writers returned by New are safe for concurrent use.
package format

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// Writer renders rttscope's records in one output format. Every Writer
// takes RTT samples, flow events and stats records (EventWriter); the rest
// is optional, and Capabilities states what the Writer does with it, so a
// caller checks before it starts (Require) instead of type-asserting. A
// write outside the stated capabilities fails with ErrUnsupported; Restart
// without Restarts only calls reopen. Writers returned by New have every
// capability.
type Writer interface {
	EventWriter
	// WriteAggregate writes a prefix summary of aggregated mode
	// (docs/aggregation.md): capability Aggregates.
	WriteAggregate(a *events.Aggregate) error
	// WriteFlowSummary writes a per-flow summary (--flow-summary):
	// capability FlowSummaries.
	WriteFlowSummary(s *events.FlowSummary) error
	// WriteAnonKey says which anonymization key the records that follow
	// were made with (--anonymize): capability AnonKeys.
	WriteAnonKey(k *events.AnonKey) error
	// WritePDM writes one PDM option seen by rttscope pdm, and
	// WritePDMInterval the summary of a 5-tuple's options over an
	// interval (docs/pdm.md): capability PDMRecords.
	WritePDM(p *events.PDM) error
	WritePDMInterval(p *events.PDMInterval) error
	// Restart lets the owner of the underlying io.Writer switch it to a
	// new destination (log rotation, see output.File.Reopen) without
	// losing or splitting records and so that each destination holds a
	// complete document: capability Restarts.
	//
	// Holding the writer's lock, Restart flushes everything buffered and
	// finishes the current document (json: writes the closing "]") on the
	// current destination, calls reopen, which switches the destination
	// the io.Writer given to New writes to, and then starts a new document
	// (json: writes the opening "["). It also clears a sticky write error,
	// so output resumes after a failed disk is rotated away. A new document
	// is started even when reopen returns an error (whose value Restart
	// returns), since reopen may have switched the destination before
	// failing; a destination left unchanged then holds two concatenated
	// json documents.
	Restart(reopen func() error) error
	// Capabilities says which of the optional records and operations
	// above the Writer performs.
	Capabilities() Capability
}

// EventWriter is the part of Writer that every output has. A type with only
// these methods (a test's collector, a counter) becomes a Writer through
// Extend.
type EventWriter interface {
	WriteRTT(e *events.RTT) error
	WriteFlow(e *events.FlowEvent) error
	WriteStats(s *events.Stats) error
	// Flush writes buffered output to the underlying writer.
	Flush() error
	// Close finishes the document (the closing "]" for json) and flushes.
	// It does not close the underlying writer. Writes after Close fail with
	// ErrClosed; a second Close returns nil.
	Close() error
}

// Capability is a set of the optional parts of the Writer contract.
type Capability uint8

// The optional parts of Writer.
const (
	Aggregates    Capability = 1 << iota // WriteAggregate
	FlowSummaries                        // WriteFlowSummary
	Restarts                             // Restart keeps documents whole
	AnonKeys                             // WriteAnonKey
	PDMRecords                           // WritePDM, WritePDMInterval
)

// All is every capability: what the writers of New state.
const All = Aggregates | FlowSummaries | Restarts | AnonKeys | PDMRecords

var capabilityNames = [...]string{"aggregated records", "flow summaries", "restarts after log rotation", "anonymization key records", "PDM records"}

// String names the capabilities in c, joined by "or" ("" for none).
func (c Capability) String() string {
	var parts []string
	for i, n := range capabilityNames {
		if c&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, " or ")
}

// ErrUnsupported is returned by a write outside a Writer's capabilities.
var ErrUnsupported = errors.New("format: the output writer does not support this record")

// Require reports, before anything is written, what of need w lacks.
func Require(w Writer, need Capability) error {
	if missing := need &^ w.Capabilities(); missing != 0 {
		return fmt.Errorf("the output writer cannot write %s", missing)
	}
	return nil
}

// Extend returns w as a Writer: w itself when it is one, otherwise a Writer
// that passes events on to w and has no capability. Extend(nil) is nil.
func Extend(w EventWriter) Writer {
	switch w := w.(type) {
	case nil:
		return nil
	case Writer:
		return w
	default:
		return eventsOnly{w}
	}
}

// eventsOnly is an EventWriter completed to a Writer without capabilities.
type eventsOnly struct{ EventWriter }

func (eventsOnly) WriteAggregate(*events.Aggregate) error     { return ErrUnsupported }
func (eventsOnly) WriteFlowSummary(*events.FlowSummary) error { return ErrUnsupported }
func (eventsOnly) WriteAnonKey(*events.AnonKey) error         { return ErrUnsupported }
func (eventsOnly) WritePDM(*events.PDM) error                 { return ErrUnsupported }
func (eventsOnly) WritePDMInterval(*events.PDMInterval) error { return ErrUnsupported }
func (eventsOnly) Restart(reopen func() error) error          { return reopen() }
func (eventsOnly) Capabilities() Capability                   { return 0 }

// Options configures a Writer.
type Options struct {
	// Location is the time zone for the standard format's time of day;
	// nil means time.Local.
	Location *time.Location
	// StatsTo receives the stats lines of the standard and ppviz formats
	// (one Write per line, unbuffered), so that their main stream stays
	// parseable; nil means os.Stderr. json and jsonl put stats records in
	// the main stream and ignore StatsTo. The same holds for notices
	// (WriteAnonKey).
	StatsTo io.Writer
	// Minimal leaves out of samples, aggregated records and flow summaries
	// what RTT analysis does not need: their packet and byte counters
	// (--minimal, docs/privacy.md). Stats records keep theirs: they count
	// rttscope's own work, not anybody's traffic.
	Minimal bool
}

// style is what, besides the record, decides how it is rendered.
type style struct {
	loc     *time.Location
	minimal bool
}

// ErrClosed is returned by writes to a closed Writer.
var ErrClosed = errors.New("format: writer is closed")

type kind uint8

const (
	kindStandard kind = iota
	kindPPViz
	kindJSON
	kindJSONL
)

var names = [...]string{
	kindStandard: "standard",
	kindPPViz:    "ppviz",
	kindJSON:     "json",
	kindJSONL:    "jsonl",
}

// Names returns the valid format names, default ("standard") first.
func Names() []string {
	return append([]string(nil), names[:]...)
}

// New returns a Writer for the named format writing to w.
func New(name string, w io.Writer, opts Options) (Writer, error) {
	k := -1
	for i, n := range names {
		if n == name {
			k = i
		}
	}
	if k < 0 {
		return nil, fmt.Errorf("unknown output format %q (valid: %s)", name, strings.Join(names[:], ", "))
	}
	if w == nil {
		return nil, errors.New("format: nil io.Writer")
	}
	fw := &writer{
		kind:    kind(k),
		style:   style{loc: opts.Location, minimal: opts.Minimal},
		statsTo: opts.StatsTo,
		dst:     w,
		bw:      bufio.NewWriterSize(w, bufSize),
		buf:     make([]byte, 0, 512),
	}
	if fw.style.loc == nil {
		fw.style.loc = time.Local
	}
	if fw.statsTo == nil {
		fw.statsTo = os.Stderr
	}
	fw.startDocument()
	return fw, nil
}

const bufSize = 64 << 10

type writer struct {
	mu      sync.Mutex
	kind    kind
	style   style
	statsTo io.Writer
	dst     io.Writer // what bw writes to
	bw      *bufio.Writer
	buf     []byte // scratch for one record
	// elems counts the elements of the current json document.
	elems  int
	closed bool
}

// startDocument buffers a json document's opening.
func (w *writer) startDocument() {
	if w.kind == kindJSON {
		_, _ = w.bw.WriteString("[") // bufio errors stick: the next Write or Flush reports them
		w.elems = 0
	}
}

// endDocument buffers a json document's closing.
func (w *writer) endDocument() {
	if w.kind == kindJSON {
		_, _ = w.bw.WriteString("\n]\n") // reported by the Flush that follows
	}
}

// emit writes the record in w.buf to the buffered stream without splitting
// it across flushes. For json it prepends the element separator.
func (w *writer) emit() error {
	if w.kind == kindJSON {
		sep := ",\n"
		if w.elems == 0 {
			sep = "\n"
		}
		if w.bw.Available() < len(sep)+len(w.buf) && w.bw.Buffered() > 0 {
			if err := w.bw.Flush(); err != nil {
				return err
			}
		}
		_, _ = w.bw.WriteString(sep) // an error sticks: the Write below reports it
		_, err := w.bw.Write(w.buf)
		if err == nil {
			w.elems++
		}
		return err
	}
	if w.bw.Available() < len(w.buf) && w.bw.Buffered() > 0 {
		if err := w.bw.Flush(); err != nil {
			return err
		}
	}
	_, err := w.bw.Write(w.buf)
	return err
}

// record renders one record in the writer's format and emits it whole.
// Every record type has a standard and a json rendering; ppviz only has
// RTT samples, so a nil ppviz means the record is skipped there.
func record[T any](w *writer, e *T,
	standard func([]byte, *T, *style) []byte,
	ppviz func([]byte, *T) []byte,
	json func([]byte, *T, *style) []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	switch w.kind {
	case kindStandard:
		w.buf = standard(w.buf[:0], e, &w.style)
	case kindPPViz:
		if ppviz == nil {
			return nil
		}
		w.buf = ppviz(w.buf[:0], e)
	case kindJSON:
		w.buf = json(w.buf[:0], e, &w.style)
	case kindJSONL:
		w.buf = append(json(w.buf[:0], e, &w.style), '\n')
	}
	return w.emit()
}

func (w *writer) WriteRTT(e *events.RTT) error {
	return record(w, e, appendRTTStandard, appendRTTPPViz, appendRTTJSON)
}

func (w *writer) WriteFlow(e *events.FlowEvent) error {
	return record(w, e, appendFlowStandard, nil, appendFlowJSON)
}

func (w *writer) WriteStats(s *events.Stats) error {
	return sideRecord(w, s, appendStatsLine, appendStatsJSON)
}

// WriteAnonKey implements Writer: like stats, a line on StatsTo for the
// standard and ppviz formats, a record in the stream for json and jsonl.
func (w *writer) WriteAnonKey(k *events.AnonKey) error {
	return sideRecord(w, k, appendAnonKeyLine, appendAnonKeyJSON)
}

// sideRecord writes a record about the run rather than the traffic: a line
// to StatsTo for the standard and ppviz formats, so that their main stream
// stays parseable, and into the stream for json and jsonl.
func sideRecord[T any](w *writer, r *T, line func([]byte, *T, *time.Location) []byte, json func([]byte, *T) []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	switch w.kind {
	case kindStandard, kindPPViz:
		w.buf = line(w.buf[:0], r, w.style.loc)
		_, err := w.statsTo.Write(w.buf)
		return err
	case kindJSON:
		w.buf = json(w.buf[:0], r)
	case kindJSONL:
		w.buf = append(json(w.buf[:0], r), '\n')
	}
	return w.emit()
}

func (w *writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bw.Flush()
}

func (w *writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	w.endDocument()
	return w.bw.Flush()
}

// Capabilities implements Writer: every one (ppviz, which has no record for
// aggregates, summaries and PDM, skips them).
func (w *writer) Capabilities() Capability { return All }

// Restart implements Writer.
func (w *writer) Restart(reopen func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	if !w.closed {
		w.endDocument()
	}
	if err := w.bw.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("flushing before reopen: %w", err))
	}
	if err := reopen(); err != nil {
		errs = append(errs, err)
	}
	// Drop whatever a failed flush left behind and clear the sticky error:
	// bufio.Writer.Reset keeps the buffer, so this does not allocate.
	w.bw.Reset(w.dst)
	if !w.closed {
		w.startDocument()
	}
	return errors.Join(errs...)
}
