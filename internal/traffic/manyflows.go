package traffic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/nsrun"
)

// This file holds load generators for benchmarks: many concurrent TCP
// flows (up to tens of thousands from one client address) with a sink that
// holds as many connections cheaply, and a small-datagram UDP sender with
// its sink.

// ManyFlowsOptions configure StartManyFlows.
type ManyFlowsOptions struct {
	// Flows is the number of concurrent TCP connections (>= 1).
	Flows int
	// WriteSize is the size of each write in bytes (default 1448, one
	// MSS of the lab's 1500-byte MTU with TCP timestamps).
	WriteSize int
	// RateBytesPerSec is the aggregate rate of all flows together, spread
	// evenly (every flow writes WriteSize bytes once per
	// Flows*WriteSize/Rate seconds). 0: every flow writes as fast as its
	// socket takes data (TCP's congestion control shares the path).
	RateBytesPerSec uint64
	// NoDelay sets TCP_NODELAY (each small write leaves as its own
	// segment instead of being coalesced by Nagle's algorithm).
	NoDelay bool
	// DialWorkers is how many connections are opened in parallel
	// (default 64).
	DialWorkers int
	// SetupTimeout bounds opening all connections (default 60s).
	SetupTimeout time.Duration
	// Written and WriteErrors, when set, are where the flows count
	// (Written, WriteErrors), Opened where the connections opened so far
	// are counted: e.g. memory shared with another process
	// (internal/shmcount), which then reads them without asking.
	Written, WriteErrors, Opened *atomic.Uint64
}

// ManyFlows is a running set of TCP connections sending to one sink.
type ManyFlows struct {
	o        ManyFlowsOptions
	conns    []*net.TCPConn
	written  *atomic.Uint64
	writeErr *atomic.Uint64
	stopped  atomic.Bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
}

// RaiseNoFile makes sure this process may hold at least n open files,
// raising the soft limit of RLIMIT_NOFILE (and the hard limit too when it
// is lower and the process is privileged).
func RaiseNoFile(n uint64) error {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return err
	}
	if r.Cur >= n {
		return nil
	}
	if r.Max < n {
		r.Max = n
	}
	r.Cur = n
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", n, err)
	}
	return nil
}

// RaiseNoFileToHard raises the soft RLIMIT_NOFILE to the hard limit, which
// an unprivileged process may reach, or to atLeast if higher (privileged).
func RaiseNoFileToHard(atLeast uint64) error {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return err
	}
	return RaiseNoFile(max(r.Max, atLeast))
}

// EnsurePortRange widens net.ipv4.ip_local_port_range inside node (which
// must be a namespace of a lab the caller owns) when it holds fewer than
// need ephemeral ports.
func EnsurePortRange(node *lab.Node, need int) error {
	v, err := node.Sysctl("net.ipv4.ip_local_port_range")
	if err != nil {
		return err
	}
	f := strings.Fields(v)
	if len(f) == 2 {
		lo, err1 := strconv.Atoi(f[0])
		hi, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && hi-lo+1 >= need {
			return nil
		}
	}
	if need > 64000 {
		return fmt.Errorf("%d flows from one address need more ephemeral ports than exist", need)
	}
	return node.SetSysctl("net.ipv4.ip_local_port_range", "1024 65535")
}

// StartManyFlows opens o.Flows TCP connections from client to dst (every
// connection needs its own ephemeral port: the client namespace's port
// range is widened when too small) and keeps them all sending until Stop.
// It returns once every connection is open, or with an error (having
// closed what it opened). Each connection is driven by its own goroutine.
// The caller needs enough open files for the connections (RaiseNoFile;
// the sink's side counts as well when it runs in the same process).
func StartManyFlows(ctx context.Context, client *lab.Node, dst netip.AddrPort, o ManyFlowsOptions) (*ManyFlows, error) {
	if err := EnsurePortRange(client, o.Flows+100); err != nil {
		return nil, fmt.Errorf("manyflows: %w", err)
	}
	return startManyFlows(ctx, client.Do, client.Name, dst, o)
}

// StartManyFlowsIn is StartManyFlows from the named network namespace
// (under /run/netns; "": this one), e.g. in a child process of the lab's
// owner, which must have widened the port range (EnsurePortRange).
func StartManyFlowsIn(ctx context.Context, netns string, dst netip.AddrPort, o ManyFlowsOptions) (*ManyFlows, error) {
	do := func(fn func() error) error { return nsrun.Named(netns, fn) }
	label := netns
	if label == "" {
		label = "this namespace"
	}
	return startManyFlows(ctx, do, label, dst, o)
}

// startManyFlows opens the connections in goroutines running under do,
// which puts them in the client's namespace.
func startManyFlows(ctx context.Context, do func(func() error) error, client string, dst netip.AddrPort, o ManyFlowsOptions) (*ManyFlows, error) {
	if o.Flows < 1 {
		return nil, errors.New("manyflows: need at least one flow")
	}
	if o.WriteSize <= 0 {
		o.WriteSize = 1448
	}
	if o.DialWorkers <= 0 {
		o.DialWorkers = 64
	}
	if o.SetupTimeout <= 0 {
		o.SetupTimeout = 60 * time.Second
	}
	if o.Written == nil {
		o.Written = new(atomic.Uint64)
	}
	if o.WriteErrors == nil {
		o.WriteErrors = new(atomic.Uint64)
	}
	m := &ManyFlows{o: o, conns: make([]*net.TCPConn, o.Flows), written: o.Written, writeErr: o.WriteErrors}
	dctx, dcancel := context.WithTimeout(ctx, o.SetupTimeout)
	defer dcancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, o.DialWorkers)
	workers := min(o.DialWorkers, o.Flows)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The goroutine stays on the namespace's thread while it
			// dials, so every socket it creates is the client's.
			err := do(func() error {
				d := net.Dialer{Timeout: 10 * time.Second}
				for {
					i := int(next.Add(1) - 1)
					if i >= o.Flows {
						return nil
					}
					c, err := d.DialContext(dctx, "tcp", dst.String())
					if err != nil {
						return fmt.Errorf("connection %d: %w", i+1, err)
					}
					tc := c.(*net.TCPConn)
					// Go sets TCP_NODELAY by default; small writes
					// should normally be coalesced as by any sender.
					if err := tc.SetNoDelay(o.NoDelay); err != nil {
						return fmt.Errorf("connection %d: %w", i+1, err)
					}
					// However it is closed, also by the process
					// ending, the connection is reset: nothing
					// queued keeps flowing.
					if err := tc.SetLinger(0); err != nil {
						return fmt.Errorf("connection %d: %w", i+1, err)
					}
					m.conns[i] = tc
					if o.Opened != nil {
						o.Opened.Add(1)
					}
				}
			})
			if err != nil {
				errc <- err
				dcancel() // stop the other workers
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		m.closeConns()
		return nil, fmt.Errorf("manyflows: open %d connections to %s from %s: %w", o.Flows, dst, client, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	var interval time.Duration
	if o.RateBytesPerSec > 0 {
		interval = time.Duration(float64(o.Flows) * float64(o.WriteSize) / float64(o.RateBytesPerSec) * float64(time.Second))
		interval = max(interval, time.Microsecond)
	}
	for i, c := range m.conns {
		m.wg.Add(1)
		// Spread the first writes of paced flows over one interval.
		var phase time.Duration
		if interval > 0 {
			phase = time.Duration(int64(interval) * int64(i) / int64(o.Flows))
		}
		go m.send(rctx, c, interval, phase)
	}
	return m, nil
}

func (m *ManyFlows) send(ctx context.Context, c *net.TCPConn, interval, phase time.Duration) {
	defer m.wg.Done()
	buf := make([]byte, m.o.WriteSize)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	var next time.Time
	if interval > 0 {
		next = time.Now().Add(phase)
	}
	var timer *time.Timer
	for !m.stopped.Load() {
		if interval > 0 {
			if d := time.Until(next); d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				select {
				case <-timer.C:
				case <-ctx.Done():
					return
				}
			}
			next = next.Add(interval)
			if late := time.Since(next); late > 10*interval {
				next = time.Now() // do not burst to catch up after a stall
			}
		}
		n, err := c.Write(buf)
		m.written.Add(uint64(n))
		if err != nil {
			if !m.stopped.Load() {
				m.writeErr.Add(1)
			}
			return
		}
	}
}

// Flows is the number of connections opened.
func (m *ManyFlows) Flows() int { return len(m.conns) }

// Written is the number of bytes handed to the sockets so far.
func (m *ManyFlows) Written() uint64 { return m.written.Load() }

// WriteErrors counts connections that stopped on a write error before
// Stop (e.g. reset by the peer).
func (m *ManyFlows) WriteErrors() uint64 { return m.writeErr.Load() }

// Stop ends every flow (reset, so that no queued data keeps flowing) and
// waits for the senders. Idempotent. The connections are reset before
// the wait: that also ends their writes, whereas waiting first would wait
// for every sender to be scheduled once more, which takes seconds with
// 10,000 busy ones.
func (m *ManyFlows) Stop() error {
	m.once.Do(func() {
		m.stopped.Store(true)
		if m.cancel != nil {
			m.cancel()
		}
		m.closeConns()
		m.wg.Wait()
	})
	return nil
}

// closeConns resets and closes every connection; a write under way on one
// returns with an error.
func (m *ManyFlows) closeConns() {
	for _, c := range m.conns {
		if c != nil {
			c.Close() // a reset (SO_LINGER 0 since it opened): drops what is still queued
		}
	}
}

// NewManySink listens on addr:port inside node (port 0 picks a free port)
// for thousands of connections: a Sink with a small read buffer each.
func NewManySink(node *lab.Node, addr netip.Addr, port uint16) (*Sink, error) {
	return listenSink(node, addr, port, manySinkBuf)
}

// ServeManySink runs a many-connection sink on a listener the caller
// opened (e.g. in another process's view of a namespace), counting into
// c; Close closes ln.
func ServeManySink(ln *net.TCPListener, c SinkCounters) *Sink {
	return serveSink(ln, manySinkBuf, c)
}

// UDPFloodOptions configure StartUDPFlood.
type UDPFloodOptions struct {
	// PayloadSize is the UDP payload of each datagram (default 64).
	PayloadSize int
	// PPS is the target aggregate rate in datagrams per second; 0 sends
	// as fast as the senders can.
	PPS uint64
	// Senders is the number of sending sockets/goroutines (default 1).
	Senders int
}

// UDPFlood is a running small-datagram UDP sender.
type UDPFlood struct {
	o       UDPFloodOptions
	conns   []*net.UDPConn
	sent    atomic.Uint64
	errs    atomic.Uint64
	stopped atomic.Bool
	wg      sync.WaitGroup
	once    sync.Once
}

// udpBatch is how often (per sender) a paced UDP sender tops up its quota.
const udpBatch = time.Millisecond

// StartUDPFlood starts sending datagrams from client to dst until Stop.
// Send errors (e.g. ENOBUFS, or ECONNREFUSED after an ICMP port
// unreachable) are counted and sending goes on.
func StartUDPFlood(client *lab.Node, dst netip.AddrPort, o UDPFloodOptions) (*UDPFlood, error) {
	if o.PayloadSize <= 0 {
		o.PayloadSize = 64
	}
	if o.Senders <= 0 {
		o.Senders = 1
	}
	f := &UDPFlood{o: o}
	err := client.Do(func() error {
		for i := 0; i < o.Senders; i++ {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			f.conns = append(f.conns, c)
		}
		return nil
	})
	if err != nil {
		for _, c := range f.conns {
			c.Close()
		}
		return nil, fmt.Errorf("udp flood: socket to %s in %s: %w", dst, client.Name, err)
	}
	for _, c := range f.conns {
		f.wg.Add(1)
		go f.send(c)
	}
	return f, nil
}

func (f *UDPFlood) send(c *net.UDPConn) {
	defer f.wg.Done()
	buf := make([]byte, f.o.PayloadSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	perSender := float64(f.o.PPS) / float64(f.o.Senders)
	start := time.Now()
	var sent uint64
	for !f.stopped.Load() {
		if f.o.PPS > 0 {
			due := uint64(perSender * time.Since(start).Seconds())
			if sent >= due {
				time.Sleep(udpBatch)
				continue
			}
		}
		if _, err := c.Write(buf); err != nil {
			if f.stopped.Load() {
				return
			}
			f.errs.Add(1)
		} else {
			f.sent.Add(1)
		}
		sent++
	}
}

// Sent is the number of datagrams sent; Errors the failed sends.
func (f *UDPFlood) Sent() uint64   { return f.sent.Load() }
func (f *UDPFlood) Errors() uint64 { return f.errs.Load() }

// Stop ends the flood and waits for the senders. Idempotent.
func (f *UDPFlood) Stop() error {
	f.once.Do(func() {
		f.stopped.Store(true)
		for _, c := range f.conns {
			c.Close()
		}
		f.wg.Wait()
	})
	return nil
}

// UDPSink receives and discards datagrams inside a lab node (so that the
// flood draws no ICMP port unreachable).
type UDPSink struct {
	c       *net.UDPConn
	packets atomic.Uint64
	bytes   atomic.Uint64
	wg      sync.WaitGroup
	once    sync.Once
	err     error
}

// NewUDPSink listens on addr:port inside node (port 0 picks a free port).
func NewUDPSink(node *lab.Node, addr netip.Addr, port uint16) (*UDPSink, error) {
	var c *net.UDPConn
	err := node.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("udp sink: listen on %s in %s: %w", netip.AddrPortFrom(addr, port), node.Name, err)
	}
	_ = c.SetReadBuffer(4 << 20)
	s := &UDPSink{c: c}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			s.packets.Add(1)
			s.bytes.Add(uint64(n))
		}
	}()
	return s, nil
}

// Addr is the listening address.
func (s *UDPSink) Addr() netip.AddrPort { return s.c.LocalAddr().(*net.UDPAddr).AddrPort() }

// Packets and Bytes received so far.
func (s *UDPSink) Packets() uint64 { return s.packets.Load() }
func (s *UDPSink) Bytes() uint64   { return s.bytes.Load() }

// Close stops the sink. Idempotent.
func (s *UDPSink) Close() error {
	s.once.Do(func() {
		s.err = s.c.Close()
		s.wg.Wait()
	})
	return s.err
}
