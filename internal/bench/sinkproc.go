package bench

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rttscope/rttscope/internal/traffic"
)

// sinkProc is the TCP sink (internal/cmd/bench-sink) in a child process.
type sinkProc struct {
	p    *loadProc
	c    traffic.SinkCounters
	port uint16
}

// startSinkProc runs the sink program bin listening on addr (any port)
// inside the named namespace.
func startSinkProc(bin, netns string, addr netip.Addr) (*sinkProc, error) {
	p, err := startLoadProc("sink", bin, []string{"--netns", netns, "--listen", netip.AddrPortFrom(addr, 0).String()},
		traffic.SinkCounterSlots)
	if err != nil {
		return nil, err
	}
	line, err := p.firstLine(30 * time.Second)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(strings.TrimPrefix(line, "port "), 10, 16)
	if err != nil {
		_ = p.close(10 * time.Second) // the protocol error is the one to report
		return nil, fmt.Errorf("sink process: want \"port N\", got %q", line)
	}
	return &sinkProc{p: p, c: traffic.SinkCountersAt(p.counters), port: uint16(port)}, nil
}

// Bytes is what the sink received so far.
func (s *sinkProc) Bytes() uint64 { return s.c.Bytes.Load() }

// Accepted is the number of connections accepted so far; Active the
// number still open.
func (s *sinkProc) Accepted() int64 { return s.c.Conns.Load() }
func (s *sinkProc) Active() int64   { return s.c.Active.Load() }

// close ends the child (closing its stdin; SIGKILL after 10 s).
func (s *sinkProc) close() error { return s.p.close(10 * time.Second) }
