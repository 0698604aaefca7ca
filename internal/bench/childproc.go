package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/rttscope/rttscope/internal/shmcount"
	"github.com/rttscope/rttscope/internal/testutil"
)

// The TCP load of the load phase and of the monitor study runs in child
// processes, the programs internal/cmd/bench-sink and bench-flows (their
// doc comments say why): the bench builds them from the source tree. They
// count into memory shared with the bench (internal/shmcount), so reading
// their counters never waits for them.

// Import paths of the load programs.
const (
	sinkCmd  = "github.com/rttscope/rttscope/internal/cmd/bench-sink"
	flowsCmd = "github.com/rttscope/rttscope/internal/cmd/bench-flows"
)

// loadPrograms are the built load programs.
type loadPrograms struct{ sink, flows string }

// buildLoadPrograms compiles the load programs into temp dirs that
// cleanup removes.
func buildLoadPrograms() (p loadPrograms, cleanup func(), err error) {
	var cleanups []func()
	cleanup = func() {
		for _, c := range cleanups {
			c()
		}
	}
	for _, b := range []struct {
		pkg string
		bin *string
	}{{sinkCmd, &p.sink}, {flowsCmd, &p.flows}} {
		bin, c, err := testutil.Build(b.pkg)
		if err != nil {
			cleanup()
			return p, nil, fmt.Errorf("the TCP load scenarios run their sink and flows as separate programs built with go: "+
				"run the bench from the rttscope source tree with go on PATH (make bench), or leave the load phase out (--only test_run,live,events): %w", err)
		}
		*b.bin = bin
		cleanups = append(cleanups, c)
	}
	return p, cleanup, nil
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

// loadProc is the bench's handle on a load program: its counters, and its
// stdin, whose closing asks it to exit.
type loadProc struct {
	name     string
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      io.ReadCloser
	counters *shmcount.Counters
	done     chan error
	errb     *testutil.Buffer
}

// startLoadProc runs bin with args and slots shared counters (its
// descriptor 3).
func startLoadProc(name, bin string, args []string, slots int) (*loadProc, error) {
	c, err := shmcount.New(name, slots)
	if err != nil {
		return nil, err
	}
	p := &loadProc{name: name, counters: c, done: make(chan error, 1), errb: &testutil.Buffer{}}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.errb
	p.cmd.ExtraFiles = []*os.File{c.File()}
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		_ = c.Close() // the pipe error is the one to report
		return nil, err
	}
	if p.out, err = p.cmd.StdoutPipe(); err != nil {
		_ = c.Close() // the pipe error is the one to report
		return nil, err
	}
	if err := startChild(p.cmd, func(err error) { p.done <- err }); err != nil {
		_ = c.Close() // the start error is the one to report
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return p, nil
}

// firstLine is the first line the child writes on stdout, waited for at
// most wait.
func (p *loadProc) firstLine(wait time.Duration) (string, error) {
	if f, ok := p.out.(*os.File); ok { // exec's pipes are *os.File
		_ = f.SetReadDeadline(time.Now().Add(wait))
	}
	line, err := bufio.NewReader(p.out).ReadString('\n')
	if err == nil {
		return strings.TrimSpace(line), nil
	}
	return "", p.failed(err, wait)
}

// waitReady polls ready until it holds, the child exits, or wait passes.
func (p *loadProc) waitReady(ready func() bool, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for !ready() {
		select {
		case werr := <-p.done:
			p.done <- werr // for close
			return p.failed(io.EOF, wait)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return p.failed(os.ErrDeadlineExceeded, wait)
		}
	}
	return nil
}

// failed ends a child that did not start and says why.
func (p *loadProc) failed(err error, wait time.Duration) error {
	stderr := strings.TrimSpace(p.errb.String())
	cerr := p.kill()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("%s process not ready within %v (stderr: %s)", p.name, wait, stderr)
	case cerr != nil: // it exited: its exit status and stderr tell why
		return cerr
	default:
		err = fmt.Errorf("%s process: %w (stderr: %s)", p.name, err, stderr)
	}
	return errors.Join(err, cerr)
}

// kill ends the child at once (SIGKILL) and releases the counters; an
// exit status other than the kill is returned.
func (p *loadProc) kill() error {
	_ = p.cmd.Process.Kill() // it may have exited already: the wait tells
	werr := <-p.done
	var err error
	var ee *exec.ExitError
	if werr != nil && !(errors.As(werr, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL) {
		err = fmt.Errorf("%s process: %w (stderr: %s)", p.name, werr, strings.TrimSpace(p.errb.String()))
	}
	return errors.Join(err, p.counters.Close())
}

// close asks the child to exit (closing its stdin), kills it after wait,
// and releases the counters.
func (p *loadProc) close(wait time.Duration) error {
	_ = p.in.Close() // EOF on its stdin asks the child to exit; the wait below tells
	var err error
	select {
	case werr := <-p.done:
		if werr != nil {
			err = fmt.Errorf("%s process: %w (stderr: %s)", p.name, werr, strings.TrimSpace(p.errb.String()))
		}
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		_ = <-p.done // killed: the timeout is the error to report
		err = fmt.Errorf("%s process did not stop within %v", p.name, wait)
	}
	return errors.Join(err, p.counters.Close())
}
