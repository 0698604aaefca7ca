package traffic

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rttscope/rttscope/internal/lab"
)

// quicPeer is a QUIC client and server on aioquic (PyPI), whose latency
// spin bit spins on every connection: the peer of the quic_spin source's
// lab tests. scripts/setup.sh installs aioquic.
//
//go:embed quicpeer.py
var quicPeer []byte

// QUICAvailable reports why the QUIC peer cannot run here (python3 or
// aioquic missing), or nil.
func QUICAvailable() error {
	if err := exec.Command("python3", "-c", "import aioquic").Run(); err != nil {
		return fmt.Errorf("python3 with aioquic is needed (scripts/setup.sh installs it): %w", err)
	}
	return nil
}

// writeQUICPeer writes the peer script to a file of its own, which the
// caller removes.
func writeQUICPeer() (string, error) {
	f, err := os.CreateTemp("", "rttscope-quicpeer-*.py")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(quicPeer); err != nil {
		f.Close()
		_ = os.Remove(f.Name()) // best effort: the write error is what matters
		return "", err
	}
	return f.Name(), f.Close()
}

// StartQUICServer runs a QUIC server on addr:port inside node that
// receives streams, until stop is called. It returns once the server
// listens.
func StartQUICServer(node *lab.Node, addr netip.Addr, port uint16) (stop func() error, err error) {
	script, err := writeQUICPeer()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := node.Command(ctx, "python3", script, "server", addr.String(), strconv.Itoa(int(port)))
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		_ = os.Remove(script) // best effort: the start error is what matters
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		_ = os.Remove(script) // best effort: the start error is what matters
		return nil, fmt.Errorf("start the QUIC server: %w", err)
	}
	stop = func() error {
		cancel()
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = nil // killed, as asked
		}
		return errors.Join(err, os.Remove(script))
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		for sc.Scan() { // drain until it exits
		}
	}()
	select {
	case ok := <-ready:
		if ok {
			return stop, nil
		}
	case <-time.After(20 * time.Second):
	}
	_ = stop()
	return nil, fmt.Errorf("the QUIC server did not start: %s", strings.TrimSpace(stderr.String()))
}

// QUICBulk connects from client to dst over QUIC and sends one stream for
// duration d; it returns the bytes the server received.
func QUICBulk(ctx context.Context, client *lab.Node, dst netip.AddrPort, d time.Duration) (uint64, error) {
	script, err := writeQUICPeer()
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(script) }() // a temporary file: best effort
	out, err := client.Command(ctx, "python3", script, "client", dst.Addr().String(), strconv.Itoa(int(dst.Port())),
		strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("QUIC client: %w: %s", err, strings.TrimSpace(string(out)))
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("QUIC client output %q: %w", out, err)
	}
	return n, nil
}
