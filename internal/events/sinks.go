package events

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
