package privacy

import (
	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

// The format.Writer methods. Each copies the record into the Writer's
// scratch value of its type, changes the copy and passes it on: the
// caller's record is left as it was.

// WriteRTT implements format.Writer.
func (w *Writer) WriteRTT(e *events.RTT) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.before(e.Time); err != nil {
		return err
	}
	c := &w.rtt
	*c = *e
	c.Time = w.time(e.Time)
	w.anonFlow(&c.Flow)
	if w.opts.Minimal {
		c.SentPackets, c.SentBytes, c.RecPackets, c.RecBytes = 0, 0, 0, 0
	}
	// A DNS name (--dns-names) names a host as its address does: it
	// does not pass address anonymization or minimal output.
	if w.opts.Minimal || w.anonymizing() {
		c.DNS.Name = ""
	}
	return w.next.WriteRTT(c)
}

// WriteFlow implements format.Writer; with Minimal flow events are not
// written (but the first still sets the origin of relative time).
func (w *Writer) WriteFlow(e *events.FlowEvent) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.before(e.Time); err != nil || w.opts.Minimal {
		return err
	}
	c := &w.flow
	*c = *e
	c.Time = w.time(e.Time)
	w.anonFlow(&c.Flow)
	return w.next.WriteFlow(c)
}

// WriteStats implements format.Writer. Stats records count rttscope's own
// work and carry no address: only their time changes.
func (w *Writer) WriteStats(s *events.Stats) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.before(s.Time); err != nil {
		return err
	}
	c := &w.stats
	*c = *s
	c.Time = w.time(s.Time)
	return w.next.WriteStats(c)
}

// WriteAggregate implements format.Writer: the prefix, computed on real
// addresses in the kernel, is anonymized as a prefix.
func (w *Writer) WriteAggregate(a *events.Aggregate) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.before(a.Time); err != nil {
		return err
	}
	c := &w.agg
	*c = *a
	c.Time, c.Start = w.time(a.Time), w.time(a.Start)
	w.anonPrefix(c)
	if w.opts.Minimal {
		c.RX, c.TX = events.Traffic{}, events.Traffic{}
	}
	return w.next.WriteAggregate(c)
}

// WriteFlowSummary implements format.Writer.
func (w *Writer) WriteFlowSummary(s *events.FlowSummary) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.before(s.Time); err != nil {
		return err
	}
	c := &w.summary
	*c = *s
	c.Time, c.Start = w.time(s.Time), w.time(s.Start)
	w.anonFlow(&c.Flow)
	if w.opts.Minimal {
		c.Src.Packets, c.Src.Bytes, c.Dst.Packets, c.Dst.Bytes = 0, 0, 0, 0
	}
	return w.next.WriteFlowSummary(c)
}

// WritePDM implements format.Writer. The option's fields carry no
// address; what --minimal leaves out of them the format writer decides
// (format.Options.Minimal).
func (w *Writer) WritePDM(p *events.PDM) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.before(p.Time); err != nil {
		return err
	}
	c := &w.pdm
	*c = *p
	c.Time = w.time(p.Time)
	w.anonFlow(&c.Flow)
	return w.next.WritePDM(c)
}

// WritePDMInterval implements format.Writer.
func (w *Writer) WritePDMInterval(p *events.PDMInterval) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.before(p.Time); err != nil {
		return err
	}
	c := &w.pdmInt
	*c = *p
	c.Time, c.Start = w.time(p.Time), w.time(p.Start)
	w.anonFlow(&c.Flow)
	return w.next.WritePDMInterval(c)
}

// WriteAnonKey implements format.Writer: a record from upstream passes
// with its time changed.
func (w *Writer) WriteAnonKey(k *events.AnonKey) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := *k
	c.Time = w.time(k.Time)
	return w.next.WriteAnonKey(&c)
}

// Flush implements format.Writer.
func (w *Writer) Flush() error { return w.next.Flush() }

// Close implements format.Writer: it closes the next writer and wipes the
// key file's content from memory.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.keys != nil {
		w.keys.wipe()
	}
	w.mu.Unlock()
	return w.next.Close()
}

// Restart implements format.Writer.
func (w *Writer) Restart(reopen func() error) error { return w.next.Restart(reopen) }

// Capabilities implements format.Writer: the next writer's.
func (w *Writer) Capabilities() format.Capability { return w.next.Capabilities() }
