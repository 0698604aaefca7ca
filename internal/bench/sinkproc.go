package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rttscope/rttscope/internal/nsrun"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// The TCP sink of the load phase runs in a child process (the hidden
// `rttscope bench-sink` command): one process may hold only RLIMIT_NOFILE
// descriptors, and where the hard limit cannot be raised (no
// CAP_SYS_RESOURCE) 10,000 client sockets plus 10,000 accepted ones do
// not fit in one.

// SinkCommand is the name of the hidden subcommand that runs ServeSink.
const SinkCommand = "bench-sink"

// ServeSink is the child's side: it listens on addr inside the named
// network namespace, writes "port N" on out, then answers every line
// read from in with "ACCEPTED ACTIVE BYTES", until in is closed.
func ServeSink(netns string, addr netip.AddrPort, in io.Reader, out io.Writer) error {
	if err := traffic.RaiseNoFile(maxNoFile()); err != nil {
		return err
	}
	var ln *net.TCPListener
	if err := nsrun.Named(netns, func() error {
		var err error
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		return fmt.Errorf("listen on %s in %s: %w", addr, netns, err)
	}
	s := traffic.ServeManySink(ln)
	defer s.Close()
	if _, err := fmt.Fprintf(out, "port %d\n", s.Addr().Port()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if _, err := fmt.Fprintf(out, "%d %d %d\n", s.Conns(), s.Active(), s.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// maxNoFile is the hard RLIMIT_NOFILE (what an unprivileged raise may
// reach).
func maxNoFile() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return r.Max
}

// sinkProc is the parent's handle on a sink child.
type sinkProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	port uint16
	mu   sync.Mutex
	done chan error
	errb *testutil.Buffer
}

func startSinkProc(bin, netns string, addr netip.Addr) (*sinkProc, error) {
	p := &sinkProc{done: make(chan error, 1), errb: &testutil.Buffer{}}
	p.cmd = exec.Command(bin, SinkCommand, "--netns", netns, "--listen", netip.AddrPortFrom(addr, 0).String())
	p.cmd.Stderr = p.errb
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewReader(out)
	started := make(chan error, 1)
	go func() {
		// Pdeathsig follows the starting thread: keep it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.done <- p.cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s %s: %w", bin, SinkCommand, err)
	}
	line, err := p.out.ReadString('\n')
	if err == nil {
		var n uint64
		if n, err = strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "port "), 10, 16); err == nil {
			p.port = uint16(n)
			return p, nil
		}
	}
	p.close()
	return nil, fmt.Errorf("sink process: %v (stderr: %s)", err, strings.TrimSpace(p.errb.String()))
}

// counters asks the child for its counters.
func (p *sinkProc) counters() (accepted, active int64, bytes uint64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err = io.WriteString(p.in, "\n"); err != nil {
		return
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return
	}
	_, err = fmt.Sscanf(line, "%d %d %d", &accepted, &active, &bytes)
	return
}

func (p *sinkProc) Bytes() uint64 {
	_, _, b, _ := p.counters()
	return b
}

func (p *sinkProc) Accepted() int64 {
	a, _, _, _ := p.counters()
	return a
}

// close ends the child (closing its stdin; SIGKILL after 10 s).
func (p *sinkProc) close() error {
	p.in.Close()
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("sink process: %w (stderr: %s)", err, strings.TrimSpace(p.errb.String()))
		}
		return nil
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return errors.New("sink process did not stop within 10s")
	}
}
