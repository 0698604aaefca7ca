package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rttscope/rttscope/internal/testutil"
)

// The TCP sink of the load phase runs in a child process, the program
// internal/cmd/bench-sink (its doc comment says why and gives the line
// protocol spoken over its stdin and stdout). It is not part of the
// rttscope binary: the bench builds it from the source tree.

// sinkCmd is the import path of the sink program.
const sinkCmd = "github.com/rttscope/rttscope/internal/cmd/bench-sink"

// buildSink compiles the sink program into a temp dir that cleanup
// removes.
func buildSink() (bin string, cleanup func(), err error) {
	bin, cleanup, err = testutil.Build(sinkCmd)
	if err != nil {
		return "", nil, fmt.Errorf("the TCP load scenarios run their sink as a separate program built with go: "+
			"run the bench from the rttscope source tree with go on PATH (make bench), or leave the load phase out (--only test_run,live,events): %w", err)
	}
	return bin, cleanup, nil
}

// startChild starts cmd so that it dies with this process: Pdeathsig
// follows the thread that forked the child, so that thread stays locked
// to a goroutine that waits for the child, then calls exited with Wait's
// error.
func startChild(cmd *exec.Cmd, exited func(error)) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}

// sinkReplyTimeout bounds the wait for the sink's counters (with 10,000
// connections on an overloaded machine the sink once stopped answering
// and the bench hung).
const sinkReplyTimeout = 30 * time.Second

// sinkProc is the parent's handle on a sink child.
type sinkProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	// outFile is the pipe under out: reads get a deadline
	// (sinkReplyTimeout), so a sink that stops answering fails the
	// window instead of hanging the bench.
	outFile *os.File
	broken  error // set when an exchange failed (under mu)
	port    uint16
	mu      sync.Mutex
	done    chan error
	errb    *testutil.Buffer
}

// startSinkProc runs the sink program bin listening on addr (any port)
// inside the named namespace.
func startSinkProc(bin, netns string, addr netip.Addr) (*sinkProc, error) {
	p := &sinkProc{done: make(chan error, 1), errb: &testutil.Buffer{}}
	p.cmd = exec.Command(bin, "--netns", netns, "--listen", netip.AddrPortFrom(addr, 0).String())
	p.cmd.Stderr = p.errb
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewReader(out)
	p.outFile, _ = out.(*os.File) // exec's pipes are *os.File
	if err := startChild(p.cmd, func(err error) { p.done <- err }); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	line, err := p.out.ReadString('\n')
	if err == nil {
		var n uint64
		if n, err = strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "port "), 10, 16); err == nil {
			p.port = uint16(n)
			return p, nil
		}
	}
	_ = p.close() // the start-up error is the one to report
	return nil, fmt.Errorf("sink process: %w (stderr: %s)", err, strings.TrimSpace(p.errb.String()))
}

// counters asks the child for its counters.
func (p *sinkProc) counters() (accepted, active int64, bytes uint64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != nil {
		return 0, 0, 0, p.broken
	}
	// After a failed exchange a late reply would answer the next
	// request: the sink is not asked again.
	defer func() {
		if err != nil {
			p.broken = fmt.Errorf("sink process stopped answering: %w", err)
		}
	}()
	if _, err = io.WriteString(p.in, "\n"); err != nil {
		return
	}
	if p.outFile != nil {
		_ = p.outFile.SetReadDeadline(time.Now().Add(sinkReplyTimeout)) // not pollable: no deadline, as before
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return
	}
	_, err = fmt.Sscanf(line, "%d %d %d", &accepted, &active, &bytes)
	return
}

// Bytes is what the sink received so far.
func (p *sinkProc) Bytes() (uint64, error) {
	_, _, b, err := p.counters()
	return b, err
}

func (p *sinkProc) Accepted() int64 {
	a, _, _, _ := p.counters()
	return a
}

// close ends the child (closing its stdin; SIGKILL after 10 s).
func (p *sinkProc) close() error {
	_ = p.in.Close() // EOF on its stdin asks the child to exit; the wait below tells
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("sink process: %w (stderr: %s)", err, strings.TrimSpace(p.errb.String()))
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		_ = <-p.done // killed: the timeout is the error to report
		return errors.New("sink process did not stop within 10s")
	}
}
