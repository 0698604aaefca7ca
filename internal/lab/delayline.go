package lab

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The user-space delay line bridges two veth ends inside its own namespace
// with AF_PACKET sockets, one forwarding pipe per direction:
//
//	receiver goroutine: recvmsg -> arrival stamp -> shaper -> ready queue
//	sender goroutine (locked thread, 1 ns timer slack):
//	    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, due) -> send
//
// Frames live in a ring of preallocated buffers; the ready queue is FIFO,
// and due times never decrease, so order is kept per direction. Nothing is
// allocated per packet.

const (
	// slotSize holds one frame of a 1500-byte MTU veth (1514 bytes plus a
	// VLAN tag) with room to spare. A larger frame means an offload leaked a
	// GSO/GRO super-packet: it is counted as Oversize and dropped.
	slotSize = 2048
	// rcvBuf is SO_RCVBUF of each packet socket (the kernel doubles it). It
	// only has to absorb scheduling hiccups of the receiver goroutine; the
	// queue that matters is the shaper's, so keep it modest and count drops.
	rcvBuf = 256 << 10
	// unlimitedRing is the ring size of a path without a rate limit:
	// enough for ~1 Gbit/s of MTU frames over a 50 ms one-way delay.
	unlimitedRing = 4096
	maxRing       = 16384
	// maxSleep bounds one nanosleep so that Close is noticed promptly.
	maxSleep = 100 * time.Millisecond
	// maxEarly caps the wake-up latency compensation.
	maxEarly = int64(100 * time.Microsecond)
)

// DirStats counts what one direction of a user-space delay line did.
type DirStats struct {
	Forwarded   uint64        // frames released after their delay
	QueueDrops  uint64        // drop-tail at the rate limiter's queue (QueuePackets)
	RingDrops   uint64        // no free frame buffer left in the delay ring
	KernelDrops uint64        // receive socket buffer overflows (PACKET_STATISTICS)
	Oversize    uint64        // frames larger than an MTU frame (offload leak)
	SendErrors  uint64        // frames the kernel refused to transmit
	MaxLate     time.Duration // worst release time past its due time
	MeanLate    time.Duration // average release time minus due time (may be < 0)
}

// Dropped is the total of all drop counters.
func (s DirStats) Dropped() uint64 {
	return s.QueueDrops + s.RingDrops + s.KernelDrops + s.Oversize + s.SendErrors
}

// PathStats holds both directions of one path's delay line.
type PathStats struct {
	ToServer, ToClient DirStats
}

// ShortestRoundTrip is the shortest round trip a path configured with
// rtt can show through the user-space delay lines: each direction may be
// released up to maxEarly ahead of its due time (the wake-up latency
// compensation of sleepUntil aims early), so a round trip may be 2*maxEarly
// short. Tests that hold a sample to "not below the configured RTT" use it.
func ShortestRoundTrip(rtt time.Duration) time.Duration {
	return rtt - 2*time.Duration(maxEarly)
}

// monotonic clock: CLOCK_MONOTONIC nanoseconds, derived from Go's own
// monotonic reading (vDSO, no syscall) anchored once to the kernel clock.
var (
	clockOnce sync.Once
	monoBase  int64
	goBase    time.Time
)

func initClock() {
	clockOnce.Do(func() {
		var ts unix.Timespec
		goBase = time.Now()
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		monoBase = ts.Nano()
	})
}

func monoNow() int64 { return monoBase + int64(time.Since(goBase)) }

// shaper computes release times: arrival + one-way delay, and with a rate
// limit a virtual-clock bottleneck that serialises frames at rate bit/s
// behind a drop-tail queue of limit frames.
type shaper struct {
	delay      int64  // ns
	rate       uint64 // bit/s; 0 = unlimited
	limit      int
	fin        []int64 // ring of finish times of frames still in the queue
	fhead      int
	fcount     int
	lastFinish int64
	lastDue    int64
}

func newShaper(delay time.Duration, rate uint64, limit int) *shaper {
	s := &shaper{delay: int64(delay), rate: rate, limit: limit}
	if rate > 0 {
		s.fin = make([]int64, limit)
	}
	return s
}

// admit returns the release time of a frame of n bytes arriving at
// arrival (ns), or false if the bottleneck queue is full.
func (s *shaper) admit(arrival int64, n int) (int64, bool) {
	due := arrival
	if s.rate > 0 {
		for s.fcount > 0 && s.fin[s.fhead] <= arrival {
			s.fhead++
			if s.fhead == len(s.fin) {
				s.fhead = 0
			}
			s.fcount--
		}
		if s.fcount >= s.limit {
			return 0, false
		}
		start := max(arrival, s.lastFinish)
		fin := start + int64(uint64(n)*8*uint64(time.Second)/s.rate)
		s.lastFinish = fin
		i := s.fhead + s.fcount
		if i >= len(s.fin) {
			i -= len(s.fin)
		}
		s.fin[i] = fin
		s.fcount++
		due = fin
	}
	due += s.delay
	if due < s.lastDue {
		due = s.lastDue // FIFO: never release before an earlier frame
	}
	s.lastDue = due
	return due, true
}

type dirCounters struct {
	forwarded, queueDrops, ringDrops, oversize, sendErrors atomic.Uint64
	maxLate, sumLate                                       atomic.Int64
}

// pipe forwards one direction: frames read from in are written to out.
type pipe struct {
	line    *delayLine
	in, out int
	sh      *shaper
	buf     []byte
	lens    []int32
	dues    []int64
	free    chan int32
	ready   chan int32
	scratch []byte
	c       dirCounters
	kdrops  uint64 // accumulated PACKET_STATISTICS drops of in (under line.mu)
	// oversleep is the sender's running estimate of how late a timed sleep
	// wakes up (ns); only the sender goroutine touches it.
	oversleep int64
}

type delayLine struct {
	node     *Node
	ifMbox   string
	ifServer string
	fds      [2]int // packet sockets on ifMbox, ifServer
	stopfd   int    // eventfd: readable once stopping
	stop     chan struct{}
	stopping atomic.Bool
	toServer *pipe
	toClient *pipe
	wg       sync.WaitGroup
	mu       sync.Mutex
	closed   bool
}

func ringSize(spec PathSpec, delay time.Duration) int {
	if spec.RateBitsPerSec == 0 {
		return unlimitedRing
	}
	// Queue plus what is in flight during the delay, counting on frames
	// averaging no less than 128 bytes.
	inflight := int(spec.RateBitsPerSec / 8 / 128 * uint64(delay) / uint64(time.Second))
	n := spec.QueuePackets + inflight + 256
	return min(max(n, 1024), maxRing)
}

func newPipe(line *delayLine, in, out int, delay time.Duration, spec PathSpec) *pipe {
	n := ringSize(spec, delay)
	p := &pipe{
		line:    line,
		in:      in,
		out:     out,
		sh:      newShaper(delay, spec.RateBitsPerSec, spec.QueuePackets),
		buf:     make([]byte, n*slotSize),
		lens:    make([]int32, n),
		dues:    make([]int64, n),
		free:    make(chan int32, n),
		ready:   make(chan int32, n),
		scratch: make([]byte, 65536),
	}
	for i := range n {
		p.free <- int32(i)
	}
	return p
}

// openPacketSocket opens an AF_PACKET socket bound to ifname in the current
// (already switched) namespace.
func openPacketSocket(ifname string) (int, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return -1, err
	}
	// Protocol 0 until bound: the socket sees no traffic of other
	// interfaces in between.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("packet socket on %s: %s: %w", ifname, what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fail("PACKET_IGNORE_OUTGOING", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf); err != nil {
		return fail("SO_RCVBUF", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	return fd, nil
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// Go scheduler headroom. Each delay line keeps four threads in blocking
// system calls (two receivers in poll, two senders in clock_nanosleep). A
// thread in a system call keeps its P until the runtime's monitor takes it
// back, which can take up to 10 ms on an otherwise idle process; with
// GOMAXPROCS at the CPU count (2 here) a waking receiver or sender could
// then wait that long for a P. While delay lines run, GOMAXPROCS is raised
// by four per line so that there is always an idle P; it is put back when
// the last line stops, unless somebody else changed it meanwhile.
var procs struct {
	sync.Mutex
	lines  int
	saved  int // GOMAXPROCS before the first line started
	raised int // value we set, 0 if we did not touch it
}

const procsPerLine = 4

func reserveProcs() {
	procs.Lock()
	defer procs.Unlock()
	cur := runtime.GOMAXPROCS(0)
	if procs.lines == 0 {
		procs.saved, procs.raised = cur, 0
	}
	procs.lines++
	if want := procs.saved + procsPerLine*procs.lines; cur < want {
		runtime.GOMAXPROCS(want)
		procs.raised = want
	}
}

func releaseProcs() {
	procs.Lock()
	defer procs.Unlock()
	procs.lines--
	if procs.lines == 0 && procs.raised != 0 && runtime.GOMAXPROCS(0) == procs.raised {
		runtime.GOMAXPROCS(procs.saved)
	}
}

// startDelayLine opens the sockets inside node and starts the forwarding
// goroutines between ifMbox (toward the middlebox) and ifServer.
func startDelayLine(node *Node, ifMbox, ifServer string, spec PathSpec) (*delayLine, error) {
	initClock()
	d := &delayLine{node: node, ifMbox: ifMbox, ifServer: ifServer, fds: [2]int{-1, -1}, stopfd: -1, stop: make(chan struct{})}
	err := node.Do(func() error {
		var err error
		if d.fds[0], err = openPacketSocket(ifMbox); err != nil {
			return err
		}
		d.fds[1], err = openPacketSocket(ifServer)
		return err
	})
	if err == nil {
		d.stopfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	}
	if err != nil {
		d.closeFDs()
		return nil, err
	}
	reserveProcs()
	d.toServer = newPipe(d, d.fds[0], d.fds[1], spec.DelayToServer, spec)
	d.toClient = newPipe(d, d.fds[1], d.fds[0], spec.DelayToClient, spec)
	for _, p := range []*pipe{d.toServer, d.toClient} {
		d.wg.Add(2)
		go p.receive()
		go p.send()
	}
	return d, nil
}

func (d *delayLine) closeFDs() {
	for i, fd := range d.fds {
		if fd >= 0 {
			unix.Close(fd)
			d.fds[i] = -1
		}
	}
	if d.stopfd >= 0 {
		unix.Close(d.stopfd)
		d.stopfd = -1
	}
}

// close stops the goroutines and closes the sockets. Idempotent.
func (d *delayLine) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.stopping.Store(true)
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(d.stopfd, one[:]) // only a wake-up: d.stop and d.stopping say stop
	close(d.stop)
	d.wg.Wait()
	releaseProcs()
	d.collectKernelDrops()
	d.closeFDs()
}

// collectKernelDrops folds the (reset-on-read) socket statistics into the
// pipes. Caller holds d.mu.
func (d *delayLine) collectKernelDrops() {
	for _, p := range []*pipe{d.toServer, d.toClient} {
		if st, err := unix.GetsockoptTpacketStats(p.in, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
			p.kdrops += uint64(st.Drops)
		}
	}
}

func (d *delayLine) stats() PathStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.collectKernelDrops()
	}
	return PathStats{ToServer: d.toServer.stats(), ToClient: d.toClient.stats()}
}

func (p *pipe) stats() DirStats {
	s := DirStats{
		Forwarded:   p.c.forwarded.Load(),
		QueueDrops:  p.c.queueDrops.Load(),
		RingDrops:   p.c.ringDrops.Load(),
		KernelDrops: p.kdrops,
		Oversize:    p.c.oversize.Load(),
		SendErrors:  p.c.sendErrors.Load(),
		MaxLate:     time.Duration(p.c.maxLate.Load()),
	}
	if n := p.c.forwarded.Load() + p.c.sendErrors.Load(); n > 0 {
		s.MeanLate = time.Duration(p.c.sumLate.Load() / int64(n))
	}
	return s
}

// receive drains the input socket, stamps and schedules each frame.
func (p *pipe) receive() {
	defer p.line.wg.Done()
	lockRealtimeThread()
	var (
		iov  unix.Iovec
		oob  [64]byte
		msg  unix.Msghdr
		cur  int32 = -1
		pfds       = []unix.PollFd{
			{Fd: int32(p.in), Events: unix.POLLIN},
			{Fd: int32(p.line.stopfd), Events: unix.POLLIN},
		}
	)
	msg.Iov = &iov
	msg.SetIovlen(1)
	msg.Control = &oob[0]
	for !p.line.stopping.Load() {
		for {
			if cur < 0 {
				select {
				case cur = <-p.free:
				default:
				}
			}
			var b []byte
			if cur >= 0 {
				b = p.buf[int(cur)*slotSize : (int(cur)+1)*slotSize]
			} else {
				b = p.scratch
			}
			iov.Base = &b[0]
			iov.SetLen(len(b))
			msg.SetControllen(len(oob))
			msg.Flags = 0
			r, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(p.in), uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT|unix.MSG_TRUNC)
			if errno == unix.EINTR {
				continue
			}
			if errno != 0 {
				break // EAGAIN (drained) or a socket error: go back to poll
			}
			n := int(r)
			now := time.Now()
			if cur < 0 {
				p.c.ringDrops.Add(1)
				continue
			}
			if n > slotSize {
				p.c.oversize.Add(1)
				continue
			}
			arrival := monoBase + int64(now.Sub(goBase))
			if ts, ok := cmsgTimestamp(oob[:msg.Controllen]); ok {
				// Kernel receive time (CLOCK_REALTIME) mapped onto the
				// monotonic clock; trust it only if it is plausible.
				k := arrival - (now.UnixNano() - ts)
				if k <= arrival && arrival-k < int64(time.Second) {
					arrival = k
				}
			}
			due, ok := p.sh.admit(arrival, n)
			if !ok {
				p.c.queueDrops.Add(1)
				continue
			}
			p.lens[cur] = int32(n)
			p.dues[cur] = due
			p.ready <- cur
			cur = -1
		}
		if _, err := unix.Poll(pfds, -1); err != nil && err != unix.EINTR {
			return
		}
		if pfds[1].Revents != 0 {
			return
		}
	}
}

// threadNice is the nice value of the delay line's threads: ahead of
// ordinary CPU-bound work (a compiler, a test binary) so that releases stay
// punctual on a busy machine, yet no real-time class that could starve
// the system if forwarding ever saturated a CPU.
const threadNice = -10

// lockRealtimeThread wires the calling goroutine to its OS thread for good
// (the runtime discards the thread when the goroutine ends, so the changed
// scheduling attributes never leak to other goroutines) and raises the
// thread's scheduling priority, best effort.
func lockRealtimeThread() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), threadNice)
}

// cmsgTimestamp extracts an SCM_TIMESTAMPNS timestamp (ns since the epoch)
// from control data without allocating.
func cmsgTimestamp(oob []byte) (int64, bool) {
	const hdr = unix.SizeofCmsghdr
	for len(oob) >= hdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return 0, false
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && l >= hdr+int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&oob[hdr]))
			return ts.Nano(), true
		}
		al := (l + 7) &^ 7
		if al > len(oob) {
			return 0, false
		}
		oob = oob[al:]
	}
	return 0, false
}

// send releases frames at their due time. It runs on a locked OS thread
// with a 1 ns timer slack and sleeps with absolute CLOCK_MONOTONIC
// deadlines; Go timers alone can be a millisecond late.
func (p *pipe) send() {
	defer p.line.wg.Done()
	lockRealtimeThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	for {
		var i int32
		select {
		case i = <-p.ready:
		case <-p.line.stop:
			return
		}
		due := p.dues[i]
		if !p.sleepUntil(due) {
			return
		}
		late := monoNow() - due
		if late > p.c.maxLate.Load() {
			p.c.maxLate.Store(late)
		}
		p.c.sumLate.Add(late)
		off := int(i) * slotSize
		_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(p.out), uintptr(unsafe.Pointer(&p.buf[off])), uintptr(p.lens[i]), unix.MSG_DONTWAIT, 0, 0)
		if errno != 0 {
			p.c.sendErrors.Add(1)
		} else {
			p.c.forwarded.Add(1)
		}
		p.free <- i
	}
}

// sleepUntil sleeps until the monotonic time due; false if stopping.
//
// A timed sleep wakes up some tens of microseconds late (timer interrupt
// and scheduler latency, more on a VM). The pipe tracks the usual minimum
// of that oversleep and aims that much earlier (never more than maxEarly),
// so that releases are not systematically late yet hardly ever early.
func (p *pipe) sleepUntil(due int64) bool {
	for {
		if p.line.stopping.Load() {
			return false
		}
		now := monoNow()
		target := due - min(p.oversleep, maxEarly)
		if now >= target {
			return true
		}
		t := min(target, now+int64(maxSleep))
		ts := unix.NsecToTimespec(t)
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		if err != nil && err != unix.EINTR {
			return !p.line.stopping.Load()
		}
		if err == nil && t == target {
			over := monoNow() - t
			// Track the lower envelope of the wake-up latency: follow
			// decreases quickly, increases slowly, so that noise (a busy
			// CPU) does not turn into releases ahead of time.
			if over >= 0 && over < int64(time.Millisecond) {
				if over < p.oversleep {
					p.oversleep += (over - p.oversleep) / 2
				} else {
					p.oversleep += (over - p.oversleep) / 32
				}
			}
		}
	}
}
