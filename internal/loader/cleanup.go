package loader

import (
	"fmt"
	"io"

	"github.com/cilium/ebpf/link"
)

// Cleaner runs the map-element iterator programs that expire idle flows
// and unanswered timestamps. The walk happens in the kernel; user space
// only reads the (empty) iterator output to trigger it.
type Cleaner struct {
	iters []*link.Iter
}

// NewCleaner attaches the iterators to the flow and timestamp maps.
func (o *Objects) NewCleaner() (*Cleaner, error) {
	c := &Cleaner{}
	for _, it := range []struct {
		name string
		opts link.IterOptions
	}{
		{"flows", link.IterOptions{Program: o.RttscopeCleanupFlows, Map: o.FlowMap}},
		{"timestamps", link.IterOptions{Program: o.RttscopeCleanupTimestamps, Map: o.TsMap}},
	} {
		l, err := link.AttachIter(it.opts)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("attach %s cleanup iterator: %w", it.name, err)
		}
		c.iters = append(c.iters, l)
	}
	return c, nil
}

// Run walks both maps once.
func (c *Cleaner) Run() error {
	for _, it := range c.iters {
		rd, err := it.Open()
		if err != nil {
			return fmt.Errorf("open cleanup iterator: %w", err)
		}
		_, err = io.Copy(io.Discard, rd)
		rd.Close()
		if err != nil {
			return fmt.Errorf("run cleanup iterator: %w", err)
		}
	}
	return nil
}

// Close detaches the iterators.
func (c *Cleaner) Close() error {
	for _, it := range c.iters {
		it.Close()
	}
	c.iters = nil
	return nil
}
