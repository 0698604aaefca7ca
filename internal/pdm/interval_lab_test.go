package pdm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/testutil"
)

// TestLabInterval: rttscope pdm --pdm-report interval on both ends of a
// lab path; the client's interval records of the UDP exchange count one
// DTLR and one network RTT per reply, summed over the intervals, and
// every record is consistent (min <= mean <= max). No timing checks.
func TestLabInterval(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := pdmLab(ctx, t, lab.Config{Prefix: "rspdmiv", Paths: []lab.PathSpec{{}}})
	srv, cli := l.Servers[0], l.Client
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runs := []struct {
		node   *lab.Node
		ifname string
	}{{cli, lab.ClientIf}, {srv, lab.ServerIf}}
	outs := make([]*bytes.Buffer, len(runs))
	errs := make([]error, len(runs))
	ready := make(chan struct{}, len(runs))
	for i, r := range runs {
		outs[i] = new(bytes.Buffer)
		w, _ := format.New("jsonl", outs[i], format.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Run(runCtx, Options{Interfaces: []string{r.ifname}, Netns: r.node.Name, Output: w,
				Ready: func() { ready <- struct{}{} }, Reporting: Reporting{Report: ReportInterval, Interval: 100 * time.Millisecond},
				Config: Config{MapSize: DefaultMapSize, Lifetime: DefaultLifetime}})
			_ = w.Close()
		}()
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopRun()
			wg.Wait()
		}
	}
	defer stop()
	for range runs {
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			stop()
			t.Fatalf("rttscope pdm not attached after 30 s: %v", errs)
		}
	}
	to := netip.AddrPortFrom(l.ServerAddr6[0], labPort)
	exchange(t, cli, srv, to)
	stop()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rttscope pdm (%d): %v", i, err)
		}
	}
	var dtlr, net uint64
	n := 0
	sc := bufio.NewScanner(outs[0])
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r intervalRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		for _, d := range []distribution{r.DTLR, r.DTLS, r.NetworkRTT} {
			d.check(t, sc.Bytes())
		}
		if r.Type != "pdm_interval" || r.Protocol != "UDP" || r.SrcPort != labPort || r.Direction != "ingress" {
			continue
		}
		n++
		dtlr += r.DTLR.Count
		net += r.NetworkRTT.Count
	}
	if n == 0 || dtlr != labRequests || net != labRequests {
		t.Errorf("client: %d UDP records, %d DTLR and %d network RTT samples, want %d each\n%s",
			n, dtlr, net, labRequests, outs[0].Bytes())
	}
	t.Logf("client: %d interval records of the UDP exchange", n)
}
