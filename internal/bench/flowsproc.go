package bench

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rttscope/rttscope/internal/traffic"
)

// flowsProc is the many-flows TCP generator (internal/cmd/bench-flows) in
// a child process.
type flowsProc struct {
	p             *loadProc
	written, errs *atomic.Uint64
	flows         int
}

// flowsStopTimeout bounds the generator's exit: it resets every
// connection first.
const flowsStopTimeout = 60 * time.Second

// startFlowsProc runs the generator bin in the named namespace, whose
// port range the caller widened (traffic.EnsurePortRange), and returns
// once all o.Flows connections to dst are open.
func startFlowsProc(bin, netns string, dst netip.AddrPort, o traffic.ManyFlowsOptions) (*flowsProc, error) {
	args := []string{"--netns", netns, "--connect", dst.String(), "--flows", strconv.Itoa(o.Flows),
		"--rate", strconv.FormatUint(o.RateBytesPerSec, 10)}
	if o.WriteSize > 0 {
		args = append(args, "--write-size", strconv.Itoa(o.WriteSize))
	}
	// Opening the connections takes up to traffic's 60 s set-up timeout.
	p, line, err := startLoadProc("flows", bin, args, traffic.FlowCounterSlots, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	if line != "ready" {
		_ = p.close(flowsStopTimeout) // the protocol error is the one to report
		return nil, fmt.Errorf("flows process: want \"ready\", got %q", line)
	}
	f := &flowsProc{p: p, flows: o.Flows}
	f.written, f.errs = traffic.FlowCountersAt(p.counters)
	return f, nil
}

// Written is the number of bytes handed to the sockets so far.
func (f *flowsProc) Written() uint64 { return f.written.Load() }

// WriteErrors counts connections that stopped on a write error.
func (f *flowsProc) WriteErrors() uint64 { return f.errs.Load() }

// stop resets every connection and ends the child.
func (f *flowsProc) stop() error { return f.p.close(flowsStopTimeout) }
