package monitor

import (
	"bufio"
	"context"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/stats"
	"github.com/rttscope/rttscope/internal/traffic"
)

// icmpTolerance bounds |monitor sample - pinger RTT| for one echo. The
// pinger's RTT also covers the client-middlebox leg twice and its own send
// path (a few tens of µs on an idle host).
const icmpTolerance = 300 * time.Microsecond

// TestLabICMPMatchesPinger: every ICMP echo sample the monitor takes on the
// middlebox's server-facing interfaces equals, within 0.3 ms, the RTT the
// pinger on the client measured for the same echo (IPv4 and IPv6, paths of
// 40 ms and 100 ms).
func TestLabICMPMatchesPinger(t *testing.T) {
	l := sharedLab(t)
	r := startMonitor(t, Options{
		Interfaces: l.MiddleboxServerIf,
		Netns:      l.Middlebox.Name,
		BPF:        bpfConfig(false, true, 0),
	})
	const count, interval = 15, 100 * time.Millisecond
	var targets []*pingTarget
	for i := range l.Servers {
		targets = append(targets,
			&pingTarget{dst: l.ServerAddr4[i], id: uint16(0x4100 + i)},
			&pingTarget{dst: l.ServerAddr6[i], id: uint16(0x6100 + i)})
	}
	pingAll(l, targets, count, interval)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkNoBPFFds(t)

	var all []time.Duration
	for k, tg := range targets {
		path := k / 2
		evs := r.out.RTTs(isICMPFrom(tg.dst, tg.id))
		diffs := checkPingPairs(t, tg, evs, count, interval, icmpTolerance)
		all = append(all, diffs...)
		t.Logf("path %d (%v) %s: pinger median %s (%d replies), monitor median %s (%d samples); |monitor-pinger| %s",
			path, sharedRTT[path], tg.dst, ms(stats.Median(pingRTTs(tg.replies))), len(tg.replies),
			ms(stats.Median(sampleRTTs(evs))), len(evs), fmtStats(diffs))
		if len(evs) == 0 {
			t.Errorf("%s: no monitor samples", tg.dst)
		}
	}
	t.Logf("all echoes: |monitor - pinger| %s", fmtStats(all))
	if st, ok := r.out.lastStats(); !ok {
		t.Error("no stats record at exit")
	} else if st.RingbufFull > 0 || st.TimestampMapFull > 0 {
		t.Errorf("events dropped in the kernel: %+v", st)
	}
}

// TestLabTCPBulkMedian: the median TCP sample of a paced bulk transfer
// lies within 2 ms of the path's RTT at that time (checkBulkMedian: a
// pinger on the same path during the transfer, and the sender's own
// smoothed RTT). Samples come from the server's ACKs echoing the client's
// TSval, matched on the middlebox's ingress.
func TestLabTCPBulkMedian(t *testing.T) {
	l := sharedLab(t)
	const port = 5201
	sinkOnEveryServer(t, l, port)

	r := startMonitor(t, Options{
		Interfaces: l.MiddleboxServerIf,
		Netns:      l.Middlebox.Name,
		BPF:        bpfConfig(true, false, 0),
	})
	flows, probes := bulkToEveryServer(l, port, 0x4200)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkNoBPFFds(t)

	for _, f := range flows {
		if f.err != nil {
			t.Errorf("bulk to %s: %v", f.dst, f.err)
			continue
		}
		if !f.res.Timestamps {
			t.Errorf("bulk to %s: TCP timestamps not negotiated", f.dst)
		}
		evs := r.out.RTTs(isTCPFrom(f.dst))
		if len(evs) < 100 {
			t.Errorf("bulk to %s: only %d TCP samples", f.dst, len(evs))
			continue
		}
		t.Logf("path %d %s: %d bytes acked in %v, %d retransmits; %d samples, min %s",
			f.path, f.dst, f.res.Bytes, f.res.Duration.Round(time.Millisecond), f.res.Retransmits,
			len(evs), ms(slicesMin(sampleRTTs(evs))))
		checkBulkMedian(t, f, probes, "TCP", sampleRTTs(evs), 2*time.Millisecond)
	}
	logDelayLines(t, l)
}

// sinkOnEveryServer runs a TCP sink on port of each server address until
// the test ends.
func sinkOnEveryServer(t *testing.T, l *lab.Lab, port uint16) {
	t.Helper()
	for i, s := range l.Servers {
		for _, a := range []netip.Addr{l.ServerAddr4[i], l.ServerAddr6[i]} {
			sk, err := traffic.NewSink(s, a, port)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sk.Close() })
		}
	}
}

// checkBulkMedian holds the median of a bulk flow's samples (rtts) to
// the path's RTT during the transfer, within tol either side:
//   - at least the RTT a pinger to the same path measured meanwhile (see
//     bulkToEveryServer): its echoes queue in the same veths and delay
//     lines as the segments and ACKs, so a delay line released late on a
//     busy machine moves both alike, where a configured-RTT reference does
//     not move and failed then;
//   - at most the larger of that and the sender's median smoothed RTT
//     (BulkResult.MedianSRTT): TCP's RTT also holds the receiver's ACK
//     timing (delayed ACKs, window updates a CPU-starved receiver sends
//     late), which a monitor on the path rightly sees and a pinger does
//     not. On an idle lab the two agree within tens of µs.
//
// The pinger must have answered, and no faster than the configured RTT
// allows (or the lab, not the monitor, is broken).
func checkBulkMedian(t *testing.T, f *bulkFlow, probes []*pingTarget, what string, rtts []time.Duration, tol time.Duration) {
	t.Helper()
	p := probes[f.path]
	if p.err != nil || len(p.replies) < probeCount/2 {
		t.Errorf("pinger on path %d during the transfer: %v (%d of %d replies)", f.path, p.err, len(p.replies), probeCount)
		return
	}
	ping := stats.Median(pingRTTs(p.replies))
	conf := sharedRTT[f.path]
	if short := lab.ShortestRoundTrip(conf); ping < short {
		t.Errorf("pinger on path %d: median %s, shorter than the configured %v allows (%v)", f.path, ms(ping), conf, short)
		return
	}
	got := stats.Median(rtts)
	lo, hi := ping-tol, max(ping, f.res.MedianSRTT)+tol
	t.Logf("path %d %s: %s median %s; configured %v, pinger during the transfer %s, sender's median srtt %v: want %s to %s",
		f.path, f.dst, what, ms(got), conf, ms(ping), f.res.MedianSRTT, ms(lo), ms(hi))
	if got < lo || got > hi {
		t.Errorf("path %d %s: %s median %s, want %s to %s", f.path, f.dst, what, ms(got), ms(lo), ms(hi))
	}
}

// logDelayLines logs what the lab's user-space delay lines did so far (a
// late release on a busy machine shows in MaxLate/MeanLate); a path that
// delays with netem forwarded nothing through one and is left out.
func logDelayLines(t *testing.T, l *lab.Lab) {
	t.Helper()
	for i, ps := range l.DelayStats() {
		if ps.ToServer.Forwarded+ps.ToClient.Forwarded == 0 {
			continue
		}
		t.Logf("delay line %d: to server %+v; to client %+v", i, ps.ToServer, ps.ToClient)
	}
}

// bulkFlow is one paced bulk transfer of bulkToEveryServer.
type bulkFlow struct {
	path int
	dst  netip.Addr
	res  traffic.BulkResult
	err  error
}

// The reference pinger of bulkToEveryServer: probeCount echoes every
// probeInterval, starting probeDelay after the transfers (past their
// handshakes), so that they span most of the 3 s transfer.
const (
	probeCount    = 25
	probeInterval = 100 * time.Millisecond
	probeDelay    = 300 * time.Millisecond
)

// bulkToEveryServer runs, at once, a 3 s bulk transfer paced at 15 Mbit/s
// from the client to port on each server address (IPv4 and IPv6 of every
// path) and, during them, a pinger to each path's IPv4 server (echo ids
// from pingID on). It returns when all have ended: the transfers and the
// pingers, indexed by path.
func bulkToEveryServer(l *lab.Lab, port, pingID uint16) ([]*bulkFlow, []*pingTarget) {
	const dur, pacing = 3 * time.Second, 15_000_000
	var flows []*bulkFlow
	var probes []*pingTarget
	for i := range l.Servers {
		flows = append(flows, &bulkFlow{path: i, dst: l.ServerAddr4[i]}, &bulkFlow{path: i, dst: l.ServerAddr6[i]})
		probes = append(probes, &pingTarget{dst: l.ServerAddr4[i], id: pingID + uint16(i)})
	}
	var wg sync.WaitGroup
	for _, f := range flows {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), dur+20*time.Second)
			defer cancel()
			f.res, f.err = traffic.BulkStats(ctx, l.Client, netip.AddrPortFrom(f.dst, port), dur, pacing)
		})
	}
	wg.Go(func() {
		time.Sleep(probeDelay)
		pingAll(l, probes, probeCount, probeInterval)
	})
	wg.Wait()
	return flows, probes
}

func slicesMin(d []time.Duration) time.Duration {
	m := d[0]
	for _, x := range d {
		m = min(m, x)
	}
	return m
}

// TestLabAttachModes: XDP ingress (generic and native on veth) and the
// legacy clsact attach give the same ICMP samples as TCX, and nothing is
// left on the interfaces after Run returns.
func TestLabAttachModes(t *testing.T) {
	l := sharedLab(t)
	for _, tc := range []struct {
		name string
		opts loader.AttachOptions
		mode string // expected in the "watching" line
	}{
		{"xdp-generic", loader.AttachOptions{IngressHook: loader.IngressXDP, XDPMode: loader.XDPModeGeneric}, "xdp generic"},
		{"xdp-native", loader.AttachOptions{IngressHook: loader.IngressXDP, XDPMode: loader.XDPModeNative}, "xdp native"},
		{"clsact", loader.AttachOptions{IngressHook: loader.IngressTC, TCMode: loader.TCModeClsact}, "clsact ingress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ifname := l.MiddleboxServerIf[0]
			r := startMonitor(t, Options{
				Interfaces: []string{ifname},
				Netns:      l.Middlebox.Name,
				Attach:     tc.opts,
				BPF:        bpfConfig(true, true, 0),
			})
			if !strings.Contains(r.log.String(), tc.mode) {
				t.Errorf("log does not mention %q:\n%s", tc.mode, r.log)
			}
			h := hooksOn(t, l.Middlebox, ifname)
			switch {
			case tc.opts.IngressHook == loader.IngressXDP && kernel.Has(kernel.TCX) && (h.xdpProg == 0 || h.tcxEgress != 1 || h.tcxIngress != 0):
				t.Errorf("while running: %v, want XDP + TCX egress", h)
			case tc.opts.IngressHook == loader.IngressXDP && !kernel.Has(kernel.TCX) && (h.xdpProg == 0 || len(h.filters) != 1):
				t.Errorf("while running: %v, want XDP + a clsact egress filter (no TCX here)", h)
			case tc.opts.TCMode == loader.TCModeClsact && (!h.clsact || len(h.filters) != 2 || h.tcxEgress+h.tcxIngress != 0):
				t.Errorf("while running: %v, want clsact with two filters", h)
			}
			const count, interval = 6, 50 * time.Millisecond
			targets := []*pingTarget{
				{dst: l.ServerAddr4[0], id: 0x4300},
				{dst: l.ServerAddr6[0], id: 0x6300},
			}
			pingAll(l, targets, count, interval)
			if err := r.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			var all []time.Duration
			for _, tg := range targets {
				evs := r.out.RTTs(isICMPFrom(tg.dst, tg.id))
				if len(evs) == 0 {
					t.Errorf("%s: no ICMP samples", tg.dst)
				}
				all = append(all, checkPingPairs(t, tg, evs, count, interval, pairTolerance(icmpTolerance))...)
			}
			t.Logf("%s: |monitor - pinger| %s", tc.name, fmtStats(all))
			if h := hooksOn(t, l.Middlebox, ifname); !h.empty() {
				t.Errorf("after Run: %v, want nothing", h)
			}
			checkNoBPFFds(t)
		})
	}
}

// TestLabInterfaceDisappears: when one of two monitored interfaces is
// deleted the monitor says so and keeps sampling on the other; when the
// last one goes, Run returns an error saying so, with nothing left open.
func TestLabInterfaceDisappears(t *testing.T) {
	ms1 := lab.PathSpec{DelayToServer: time.Millisecond, DelayToClient: time.Millisecond}
	l := ownLab(t, ms1, ms1)
	r := startMonitor(t, Options{
		Interfaces: l.MiddleboxServerIf,
		Netns:      l.Middlebox.Name,
		BPF:        bpfConfig(false, true, 0),
	})
	del := func(ifname string) {
		t.Helper()
		err := l.Middlebox.Do(func() error {
			lk, err := netlink.LinkByName(ifname)
			if err != nil {
				return err
			}
			return netlink.LinkDel(lk)
		})
		if err != nil {
			t.Fatalf("delete %s: %v", ifname, err)
		}
	}

	links := bpfFds(t)["bpf-link"] // 2 per interface (TCX) + the cleanup iterators
	perIface := 2
	if !kernel.Has(kernel.TCX) {
		perIface = 0 // clsact filters are not links
	}
	del(l.MiddleboxServerIf[1])
	want := "interface " + l.MiddleboxServerIf[1] + " disappeared"
	if !waitFor(5*time.Second, func() bool { return strings.Contains(r.log.String(), want) }) {
		t.Fatalf("log does not say %q within 5s:\n%s", want, r.log)
	}
	select {
	case err := <-r.done:
		r.ended, r.result = true, err
		t.Fatalf("Run returned after losing one of two interfaces: %v", err)
	default:
	}
	if n := bpfFds(t)["bpf-link"]; n != links-perIface {
		t.Errorf("%d BPF links open after one interface went, want %d (its tcx ingress and egress closed)", n, links-perIface)
	}
	h := hooksOn(t, l.Middlebox, l.MiddleboxServerIf[0])
	if perIface == 2 && (h.tcxIngress != 1 || h.tcxEgress != 1) || perIface == 0 && len(h.filters) != 2 {
		t.Errorf("remaining interface: %v", h)
	}
	tg := &pingTarget{dst: l.ServerAddr4[0], id: 0x4400}
	pingAll(l, []*pingTarget{tg}, 5, 20*time.Millisecond)
	if tg.err != nil || len(tg.replies) == 0 {
		t.Fatalf("ping path 0: %v, %d replies", tg.err, len(tg.replies))
	}
	if !waitFor(2*time.Second, func() bool { return len(r.out.RTTs(isICMPFrom(tg.dst, tg.id))) >= len(tg.replies) }) {
		t.Errorf("after one interface went: %d samples for %d pinger replies", len(r.out.RTTs(isICMPFrom(tg.dst, tg.id))), len(tg.replies))
	}

	del(l.MiddleboxServerIf[0])
	err := r.wait(t, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "every monitored interface has disappeared") {
		t.Errorf("Run returned %v, want an error saying every interface disappeared", err)
	}
	if !strings.Contains(r.log.String(), "interface "+l.MiddleboxServerIf[0]+" disappeared") {
		t.Errorf("log does not mention %s:\n%s", l.MiddleboxServerIf[0], r.log)
	}
	checkNoBPFFds(t)
	t.Logf("log:\n%s", r.log)
}

// TestLabKill9LeavesNothing: a monitor process killed with SIGKILL leaves
// no hook behind, since TCX and XDP links die with their last fd.
func TestLabKill9LeavesNothing(t *testing.T) {
	l := sharedLab(t)
	ifname := l.MiddleboxServerIf[1]
	for _, tc := range []struct {
		name    string
		args    []string
		disable string // RTTSCOPE_DISABLE of the subprocess
	}{
		{"tcx", nil, ""},
		{"xdp", []string{"-I", "xdp"}, ""},
		{"clsact", nil, string(kernel.TCX)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clsact := tc.disable == string(kernel.TCX) || !kernel.Has(kernel.TCX)
			args := append([]string{"monitor", "--netns", l.Middlebox.Name, "-i", ifname, "-C"}, tc.args...)
			cmd := exec.Command(binPath, args...)
			// Adds to what the test process has disabled, if anything.
			cmd.Env = append(os.Environ(), kernel.DisableEnv+"="+os.Getenv(kernel.DisableEnv)+","+tc.disable)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout = io.Discard
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			defer func() {
				if !killed {
					_ = cmd.Process.Kill()
					_ = cmd.Wait() // killed: an error is expected
				}
			}()
			watching := make(chan string, 1)
			var logMu sync.Mutex
			var log strings.Builder
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					logMu.Lock()
					log.WriteString(sc.Text() + "\n")
					logMu.Unlock()
					if strings.Contains(sc.Text(), "watching") {
						select {
						case watching <- sc.Text():
						default:
						}
					}
				}
			}()
			select {
			case line := <-watching:
				t.Logf("subprocess: %s", line)
			// Generous: under qemu's TCG on a loaded host, loading and
			// verifying every program has taken longer than 20 s.
			case <-time.After(90 * time.Second):
				logMu.Lock()
				defer logMu.Unlock()
				t.Fatalf("no \"watching\" line within 90s; stderr:\n%s", log.String())
			}
			h := hooksOn(t, l.Middlebox, ifname)
			switch {
			case clsact && (!h.clsact || len(h.filters) == 0 || h.tcxEgress+h.tcxIngress != 0):
				t.Fatalf("while the monitor runs: %v, want clsact filters", h)
			case !clsact && (h.tcxEgress != 1 || (h.tcxIngress != 1 && h.xdpProg == 0)):
				t.Fatalf("while the monitor runs: %v", h)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
			err = cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("subprocess did not die of SIGKILL: %v", err)
			}
			if clsact {
				dirs := []string{"ingress", "egress"}
				if tc.name == "xdp" {
					dirs = dirs[1:] // ingress was an XDP link
				}
				removeLeftFilters(t, l.Middlebox.Name, ifname, dirs)
			}
			waitHooksGone(t, l.Middlebox, ifname, 3*time.Second)
		})
	}
}

// removeLeftFilters checks that a killed monitor left its clsact filters
// (which, unlike links, outlive the process) and removes them with the
// commands the README gives, then the clsact qdisc it created.
func removeLeftFilters(t *testing.T, netns, ifname string, dirs []string) {
	t.Helper()
	for _, dir := range dirs {
		show, err := exec.Command("ip", "netns", "exec", netns, "tc", "filter", "show", "dev", ifname, dir).CombinedOutput()
		if err != nil || !strings.Contains(string(show), "rttscope_") {
			t.Errorf("after kill -9, %s filter show: %v, %q: want rttscope's filter left", dir, err, show)
		}
		if out, err := exec.Command("ip", "netns", "exec", netns, "tc", "filter", "del", "dev", ifname, dir, "prio", "49374").CombinedOutput(); err != nil {
			t.Errorf("the README's command failed: %v: %s", err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", netns, "tc", "qdisc", "del", "dev", ifname, "clsact").CombinedOutput(); err != nil {
		t.Errorf("remove the clsact qdisc: %v: %s", err, out)
	}
}
