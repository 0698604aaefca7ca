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
	s0, err := lb.snap(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	s1, err := lb.snap(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
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
