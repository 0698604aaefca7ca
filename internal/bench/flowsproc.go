package bench

import (
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rttscope/rttscope/internal/traffic"
)

// flowsProc is the many-flows TCP generator (internal/cmd/bench-flows) in
// a child process.
type flowsProc struct {
	p                     *loadProc
	opened, written, errs *atomic.Uint64
}

// startFlowsProc runs the generator bin in the named namespace, whose
// port range the caller widened (traffic.EnsurePortRange), and returns
// once all o.Flows connections to dst are open (its counter says so: with
// thousands of flows sending, a line from it would take minutes).
func startFlowsProc(bin, netns string, dst netip.AddrPort, o traffic.ManyFlowsOptions) (*flowsProc, error) {
	args := []string{"--netns", netns, "--connect", dst.String(), "--flows", strconv.Itoa(o.Flows),
		"--rate", strconv.FormatUint(o.RateBytesPerSec, 10)}
	if o.WriteSize > 0 {
		args = append(args, "--write-size", strconv.Itoa(o.WriteSize))
	}
	p, err := startLoadProc("flows", bin, args, traffic.FlowCounterSlots)
	if err != nil {
		return nil, err
	}
	f := &flowsProc{p: p}
	f.opened, f.written, f.errs = traffic.FlowCountersAt(p.counters)
	// Opening the connections takes up to traffic's 60 s set-up timeout.
	if err := p.waitReady(func() bool { return f.opened.Load() >= uint64(o.Flows) }, 2*time.Minute); err != nil {
		return nil, err
	}
	return f, nil
}

// Written is the number of bytes handed to the sockets so far.
func (f *flowsProc) Written() uint64 { return f.written.Load() }

// WriteErrors counts connections that stopped on a write error.
func (f *flowsProc) WriteErrors() uint64 { return f.errs.Load() }

// stop kills the generator: the kernel resets every connection (SO_LINGER
// 0) as the process ends, and none of its busy goroutines has to run.
func (f *flowsProc) stop() error { return f.p.kill() }
