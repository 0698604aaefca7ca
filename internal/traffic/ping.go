// Package traffic generates test traffic inside lab namespaces: an ICMP /
// ICMPv6 echo pinger with nanosecond RTTs and a TCP bulk sender and sink.
// Sockets are opened inside a lab.Node's namespace (via Node.Do) and then
// used from ordinary goroutines.
package traffic

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/lab"
)

// EchoID is the ICMP echo identifier Ping uses (ASCII "rt"). The pinger
// uses raw sockets, so the kernel leaves the identifier alone; every
// PingReply still carries the identifier read back from the reply.
const EchoID uint16 = 0x7274

// PingReply is one echo reply.
type PingReply struct {
	Seq    uint16
	ID     uint16
	RTT    time.Duration // RecvAt - SentAt
	SentAt time.Time     // just before the request was handed to the kernel
	RecvAt time.Time     // kernel receive time of the reply (SO_TIMESTAMPNS)
}

// PingOptions tunes PingWith.
type PingOptions struct {
	Count    int           // echo requests to send (> 0)
	Interval time.Duration // between requests; 0 means 10 ms
	ID       uint16        // echo identifier; 0 means EchoID
	Size     int           // ICMP payload bytes; 0 means 56, at least 16
	// Wait is how long to wait for outstanding replies after the last
	// request; 0 means 1 s.
	Wait time.Duration
}

const (
	icmpEchoRequest   = 8
	icmpEchoReply     = 0
	icmp6EchoRequest  = 128
	icmp6EchoReply    = 129
	payloadMagic      = 0x72747363 // "rtsc"
	defaultPingSize   = 56
	minPingSize       = 16
	defaultPingWait   = time.Second
	defaultPingPeriod = 10 * time.Millisecond
)

// Ping sends count ICMP (IPv4) or ICMPv6 (IPv6) echo requests from node to
// dst, interval apart, with identifier EchoID, and returns the replies
// that came back, ordered by sequence number (1..count). Lost replies are
// simply absent. Requires CAP_NET_RAW (raw sockets).
func Ping(ctx context.Context, node *lab.Node, dst netip.Addr, count int, interval time.Duration) ([]PingReply, error) {
	return PingWith(ctx, node, dst, PingOptions{Count: count, Interval: interval})
}

// PingWith is Ping with all options.
func PingWith(ctx context.Context, node *lab.Node, dst netip.Addr, o PingOptions) ([]PingReply, error) {
	if o.Count <= 0 || o.Count > 65535 {
		return nil, fmt.Errorf("ping: count %d out of range 1..65535", o.Count)
	}
	if !dst.IsValid() {
		return nil, errors.New("ping: invalid destination")
	}
	dst = dst.Unmap()
	if o.Interval <= 0 {
		o.Interval = defaultPingPeriod
	}
	if o.ID == 0 {
		o.ID = EchoID
	}
	if o.Size == 0 {
		o.Size = defaultPingSize
	}
	if o.Size < minPingSize || o.Size > 65000 {
		return nil, fmt.Errorf("ping: payload size %d out of range %d..65000", o.Size, minPingSize)
	}
	if o.Wait <= 0 {
		o.Wait = defaultPingWait
	}

	conn, err := openICMP(node, dst.Is6())
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	p := &pinger{
		conn:    conn,
		dst:     dst,
		opts:    o,
		sent:    make([]time.Time, o.Count+1),
		got:     make([]bool, o.Count+1),
		allDone: make(chan struct{}),
	}
	readErr := make(chan error, 1)
	go func() { readErr <- p.readLoop() }()

	err = p.sendLoop(ctx)
	if err == nil {
		// Wait for the stragglers.
		t := time.NewTimer(o.Wait)
		select {
		case <-p.allDone:
		case <-t.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
		t.Stop()
	}
	conn.Close()
	if rerr := <-readErr; rerr != nil && err == nil {
		err = rerr
	}
	p.mu.Lock()
	replies := p.replies
	p.mu.Unlock()
	slices.SortFunc(replies, func(a, b PingReply) int { return int(a.Seq) - int(b.Seq) })
	return replies, err
}

// openICMP opens a raw ICMP or ICMPv6 socket inside node's namespace with
// kernel receive timestamps enabled.
func openICMP(node *lab.Node, v6 bool) (*net.IPConn, error) {
	var pc net.PacketConn
	err := node.Do(func() error {
		var err error
		if v6 {
			pc, err = net.ListenPacket("ip6:ipv6-icmp", "::")
		} else {
			pc, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ping: open raw socket in %s: %w", node.Name, err)
	}
	conn := pc.(*net.IPConn)
	rc, err := conn.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
			if err == nil && v6 {
				// Only echo replies reach the socket.
				var f unix.ICMPv6Filter
				for i := range f.Data {
					f.Data[i] = 0xffffffff
				}
				f.Data[icmp6EchoReply>>5] &^= 1 << (icmp6EchoReply & 31)
				err = unix.SetsockoptICMPv6Filter(int(fd), unix.SOL_ICMPV6, unix.ICMPV6_FILTER, &f)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ping: socket options: %w", err)
	}
	return conn, nil
}

type pinger struct {
	conn *net.IPConn
	dst  netip.Addr
	opts PingOptions

	mu       sync.Mutex
	sent     []time.Time // by sequence number; zero until sent
	got      []bool
	nsent    int
	replies  []PingReply
	allDone  chan struct{}
	doneOnce sync.Once
}

func (p *pinger) sendLoop(ctx context.Context) error {
	pkt := make([]byte, 8+p.opts.Size)
	to := &net.IPAddr{IP: p.dst.AsSlice()}
	start := time.Now()
	for i := 1; i <= p.opts.Count; i++ {
		if i > 1 {
			next := start.Add(time.Duration(i-1) * p.opts.Interval)
			t := time.NewTimer(time.Until(next))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		seq := uint16(i)
		p.build(pkt, seq)
		p.mu.Lock()
		now := time.Now()
		p.sent[i] = now
		p.nsent = i
		p.mu.Unlock()
		if _, err := p.conn.WriteToIP(pkt, to); err != nil {
			return fmt.Errorf("ping: send seq %d: %w", seq, err)
		}
	}
	return nil
}

func (p *pinger) build(pkt []byte, seq uint16) {
	if p.dst.Is6() {
		pkt[0] = icmp6EchoRequest
	} else {
		pkt[0] = icmpEchoRequest
	}
	pkt[1] = 0
	pkt[2], pkt[3] = 0, 0
	binary.BigEndian.PutUint16(pkt[4:], p.opts.ID)
	binary.BigEndian.PutUint16(pkt[6:], seq)
	payload := pkt[8:]
	binary.BigEndian.PutUint32(payload[0:], payloadMagic)
	binary.BigEndian.PutUint64(payload[4:], uint64(time.Now().UnixNano()))
	for i := 12; i < len(payload); i++ {
		payload[i] = byte(i)
	}
	if !p.dst.Is6() {
		// The kernel fills in ICMPv6 checksums itself, not ICMP ones.
		binary.BigEndian.PutUint16(pkt[2:], checksum(pkt))
	}
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func (p *pinger) readLoop() error {
	buf := make([]byte, 65536)
	oob := make([]byte, 128)
	for {
		n, oobn, _, from, err := p.conn.ReadMsgIP(buf, oob)
		now := time.Now()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("ping: receive: %w", err)
		}
		recvAt := now
		if ts, ok := kernelTimestamp(oob[:oobn]); ok {
			recvAt = ts
		}
		src, _ := netip.AddrFromSlice(from.IP)
		if src.Unmap() != p.dst {
			continue
		}
		msg := buf[:n]
		if !p.dst.Is6() {
			// Raw IPv4 sockets deliver the IP header too.
			if len(msg) < 20 || msg[0]>>4 != 4 {
				continue
			}
			ihl := int(msg[0]&0x0f) * 4
			if ihl < 20 || ihl > len(msg) {
				continue
			}
			msg = msg[ihl:]
		}
		if len(msg) < 8+minPingSize {
			continue
		}
		want := byte(icmpEchoReply)
		if p.dst.Is6() {
			want = icmp6EchoReply
		}
		if msg[0] != want || msg[1] != 0 {
			continue
		}
		id := binary.BigEndian.Uint16(msg[4:])
		seq := binary.BigEndian.Uint16(msg[6:])
		if id != p.opts.ID || binary.BigEndian.Uint32(msg[8:]) != payloadMagic {
			continue
		}
		p.mu.Lock()
		if int(seq) >= 1 && int(seq) <= p.nsent && !p.got[seq] {
			p.got[seq] = true
			sentAt := p.sent[seq]
			p.replies = append(p.replies, PingReply{
				Seq: seq, ID: id, RTT: recvAt.Sub(sentAt), SentAt: sentAt, RecvAt: recvAt,
			})
			if len(p.replies) == p.opts.Count {
				p.doneOnce.Do(func() { close(p.allDone) })
			}
		}
		p.mu.Unlock()
	}
}

// kernelTimestamp returns the SCM_TIMESTAMPNS receive time in oob.
func kernelTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
			return time.Unix(sec, nsec), true
		}
	}
	return time.Time{}, false
}

// rawControl runs fn on the socket's file descriptor.
func rawControl(c syscall.Conn, fn func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
