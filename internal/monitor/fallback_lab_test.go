package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/loader"
)

// TestLabFallbacks: with TCX and map-element iterators disabled (as on
// kernels before 6.6, or one whose policy refuses iterators) the monitor
// attaches through clsact, expires idle flows with the prog-run cleanup,
// says both in its log and stats, measures the same echoes as the pinger,
// and leaves nothing attached.
func TestLabFallbacks(t *testing.T) {
	l := sharedLab(t)
	t.Setenv(kernel.DisableEnv, "tcx,map_elem_iter")
	ifname := l.MiddleboxServerIf[0]
	cfg := bpfConfig(false, true, 0)
	cfg.OtherFlowTimeout = 500 * time.Millisecond
	r := startMonitor(t, Options{
		Interfaces:      []string{ifname},
		Netns:           l.Middlebox.Name,
		BPF:             cfg,
		CleanupInterval: 100 * time.Millisecond,
	})
	for _, want := range []string{"clsact egress", "clsact ingress", "variant cleanup=prog-run", "fallback: map-element iterators disabled"} {
		if !strings.Contains(r.log.String(), want) {
			t.Errorf("log does not mention %q:\n%s", want, r.log)
		}
	}
	if h := hooksOn(t, l.Middlebox, ifname); !h.clsact || h.tcxEgress+h.tcxIngress != 0 {
		t.Errorf("while running: %v, want clsact filters and no TCX", h)
	}
	const count, interval = 6, 50 * time.Millisecond
	targets := []*pingTarget{{dst: l.ServerAddr4[0], id: 0x4400}, {dst: l.ServerAddr6[0], id: 0x6400}}
	pingAll(l, targets, count, interval)
	// Idle for longer than the flow timeout plus a cleanup interval.
	ok := waitFor(5*time.Second, func() bool { return len(r.out.timeouts()) >= len(targets) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !ok {
		t.Errorf("flow timeouts: %v, want one per ping flow", r.out.timeouts())
	}
	for _, tg := range targets {
		evs := r.out.RTTs(isICMPFrom(tg.dst, tg.id))
		if len(evs) == 0 {
			t.Errorf("%s: no ICMP samples", tg.dst)
		}
		checkPingPairs(t, tg, evs, count, interval, pairTolerance(icmpTolerance))
	}
	if st, ok := r.out.lastStats(); !ok || st.Variant != "cleanup=prog-run" || st.FlowsTimedOut < uint64(len(targets)) {
		t.Errorf("stats %+v, want variant cleanup=prog-run and the flows timed out", st)
	}
	if h := hooksOn(t, l.Middlebox, ifname); !h.empty() {
		t.Errorf("after Run: %v, want nothing", h)
	}
	checkNoBPFFds(t)
}

// TestLabTCXRequiredButDisabled: --tc-mode tcx on a kernel without TCX is
// a one-line error that names the way out, with nothing attached.
func TestLabTCXRequiredButDisabled(t *testing.T) {
	l := sharedLab(t)
	t.Setenv(kernel.DisableEnv, "tcx")
	ifname := l.MiddleboxServerIf[0]
	err := Run(t.Context(), Options{
		Interfaces:      []string{ifname},
		Netns:           l.Middlebox.Name,
		BPF:             bpfConfig(true, false, 0),
		Attach:          loader.AttachOptions{TCMode: loader.TCModeTCX},
		CleanupInterval: time.Second,
		Output:          &collector{},
		Log:             &strings.Builder{},
	})
	if err == nil || !strings.Contains(err.Error(), "--tc-mode clsact") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v, want one line naming --tc-mode clsact", err)
	}
	if h := hooksOn(t, l.Middlebox, ifname); !h.empty() {
		t.Errorf("after the error: %v, want nothing", h)
	}
	checkNoBPFFds(t)
}

// timeouts returns the flow events closing a flow for its timeout.
func (c *collector) timeouts() []events.FlowEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []events.FlowEvent
	for _, f := range c.flows {
		if f.Type == events.FlowClosing && f.Reason == events.ReasonTimeout {
			out = append(out, f)
		}
	}
	return out
}
