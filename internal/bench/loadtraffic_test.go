package bench

import (
	"context"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/testutil"
)

// The TCP load in a lab: the sink and the flows run as child processes in
// the server's and the client's namespaces, snap reads their counters, the
// router's interfaces and the client's retransmission counter, and
// stopTraffic ends both children. A few paced flows: seconds, not a
// benchmark.
func TestLoadTrafficTCP(t *testing.T) {
	testutil.RequireRoot(t)
	bins, cleanup, err := buildLoadPrograms()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx := context.Background()
	l := directLab(t, "rttload")
	o := DefaultOptions()
	o.loadBins, o.LoadWriteSize, o.LoadTCPRate = bins, 100, 200_000
	lb, err := newLoadBench(&o, l, "")
	if err != nil {
		t.Fatal(err)
	}
	const flows = 200
	if err := lb.startTraffic(ctx, loadScenario{tcpScenario(flows), flows}); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = lb.stopTraffic() // after a failure above; that is the one reported
		}
	}()
	if a := lb.sink.Active(); a != flows {
		t.Errorf("sink holds %d connections, want %d", a, flows)
	}
	s0, s1 := snapTwice(t, lb)
	if s1.sinkB <= s0.sinkB {
		t.Errorf("sink bytes did not grow: %d then %d", s0.sinkB, s1.sinkB)
	}
	if s1.srv.TxBytes-s0.srv.TxBytes < s1.sinkB-s0.sinkB {
		t.Errorf("the router sent %d bytes toward the server, the sink received %d: the sink's counter is not what crossed the router",
			s1.srv.TxBytes-s0.srv.TxBytes, s1.sinkB-s0.sinkB)
	}
	if s1.retrans < s0.retrans {
		t.Errorf("retransmissions went down: %d then %d", s0.retrans, s1.retrans)
	}
	// A flow counts a write once it returned: the sink may be one write
	// per flow ahead.
	b := lb.sink.Bytes()
	if w := lb.flows.Written(); w == 0 || b > w+flows*uint64(o.LoadWriteSize) || lb.flows.WriteErrors() != 0 {
		t.Errorf("flows wrote %d bytes (%d write errors), the sink received %d", w, lb.flows.WriteErrors(), b)
	}
	sink := lb.sink
	stopped = true
	if err := lb.stopTraffic(); err != nil {
		t.Fatal(err)
	}
	if lb.sink != nil || lb.flows != nil {
		t.Error("stopTraffic left the load programs' handles set")
	}
	if e := sink.p.cmd.ProcessState; e == nil || !e.Exited() {
		t.Errorf("sink process not exited: %v", e)
	}
}

// The UDP flood in a lab, over IPv4 and (UDPIPv6) IPv6: the sink listens
// on the server's address of that family, so datagrams it counts crossed
// the router on that family's path, and the router's counters carry at
// least what the sink received (payload plus the family's headers).
func TestLoadTrafficUDP(t *testing.T) {
	testutil.RequireRoot(t)
	ctx := context.Background()
	l := directLab(t, "rttudpl")
	for _, ipv6 := range []bool{false, true} {
		t.Run(udpFamily(ipv6), func(t *testing.T) {
			o := DefaultOptions()
			o.UDPPayload, o.UDPPPS, o.UDPIPv6 = 64, 2000, ipv6
			lb, err := newLoadBench(&o, l, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := lb.startTraffic(ctx, loadScenario{LoadScenarioUDP, 0}); err != nil {
				_ = lb.stopTraffic()
				t.Fatal(err)
			}
			defer func() { _ = lb.stopTraffic() }()
			if got, want := lb.udpSink.Addr().Addr(), udpServerAddr(l, ipv6); got != want || got.Is4() == ipv6 {
				t.Errorf("sink on %v, want %v", got, want)
			}
			s0, s1 := snapTwice(t, lb)
			pkts := s1.sinkP - s0.sinkP
			if pkts == 0 || s1.sinkB-s0.sinkB != pkts*64 {
				t.Fatalf("sink received %d datagrams, %d bytes (want > 0 of 64 bytes each)", pkts, s1.sinkB-s0.sinkB)
			}
			hdr := uint64(20 + 8)
			if ipv6 {
				hdr = 40 + 8
			}
			if tx := s1.srv.TxBytes - s0.srv.TxBytes; tx < pkts*(64+hdr) {
				t.Errorf("the router sent %d bytes toward the server for %d datagrams: fewer than %d-byte %s packets", tx, pkts, 64+hdr, udpFamily(ipv6))
			}
		})
	}
}

// snapTwice returns the load bench's readings half a second apart.
func snapTwice(t *testing.T, lb *loadBench) (s0, s1 loadSnap) {
	t.Helper()
	var err error
	if s0, err = lb.snap(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if s1, err = lb.snap(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	return s0, s1
}
