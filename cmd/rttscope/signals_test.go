package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/nsrun"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// pingDuringTest pings the lab's first server from the client every 50 ms
// until the test ends, so that a monitor with -C keeps writing samples.
func pingDuringTest(t *testing.T, l *lab.Lab) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = traffic.PingWith(ctx, l.Client, l.ServerAddr4[0], traffic.PingOptions{Count: 600, Interval: 50 * time.Millisecond, ID: 0x5151})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitOutput waits until out, the output of cmd, holds want (such as the
// monitor's "watching IF" once its hooks are attached), for up to a
// minute: loading the programs takes seconds under emulation. It kills
// cmd and fails the test when want does not come.
func waitOutput(t *testing.T, cmd *exec.Cmd, out *testutil.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("rttscope %v: no %q within a minute; output:\n%s", cmd.Args[1:], want, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running reports whether cmd's process has not exited, without reaping
// it (waitid with WNOWAIT, as os/exec itself does): a process that exited
// and waits for Wait would still take a signal 0.
func running(t *testing.T, cmd *exec.Cmd) bool {
	t.Helper()
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		t.Fatalf("waitid %d: %v", cmd.Process.Pid, err)
	}
	return info.Signo == 0 // no child state to report: still running
}

// waitExit waits up to 20 s for cmd and returns its exit code (-1 when a
// signal ended it).
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("wait: %v", err)
		}
		return cmd.ProcessState.ExitCode()
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		_ = <-done
		t.Fatalf("rttscope %v did not stop within 20 s", cmd.Args[1:])
		return 0
	}
}

// TestCLIMonitorStopsInOrderOnSIGPIPE: `rttscope monitor ... | head -1`
// with the legacy clsact attach (the only one before Linux 6.6, and not a
// link the process holds): when the reader of stdout goes away, the
// monitor detaches and exits quietly with 141 (128 + SIGPIPE); before, Go's
// default action killed it on the write and its filters stayed on the
// interface.
func TestCLIMonitorStopsInOrderOnSIGPIPE(t *testing.T) {
	l := needCLILab(t)
	ifname := l.MiddleboxServerIf[0]
	pingDuringTest(t, l)
	cmd := exec.Command(cliBin, "monitor", "--netns", l.Middlebox.Name, "-i", ifname, "--tc-mode", "clsact", "-C", "-r", "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("no output line: %v; stderr:\n%s", err, stderr.String())
	}
	if got := attachedTo(t, l.Middlebox, ifname); len(got) != 2 {
		t.Errorf("while running: %v on %s, want the two filters of the clsact attach", got, ifname)
	}
	_ = stdout.Close() // as `head -1` exits
	code := waitExit(t, cmd)
	t.Logf("first line %q; exit code %d", strings.TrimSpace(line), code)
	if code != 128+int(syscall.SIGPIPE) {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGPIPE), stderr.String())
	}
	if strings.Contains(stderr.String(), "broken pipe") {
		t.Errorf("stderr reports the closed pipe as an error:\n%s", stderr.String())
	}
	if got := attachedTo(t, l.Middlebox, ifname); len(got) > 0 {
		t.Errorf("left %v on %s", got, ifname)
	}
}

// TestCLISignals: SIGHUP (the terminal or ssh session went away) stops a
// monitor or pdm writing to stdout, which detach their clsact filters, and
// a lab, which removes its namespaces; a monitor writing to a --write file
// reopens it instead and keeps running. A SIGPIPE that is not about
// stdout (as a Prometheus scraper or a Kafka broker closing a connection
// mid-write raises) does not stop a monitor.
func TestCLISignals(t *testing.T) {
	l := needCLILab(t)
	ifname := l.MiddleboxServerIf[0]
	start := func(args ...string) (*exec.Cmd, *testutil.Buffer) {
		cmd := exec.Command(cliBin, args...)
		out := &testutil.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	// endWith sends sig and wants an exit with status 0.
	endWith := func(t *testing.T, cmd *exec.Cmd, out *testutil.Buffer, sig syscall.Signal) {
		t.Helper()
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd); code != 0 {
			t.Errorf("exit code %d after %v, want 0; output:\n%s", code, sig, out.String())
		}
	}
	// nothingLeft wants no hook of any kind left on the interface.
	nothingLeft := func(t *testing.T) {
		t.Helper()
		if got := attachedTo(t, l.Middlebox, ifname); len(got) > 0 {
			t.Errorf("left %v on %s", got, ifname)
		}
	}

	t.Run("monitor to stdout", func(t *testing.T) {
		cmd, out := start("monitor", "--netns", l.Middlebox.Name, "-i", ifname, "--tc-mode", "clsact")
		waitOutput(t, cmd, out, "watching "+ifname)
		endWith(t, cmd, out, syscall.SIGHUP)
		nothingLeft(t)
	})

	t.Run("monitor and a socket's SIGPIPE", func(t *testing.T) {
		cmd, out := start("monitor", "--netns", l.Middlebox.Name, "-i", ifname, "--tc-mode", "clsact")
		waitOutput(t, cmd, out, "watching "+ifname)
		if err := cmd.Process.Signal(syscall.SIGPIPE); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if !running(t, cmd) {
			t.Errorf("the monitor stopped on a SIGPIPE; output:\n%s", out.String())
		}
		endWith(t, cmd, out, syscall.SIGTERM)
		nothingLeft(t)
	})

	t.Run("monitor to a file", func(t *testing.T) {
		file := t.TempDir() + "/rtt.txt"
		cmd, out := start("monitor", "--netns", l.Middlebox.Name, "-i", ifname, "--tc-mode", "clsact", "-w", file)
		waitOutput(t, cmd, out, "watching "+ifname)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		reopened := false
		for range 100 {
			if _, err := os.Stat(file); err == nil {
				reopened = true
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !reopened {
			t.Errorf("SIGHUP did not reopen %s", file)
		}
		if !running(t, cmd) {
			t.Errorf("the monitor stopped on SIGHUP; output:\n%s", out.String())
		}
		endWith(t, cmd, out, syscall.SIGTERM)
		nothingLeft(t)
	})

	t.Run("pdm", func(t *testing.T) {
		cmd, out := start("pdm", "--netns", l.Middlebox.Name, "-i", ifname, "--tc-mode", "clsact")
		waitOutput(t, cmd, out, "rttscope pdm: "+ifname)
		endWith(t, cmd, out, syscall.SIGHUP)
		nothingLeft(t)
	})

	t.Run("lab", func(t *testing.T) {
		prefix := fmt.Sprintf("rtt-hup%d", os.Getpid()%100000)
		cmd, out := start("lab", "--prefix", prefix)
		waitOutput(t, cmd, out, "lab up")
		if n := namespacesWithPrefix(t, prefix); n == 0 {
			t.Fatalf("no namespace named %s-* while the lab is up; output:\n%s", prefix, out.String())
		}
		endWith(t, cmd, out, syscall.SIGHUP)
		if n := namespacesWithPrefix(t, prefix); n > 0 {
			t.Errorf("%d namespaces named %s-* left after SIGHUP", n, prefix)
		}
	})
}

// namespacesWithPrefix counts the named network namespaces (ip netns)
// whose name starts with prefix-.
func namespacesWithPrefix(t *testing.T, prefix string) int {
	t.Helper()
	ents, err := os.ReadDir(nsrun.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			n++
		}
	}
	return n
}

// TestStdoutGone: only a write to stdout or stderr that met a closed pipe
// exits quietly; EPIPE from a socket or a file is an error to report.
func TestStdoutGone(t *testing.T) {
	stdoutEPIPE := &os.PathError{Op: "write", Path: os.Stdout.Name(), Err: syscall.EPIPE}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{stdoutEPIPE, true},
		{fmt.Errorf("write output: %w", stdoutEPIPE), true},
		{errors.Join(errors.New("other"), stdoutEPIPE), true},
		{&os.PathError{Op: "write", Path: os.Stderr.Name(), Err: syscall.EPIPE}, true},
		{&os.PathError{Op: "write", Path: os.Stdout.Name(), Err: syscall.ENOSPC}, false},
		{&os.PathError{Op: "write", Path: "/var/log/rtt.json", Err: syscall.EPIPE}, false},
		{&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, false},
		{syscall.EPIPE, false},
	} {
		if got := stdoutGone(tc.err); got != tc.want {
			t.Errorf("stdoutGone(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
