// Package parquetout is the Parquet output format (-F parquet, only with
// --write FILE): a format.Writer that writes every record as one row of a
// single wide schema, Row, compressed with zstd (docs/files.md has the
// schema).
//
// A Parquet file is readable only once its footer is written, so a file
// is complete only after Close or Restart; until then rows are kept in
// row groups of RowGroupRows rows. Flush does not end a row group (the
// monitor flushes often, and small row groups compress badly): what
// makes rows durable is a Restart, which output.Rotating performs on
// rotation and every --flush-interval.
//
// Rows are collected in batches of batchRows; a full batch goes to an
// encoder goroutine (column encoding and compression), so that the
// goroutine writing records only fills the next one. Close ends the
// encoder.
package parquetout

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

// Record types: the values of Row.RecordType.
const (
	TypeRTT         = "rtt"
	TypeFlow        = "flow_event"
	TypeStats       = "stats"
	TypeAggregate   = "aggregate"
	TypeFlowSummary = "flow_summary"
	TypeAnonKey     = "anon_key"
	TypePDM         = "pdm"
	TypePDMInterval = "pdm_interval"
)

// Row is one record. Every row has RecordType and Timestamp; which other
// columns it fills depends on its type (docs/files.md):
//
//   - rtt: the flow columns, rtt, min_rtt, smoothed_rtt, match_on_egress,
//     source, for DNS samples dns_qtype, dns_rcode, dns_truncated and
//     (--dns-names) dns_name, and
//     (without --minimal) the four counters;
//   - flow_event: the flow columns, flow_event, reason, triggered_by;
//   - pdm, pdm_interval (rttscope pdm): the flow columns and record;
//   - stats, aggregate, flow_summary, anon_key: record, the record's jsonl
//     object as JSON text, so that these records, a few per interval, keep
//     every field of the json formats. (A JSON logical type is not used:
//     parquet-go v0.32 writes optional JSON columns as nulls or panics.)
//
// The flow columns are src_ip, src_port, dest_ip, dest_port and protocol,
// or, when --drop-addresses replaced the addresses by a number, flow_id,
// src_port, dest_port and protocol. Addresses are strings, as in json
// (they may be anonymized). Durations are INT64 nanoseconds (Parquet has
// no duration logical type), timestamps TIMESTAMP(NANOS, UTC).
type Row struct {
	RecordType    string  `parquet:"record_type,dict,zstd"`
	Timestamp     int64   `parquet:"timestamp,timestamp(nanosecond),delta,zstd"`
	FlowID        *uint64 `parquet:"flow_id,optional,zstd"`
	SrcIP         *string `parquet:"src_ip,optional,dict,zstd"`
	SrcPort       *int32  `parquet:"src_port,optional,zstd"`
	DestIP        *string `parquet:"dest_ip,optional,dict,zstd"`
	DestPort      *int32  `parquet:"dest_port,optional,zstd"`
	Protocol      *string `parquet:"protocol,optional,dict,zstd"`
	RTT           *int64  `parquet:"rtt,optional,zstd"`
	MinRTT        *int64  `parquet:"min_rtt,optional,zstd"`
	SentPackets   *uint64 `parquet:"sent_packets,optional,zstd"`
	SentBytes     *uint64 `parquet:"sent_bytes,optional,zstd"`
	RecPackets    *uint64 `parquet:"rec_packets,optional,zstd"`
	RecBytes      *uint64 `parquet:"rec_bytes,optional,zstd"`
	MatchOnEgress *bool   `parquet:"match_on_egress,optional,zstd"`
	SmoothedRTT   *int64  `parquet:"smoothed_rtt,optional,zstd"`
	Source        *string `parquet:"source,optional,dict,zstd"`
	DNSQType      *string `parquet:"dns_qtype,optional,dict,zstd"`
	DNSRCode      *string `parquet:"dns_rcode,optional,dict,zstd"`
	DNSTruncated  *bool   `parquet:"dns_truncated,optional,zstd"`
	DNSName       *string `parquet:"dns_name,optional,dict,zstd"`
	FlowEvent     *string `parquet:"flow_event,optional,dict,zstd"`
	Reason        *string `parquet:"reason,optional,dict,zstd"`
	TriggeredBy   *string `parquet:"triggered_by,optional,dict,zstd"`
	Record        *string `parquet:"record,optional,zstd"`
}

// RowGroupRows is the number of rows after which a row group is written.
const RowGroupRows = 256 << 10

// batchRows is how many rows are buffered before they go to the Parquet
// writer's column buffers.
const batchRows = 4096

// Writer is the Parquet format.Writer.
type Writer struct {
	mu      sync.Mutex
	dst     io.Writer
	pw      *parquet.GenericWriter[Row]
	opts    format.Options
	cur     *batch      // rows being collected
	free    chan *batch // batches the encoder is done with
	work    chan *batch // to the encoder; nil asks for a sync
	synced  chan error  // the encoder's answer to a sync
	pending int         // rows handed to the encoder since the file started
	// jsonl renders the records stored as JSON.
	jsonBuf strings.Builder
	jsonl   format.Writer
	strs    strCache
	dnsStrs map[uint32]*string
	closed  bool
	err     error // sticky until Restart
}

// New returns a Parquet writer onto w. opts.Minimal leaves the counters
// null; Location and StatsTo are not used.
func New(w io.Writer, opts format.Options) (*Writer, error) {
	if w == nil {
		return nil, errors.New("parquetout: nil io.Writer")
	}
	pw := &Writer{dst: w, opts: opts, strs: strCache{}, dnsStrs: map[uint32]*string{}, cur: newBatch(),
		free: make(chan *batch, 1), work: make(chan *batch, 1), synced: make(chan error)}
	pw.free <- newBatch()
	var err error
	if pw.jsonl, err = format.New("jsonl", &pw.jsonBuf, opts); err != nil {
		return nil, err
	}
	pw.start()
	go pw.encode()
	return pw, nil
}

// batch is a batch of rows and the values they point to, reused after
// each batch, so that a row costs no allocation (see arena).
type batch struct {
	rows  []Row
	i64   arena[int64]
	u64   arena[uint64]
	i32   arena[int32]
	bools arena[bool]
}

func newBatch() *batch {
	return &batch{rows: make([]Row, 0, batchRows),
		i64: newArena[int64](3 * batchRows), u64: newArena[uint64](5 * batchRows),
		i32: newArena[int32](2 * batchRows), bools: newArena[bool](batchRows)}
}

// reset empties b once no row of it is needed any more.
func (b *batch) reset() {
	clear(b.rows) // drop the pointers
	b.rows = b.rows[:0]
	b.i64.reset()
	b.u64.reset()
	b.i32.reset()
	b.bools.reset()
}

// encode runs on its own goroutine: it gives full batches to the Parquet
// writer (column encoding and compression, the expensive part), so that
// the goroutine writing records only fills the next batch. Only encode
// touches pw, except between a sync and the next batch.
func (w *Writer) encode() {
	var err error
	for b := range w.work {
		if b == nil {
			w.synced <- err
			err = nil
			continue
		}
		if err == nil {
			if _, werr := w.pw.Write(b.rows); werr != nil {
				err = fmt.Errorf("write parquet: %w", werr)
			}
		}
		b.reset()
		w.free <- b
	}
}

// sync waits until the encoder has written every batch handed to it and
// returns its first error since the last sync.
func (w *Writer) sync() error {
	w.work <- nil
	return <-w.synced
}

func (w *Writer) start() {
	w.pw = parquet.NewGenericWriter[Row](w.dst,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault}),
		parquet.CreatedBy("rttscope", "", ""),
		parquet.MaxRowsPerRowGroup(RowGroupRows),
	)
	w.pending = 0
}

// Rows returns the number of rows written to the current file so far.
func (w *Writer) Rows() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending + len(w.cur.rows)
}

// Capabilities implements format.Writer: every record, and restarts.
func (w *Writer) Capabilities() format.Capability { return format.All }

// strCache interns address strings, so that a row does not allocate one
// per address when the same hosts recur.
type strCache map[[16]byte]*string

func (c strCache) addr(e *events.Endpoint) *string {
	k := e.IP.As16()
	if p, ok := c[k]; ok {
		return p
	}
	if len(c) > 1<<16 {
		clear(c)
	}
	s := e.IP.String()
	c[k] = &s
	return &s
}

// dnsText returns the mnemonic appendTo renders for value v of kind
// (0: question type, 1: rcode), one string per value for all rows.
func (w *Writer) dnsText(kind, v uint16, appendTo func([]byte) []byte) *string {
	k := uint32(kind)<<16 | uint32(v)
	if p, ok := w.dnsStrs[k]; ok {
		return p
	}
	p := ptr(string(appendTo(nil)))
	w.dnsStrs[k] = p
	return p
}

var protoNames = map[events.Protocol]*string{}

func protoName(p events.Protocol) *string {
	if s, ok := protoNames[p]; ok {
		return s
	}
	s := p.String()
	return &s
}

// sourceNames are the names of the RTT sources, shared by every row.
var sourceNames = func() (n [events.NumSources]*string) {
	for i := range n {
		n[i] = ptr(events.Source(i).String())
	}
	return n
}()

func sourceName(s events.Source) *string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return ptr(s.String())
}

func init() {
	for _, p := range []events.Protocol{events.ProtoTCP, events.ProtoICMP, events.ProtoICMPv6, events.ProtoUDP} {
		s := p.String()
		protoNames[p] = &s
	}
}

func ptr[T any](v T) *T { return &v }

// arena hands out pointers to values for the rows of one batch. Its
// capacity covers a full batch (the most values of each type one row
// takes, times batchRows), so it never grows and no pointer goes stale.
type arena[T any] struct{ vals []T }

func newArena[T any](n int) arena[T] { return arena[T]{make([]T, 0, n)} }

func (a *arena[T]) ptr(v T) *T {
	a.vals = append(a.vals, v)
	return &a.vals[len(a.vals)-1]
}

func (a *arena[T]) reset() { a.vals = a.vals[:0] }

// fillFlow sets the flow columns as the json formats name them.
func (w *Writer) fillFlow(r *Row, f *events.Flow) {
	if f.AddressesDropped() {
		r.FlowID = w.cur.u64.ptr(f.ID)
	} else {
		r.SrcIP = w.strs.addr(&f.Src)
		r.DestIP = w.strs.addr(&f.Dst)
	}
	r.SrcPort = w.cur.i32.ptr(int32(f.Src.Port))
	r.DestPort = w.cur.i32.ptr(int32(f.Dst.Port))
	r.Protocol = protoName(f.Proto)
}

var (
	strRTT      = ptr(TypeRTT)
	eventNames  = map[events.FlowEventType]*string{events.FlowOpening: ptr("opening"), events.FlowClosing: ptr("closing")}
	triggerSrc  = ptr("src")
	triggerDest = ptr("dest")
)

// add appends a row, handing the batch to the encoder when it is full.
func (w *Writer) add(r Row) error {
	if w.closed {
		return format.ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	w.cur.rows = append(w.cur.rows, r)
	if len(w.cur.rows) == cap(w.cur.rows) {
		w.handOff()
	}
	return nil
}

// handOff gives the current batch to the encoder and takes a free one
// (waiting while the encoder is a batch behind).
func (w *Writer) handOff() {
	if len(w.cur.rows) == 0 {
		return
	}
	w.pending += len(w.cur.rows)
	w.work <- w.cur
	w.cur = <-w.free
}

// drain hands off the current batch and waits until it is written.
func (w *Writer) drain() error {
	w.handOff()
	if err := w.sync(); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

// WriteRTT implements format.Writer.
func (w *Writer) WriteRTT(e *events.RTT) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return format.ErrClosed
	}
	r := Row{RecordType: *strRTT, Timestamp: e.Time,
		RTT: w.cur.i64.ptr(int64(e.RTT)), MinRTT: w.cur.i64.ptr(int64(e.MinRTT)), SmoothedRTT: w.cur.i64.ptr(int64(e.SmoothedRTT)),
		MatchOnEgress: w.cur.bools.ptr(e.MatchOnEgress), Source: sourceName(e.Source)}
	w.fillFlow(&r, &e.Flow)
	if e.Source == events.SourceDNS {
		r.DNSQType = w.dnsText(0, e.DNS.QType, e.DNS.AppendQType)
		r.DNSRCode = w.dnsText(1, uint16(e.DNS.RCode), e.DNS.AppendRCode)
		r.DNSTruncated = w.cur.bools.ptr(e.DNS.Truncated)
		if e.DNS.Name != "" {
			r.DNSName = ptr(e.DNS.Name)
		}
	}
	if !w.opts.Minimal {
		r.SentPackets, r.SentBytes = w.cur.u64.ptr(e.SentPackets), w.cur.u64.ptr(e.SentBytes)
		r.RecPackets, r.RecBytes = w.cur.u64.ptr(e.RecPackets), w.cur.u64.ptr(e.RecBytes)
	}
	return w.add(r)
}

// WriteFlow implements format.Writer.
func (w *Writer) WriteFlow(e *events.FlowEvent) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return format.ErrClosed
	}
	r := Row{RecordType: TypeFlow, Timestamp: e.Time, FlowEvent: eventNames[e.Type], Reason: ptr(e.Reason.String())}
	if r.FlowEvent == nil {
		r.FlowEvent = ptr(e.Type.String())
	}
	r.TriggeredBy = triggerDest
	if e.TriggeredBySrc {
		r.TriggeredBy = triggerSrc
	}
	w.fillFlow(&r, &e.Flow)
	return w.add(r)
}

// jsonRow adds a row of type typ holding the record the jsonl writer
// renders with write.
func (w *Writer) jsonRow(typ string, ts int64, write func(format.Writer) error) error {
	return w.flowJSONRow(typ, ts, nil, write)
}

// flowJSONRow is jsonRow with the flow columns of f (when not nil).
func (w *Writer) flowJSONRow(typ string, ts int64, f *events.Flow, write func(format.Writer) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.jsonBuf.Reset()
	if err := write(w.jsonl); err != nil {
		return err
	}
	if err := w.jsonl.Flush(); err != nil {
		return err
	}
	rec := strings.TrimSuffix(w.jsonBuf.String(), "\n")
	r := Row{RecordType: typ, Timestamp: ts, Record: &rec}
	if f != nil {
		w.fillFlow(&r, f)
	}
	return w.add(r)
}

// WriteStats implements format.Writer.
func (w *Writer) WriteStats(s *events.Stats) error {
	return w.jsonRow(TypeStats, s.Time, func(j format.Writer) error { return j.WriteStats(s) })
}

// WriteAggregate implements format.Writer.
func (w *Writer) WriteAggregate(a *events.Aggregate) error {
	return w.jsonRow(TypeAggregate, a.Time, func(j format.Writer) error { return j.WriteAggregate(a) })
}

// WriteFlowSummary implements format.Writer.
func (w *Writer) WriteFlowSummary(s *events.FlowSummary) error {
	return w.jsonRow(TypeFlowSummary, s.Time, func(j format.Writer) error { return j.WriteFlowSummary(s) })
}

// WriteAnonKey implements format.Writer.
func (w *Writer) WriteAnonKey(k *events.AnonKey) error {
	return w.jsonRow(TypeAnonKey, k.Time, func(j format.Writer) error { return j.WriteAnonKey(k) })
}

// WritePDM implements format.Writer: the flow columns, and the record as
// JSON (its fields are many and mostly zero outside PDM).
func (w *Writer) WritePDM(p *events.PDM) error {
	return w.flowJSONRow(TypePDM, p.Time, &p.Flow, func(j format.Writer) error { return j.WritePDM(p) })
}

// WritePDMInterval implements format.Writer, as WritePDM.
func (w *Writer) WritePDMInterval(p *events.PDMInterval) error {
	return w.flowJSONRow(TypePDMInterval, p.Time, &p.Flow, func(j format.Writer) error { return j.WritePDMInterval(p) })
}

// Flush implements format.Writer. It moves buffered rows into the open
// row group but writes no partial row group: see the package comment.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	return w.drain()
}

// finish writes the rows left and the footer.
func (w *Writer) finish() error {
	err := w.drain()
	if cerr := w.pw.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write parquet footer: %w", cerr)
	}
	return err
}

// Close implements format.Writer: the last row group and the footer.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.finish()
	close(w.work) // ends the encoder
	return err
}

// Restart implements format.Writer: the file ends (last row group,
// footer), reopen switches the destination, a new file starts.
func (w *Writer) Restart(reopen func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	if !w.closed {
		if err := w.finish(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := reopen(); err != nil {
		errs = append(errs, err)
	}
	w.err = nil
	w.cur.reset()
	if !w.closed {
		w.start()
	}
	return errors.Join(errs...)
}

var _ format.Writer = (*Writer)(nil)
