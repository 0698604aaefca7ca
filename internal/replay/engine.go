// Package replay feeds captured packets to the very BPF programs the live
// monitor attaches, through BPF_PROG_TEST_RUN, with each packet's capture
// time handed to the program as skb->tstamp.
package replay

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
)

// Sink receives decoded events. The pointers are only valid during the call.
type Sink interface {
	RTT(*events.RTT) error
	Flow(*events.FlowEvent) error
}

// Engine runs packets through the programs and delivers the events.
type Engine struct {
	objs    *loader.Objects
	cleaner *loader.Cleaner
	rb      *ringbuf.Reader
	sink    Sink
	dec     events.Decoder
	skbSize int // size of struct __sk_buff (tc runner context)
	tsOff   int // offset of __sk_buff.tstamp
	rec     ringbuf.Record
	rtt     events.RTT
	flow    events.FlowEvent
	// run feeds packets to the programs without per-call allocation.
	run packetRunner
}

// NewEngine loads the programs in replay mode (cfg.Replay is forced on).
func NewEngine(cfg loader.Config, sink Sink) (*Engine, error) {
	cfg.Replay = true
	objs, err := loader.Load(cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{objs: objs, sink: sink}
	if e.cleaner, err = objs.NewCleaner(); err != nil {
		e.Close()
		return nil, err
	}
	if e.rb, err = ringbuf.NewReader(objs.Events); err != nil {
		e.Close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	size, off, err := skbLayout()
	if err != nil {
		e.Close()
		return nil, err
	}
	e.skbSize, e.tsOff = size, off
	e.run = e.newRunner()
	objs.Variant.Replay = e.runnerVariant()
	return e, nil
}

// skbLayout finds the size of struct __sk_buff and the offset of tstamp in
// the running kernel's BTF.
func skbLayout() (size, tstamp int, err error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, 0, fmt.Errorf("load kernel BTF: %w", err)
	}
	var skb *btf.Struct
	if err := spec.TypeByName("__sk_buff", &skb); err != nil {
		return 0, 0, fmt.Errorf("kernel BTF lacks __sk_buff: %w", err)
	}
	for _, m := range skb.Members {
		if m.Name == "tstamp" {
			return int(skb.Size), int(m.Offset.Bytes()), nil
		}
	}
	return 0, 0, errors.New("__sk_buff has no tstamp field")
}

// Objects exposes the loaded programs and maps (counters, tests).
func (e *Engine) Objects() *loader.Objects { return e.objs }

// Feed runs one Ethernet frame, captured at tsUnixNano, through the egress
// or ingress program and delivers the events it produced.
func (e *Engine) Feed(frame []byte, tsUnixNano int64, egress bool) error {
	if err := e.run.feed(frame, tsUnixNano, egress); err != nil {
		return fmt.Errorf("run BPF program on packet: %w", err)
	}
	return e.Drain()
}

// Expire runs the cleanup iterators at the time of the newest packet, as
// the live monitor does every cleanup interval.
func (e *Engine) Expire() error {
	if err := e.cleaner.Run(); err != nil {
		return err
	}
	return e.Drain()
}

// Drain delivers every event waiting in the ring buffer without blocking.
func (e *Engine) Drain() error {
	for e.rb.AvailableBytes() > 0 {
		if err := e.rb.ReadInto(&e.rec); err != nil {
			return fmt.Errorf("read ring buffer: %w", err)
		}
		kind, err := e.dec.Decode(e.rec.RawSample, &e.rtt, &e.flow)
		if err != nil {
			return err
		}
		switch kind {
		case events.KindRTT:
			err = e.sink.RTT(&e.rtt)
		case events.KindFlow:
			err = e.sink.Flow(&e.flow)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Stats returns the kernel counters, exact (loader.Objects.StatsExact).
func (e *Engine) Stats(s *events.Stats) error { return e.objs.StatsExact(s) }

// Close releases everything.
func (e *Engine) Close() error {
	if e.rb != nil {
		e.rb.Close()
	}
	if e.cleaner != nil {
		e.cleaner.Close()
	}
	return e.objs.Close()
}
