package bench

import (
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/traffic"
)

// The load programs build, and the bench and they agree: the sink's port,
// the generator's "ready", the counters in shared memory (read while the
// child is stopped: the bench never waits for it to answer), and the
// generator's stop resetting its connections. Both run in this namespace
// over loopback with a few paced flows, so the test needs no lab.
func TestLoadProcs(t *testing.T) {
	bins, cleanup, err := buildLoadPrograms()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	sink, err := startSinkProc(bins.sink, "", netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if sink != nil {
			if err := sink.close(); err != nil {
				t.Error(err)
			}
		}
	}()
	const conns = 3
	dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), sink.port)
	flows, err := startFlowsProc(bins.flows, "", dst, traffic.ManyFlowsOptions{Flows: conns, WriteSize: 100, RateBytesPerSec: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if flows != nil {
			if err := flows.stop(); err != nil {
				t.Error(err)
			}
		}
	}()
	waitFor(t, "the sink to accept every flow and receive data", func() bool {
		return sink.Accepted() == conns && sink.Active() == conns && sink.Bytes() > 0
	})
	waitFor(t, "the flows to count what they wrote", func() bool { return flows.Written() >= sink.Bytes() && flows.Written() > 0 })

	// A stopped child cannot answer: the counters are read all the same.
	if err := sink.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := sink.Bytes()
	if err := sink.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if b == 0 {
		t.Error("the sink's byte counter read 0 after it had received data")
	}

	err = flows.stop()
	flows = nil
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sink to see every flow closed", func() bool { return sink.Active() == 0 })
	err = sink.close()
	sink = nil
	if err != nil {
		t.Fatal(err)
	}
}

// A generator that cannot connect fails at start with its error.
func TestFlowsProcConnectError(t *testing.T) {
	bins, cleanup, err := buildLoadPrograms()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	// Port 1 on loopback: nothing listens there in the test's namespace.
	f, err := startFlowsProc(bins.flows, "", netip.MustParseAddrPort("127.0.0.1:1"), traffic.ManyFlowsOptions{Flows: 2})
	if err == nil {
		_ = f.stop()
		t.Fatal("started flows to a closed port")
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %q does not give the generator's reason (connection refused)", err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
