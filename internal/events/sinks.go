package events

import "slices"

// SinkReport is the stats record's part about the output sinks.
type SinkReport struct {
	// List has one entry per sink, in the order they were given.
	List []SinkStats
}

// SinkList returns the sinks' counters of s (nil without them).
func (s *Stats) SinkList() []SinkStats {
	if s.Sinks == nil {
		return nil
	}
	return s.Sinks.List
}

// Clone returns a deep copy of s (Process, BPF and Sinks are owned by
// the record: a writer that keeps a record past the call keeps a clone).
func (s *Stats) Clone() *Stats {
	c := *s
	if s.Process != nil {
		p := *s.Process
		c.Process = &p
	}
	if s.BPF != nil {
		b := *s.BPF
		b.Programs = slices.Clone(b.Programs)
		c.BPF = &b
	}
	if s.Sinks != nil {
		c.Sinks = &SinkReport{List: slices.Clone(s.Sinks.List)}
	}
	return &c
}

// SinkStats counts what one output sink (files, Kafka, metrics) did with
// the records handed to it since the run started (docs/sinks.md). Every
// record given to a sink is, at any time, written, waiting in its queue,
// spooled or dropped: nothing is lost without being counted here.
type SinkStats struct {
	// Name is the sink: "files", "kafka" or "metrics".
	Name string
	// Policy is what the sink does when its queue is full: "block",
	// "drop" or "spool".
	Policy string
	// Records counts the records handed to the sink, Dropped those it
	// lost (queue full under the drop policy, spool full, a message the
	// broker refused, messages not acknowledged by the end of the run).
	Records, Dropped uint64
	// Queued is the number of records in the sink's queue now.
	Queued uint64
	// Produced counts the messages handed to the Kafka client, Acked
	// those the brokers acknowledged, Spooled those written to the
	// on-disk spool while the brokers did not take more (Kafka only;
	// zero for the other sinks).
	Produced, Acked, Spooled uint64
}
