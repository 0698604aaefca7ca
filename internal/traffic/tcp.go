package traffic

import (
	"context"
	"errors"
	"fmt"

	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/stats"
)

// Sink is a TCP server inside a lab node that accepts connections and
// discards what they send.
type Sink struct {
	ln      *net.TCPListener
	bufSize int // read buffer per connection
	c       SinkCounters

	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

// NewSink listens on addr:port inside node (port 0 picks a free port).
func NewSink(node *lab.Node, addr netip.Addr, port uint16) (*Sink, error) {
	return listenSink(node, addr, port, bulkSinkBuf)
}

// listenSink opens the listener inside node and serves it.
func listenSink(node *lab.Node, addr netip.Addr, port uint16, bufSize int) (*Sink, error) {
	var ln *net.TCPListener
	err := node.Do(func() error {
		var err error
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sink: listen on %s in %s: %w", netip.AddrPortFrom(addr, port), node.Name, err)
	}
	return serveSink(ln, bufSize, SinkCounters{new(atomic.Int64), new(atomic.Int64), new(atomic.Uint64)}), nil
}

// Read buffer per connection: large for a few bulk flows, small for many.
const (
	bulkSinkBuf = 256 << 10
	manySinkBuf = 16 << 10
)

// SinkCounters are where a sink counts: connections accepted, still
// open, and bytes received. They may live in memory shared with another
// process (internal/shmcount), which then reads them without asking.
type SinkCounters struct {
	Conns, Active *atomic.Int64
	Bytes         *atomic.Uint64
}

// serveSink runs a sink on ln, reading with bufSize bytes per connection
// and counting into c; Close closes ln.
func serveSink(ln *net.TCPListener, bufSize int, c SinkCounters) *Sink {
	s := &Sink{ln: ln, bufSize: bufSize, c: c, open: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

// StartSink starts a discarding TCP server on addr:port inside node; stop
// closes the listener and every accepted connection.
func StartSink(node *lab.Node, addr netip.Addr, port uint16) (stop func() error, err error) {
	s, err := NewSink(node, addr, port)
	if err != nil {
		return nil, err
	}
	return s.Close, nil
}

// Addr is the listening address.
func (s *Sink) Addr() netip.AddrPort { return s.ln.Addr().(*net.TCPAddr).AddrPort() }

// Bytes is the number of bytes received so far over all connections.
func (s *Sink) Bytes() uint64 { return s.c.Bytes.Load() }

// Conns is the number of connections accepted so far; Active the number
// still open.
func (s *Sink) Conns() int64  { return s.c.Conns.Load() }
func (s *Sink) Active() int64 { return s.c.Active.Load() }

func (s *Sink) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of descriptors with thousands of flows: wait for
			// some to close instead of giving up.
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return // listener closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.open[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.c.Conns.Add(1)
		s.c.Active.Add(1)
		go s.drain(c)
	}
}

func (s *Sink) drain(c net.Conn) {
	defer s.wg.Done()
	buf := make([]byte, s.bufSize)
	for {
		n, err := c.Read(buf)
		s.c.Bytes.Add(uint64(n))
		if err != nil {
			break
		}
	}
	c.Close()
	s.c.Active.Add(-1)
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
}

// Close stops the sink and waits for its goroutines. Idempotent.
func (s *Sink) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.err = s.ln.Close()
		for c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s.err
}

// BulkResult describes one bulk transfer.
type BulkResult struct {
	Bytes      uint64        // bytes acknowledged by the receiver (tcpi_bytes_acked)
	Written    uint64        // bytes handed to the socket
	Duration   time.Duration // time spent sending
	Timestamps bool          // TCP timestamps were negotiated
	SRTT       time.Duration // kernel's smoothed RTT at the end
	// MedianSRTT is the median of the kernel's smoothed RTT read after
	// every write: what the connection saw over the transfer, end-host
	// delays (delayed ACKs, a receiver short of CPU) included.
	MedianSRTT  time.Duration
	Retransmits uint32 // segments retransmitted
}

// Bulk connects from client to dst and sends as fast as TCP allows (or at
// most pacingBitsPerSec when non-zero, through SO_MAX_PACING_RATE, which
// TCP honours with its internal pacing even without the fq qdisc) for
// duration d. It returns the number of bytes the receiver acknowledged.
// The connection is reset at the end so that no backlog keeps flowing.
func Bulk(ctx context.Context, client *lab.Node, dst netip.AddrPort, d time.Duration, pacingBitsPerSec uint64) (bytes uint64, err error) {
	r, err := BulkStats(ctx, client, dst, d, pacingBitsPerSec)
	return r.Bytes, err
}

// tcpiOptTimestamps is TCPI_OPT_TIMESTAMPS of struct tcp_info.
const tcpiOptTimestamps = 1

// BulkStats is Bulk returning the connection's details.
func BulkStats(ctx context.Context, client *lab.Node, dst netip.AddrPort, d time.Duration, pacingBitsPerSec uint64) (BulkResult, error) {
	var res BulkResult
	if d <= 0 {
		return res, errors.New("bulk: duration must be positive")
	}
	dialer := net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, _ string, rc syscall.RawConn) error {
			if pacingBitsPerSec == 0 {
				return nil
			}
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, pacingBitsPerSec/8)
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
	var conn *net.TCPConn
	err := client.Do(func() error {
		c, err := dialer.DialContext(ctx, "tcp", dst.String())
		if err != nil {
			return err
		}
		conn = c.(*net.TCPConn)
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("bulk: connect to %s from %s: %w", dst, client.Name, err)
	}
	defer func() {
		_ = conn.SetLinger(0) // reset: drop what is still queued
		conn.Close()
	}()

	start := time.Now()
	if err := conn.SetWriteDeadline(start.Add(d)); err != nil {
		return res, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetWriteDeadline(time.Now()) })
	defer stop()

	buf := make([]byte, 128<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var (
		werr  error
		srtts []time.Duration
	)
	for {
		n, err := conn.Write(buf)
		res.Written += uint64(n)
		if err != nil {
			werr = err
			break
		}
		if ti, err := tcpInfo(conn); err == nil {
			srtts = append(srtts, time.Duration(ti.Rtt)*time.Microsecond)
		}
	}
	res.Duration = time.Since(start)
	ti, err := tcpInfo(conn)
	if err != nil {
		return res, fmt.Errorf("bulk: TCP_INFO: %w", err)
	}
	// tcpi_bytes_acked counts sequence space, including the SYN.
	if ti.Bytes_acked > 0 {
		res.Bytes = ti.Bytes_acked - 1
	}
	res.Timestamps = ti.Options&tcpiOptTimestamps != 0
	res.SRTT = time.Duration(ti.Rtt) * time.Microsecond
	res.MedianSRTT = res.SRTT
	if len(srtts) > 0 {
		res.MedianSRTT = stats.Median(srtts)
	}
	res.Retransmits = ti.Total_retrans
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if !errors.Is(werr, os.ErrDeadlineExceeded) {
		return res, fmt.Errorf("bulk: send to %s: %w", dst, werr)
	}
	return res, nil
}

// tcpInfo reads the connection's struct tcp_info (TCP_INFO).
func tcpInfo(conn *net.TCPConn) (ti *unix.TCPInfo, err error) {
	cerr := rawControl(conn, func(fd int) error {
		ti, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return nil
	})
	return ti, errors.Join(cerr, err)
}
