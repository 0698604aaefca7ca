package monitor

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/stats"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// The shared lab: two paths of 40 ms and 100 ms round trip, used by every
// test that does not change the topology.
var (
	sharedOnce sync.Once
	shared     *lab.Lab
	sharedErr  error
	sharedRTT  = []time.Duration{40 * time.Millisecond, 100 * time.Millisecond}
)

func sharedLab(t *testing.T) *lab.Lab {
	t.Helper()
	testutil.RequireRoot(t)
	sharedOnce.Do(func() {
		var paths []lab.PathSpec
		for _, rtt := range sharedRTT {
			paths = append(paths, lab.PathSpec{DelayToServer: rtt / 2, DelayToClient: rtt / 2})
		}
		shared, sharedErr = newLab(paths)
	})
	if sharedErr != nil {
		t.Fatalf("build shared lab: %v", sharedErr)
	}
	return shared
}

func closeSharedLab() {
	if shared != nil {
		if err := shared.Close(); err != nil {
			fmt.Printf("close shared lab: %v\n", err)
		}
	}
}

func newLab(paths []lab.PathSpec) (*lab.Lab, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return lab.New(ctx, lab.Config{Prefix: "rtt-mon", Paths: paths})
}

// ownLab builds a lab that belongs to one test.
func ownLab(t *testing.T, paths ...lab.PathSpec) *lab.Lab {
	t.Helper()
	testutil.RequireRoot(t)
	l, err := newLab(paths)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
	})
	return l
}

// bpfConfig returns the defaults with the given protocols and rate limit.
func bpfConfig(tcp, icmp bool, rateLimit time.Duration) loader.Config {
	c := loader.DefaultConfig()
	c.TrackTCP, c.TrackICMP, c.RateLimit = tcp, icmp, rateLimit
	return c
}

// isICMPFrom selects the ICMP echo samples completed by a reply from src
// with echo identifier id (which stands in for both ports).
func isICMPFrom(src netip.Addr, id uint16) func(*events.RTT) bool {
	return func(e *events.RTT) bool {
		return (e.Flow.Proto == events.ProtoICMP || e.Flow.Proto == events.ProtoICMPv6) &&
			e.Flow.Src.IP == src && e.Flow.Src.Port == id
	}
}

// isTCPFrom selects TCP samples completed by a packet from src.
func isTCPFrom(src netip.Addr) func(*events.RTT) bool {
	return func(e *events.RTT) bool { return e.Flow.Proto == events.ProtoTCP && e.Flow.Src.IP == src }
}

// pingPair is a pinger reply and the monitor sample of the same echo.
type pingPair struct {
	ping traffic.PingReply
	ev   events.RTT
}

// pairByReplyTime pairs monitor samples with pinger replies. Samples carry
// no sequence number, but each carries the time the reply passed the
// middlebox, which precedes the pinger's kernel receive time by only the
// client-middlebox leg (tens of µs), while consecutive replies are a ping
// interval apart. So the pairs are the closest (sample, reply) couples,
// taken greedily from the closest, each used once and none further apart
// than window (less than half the ping interval). This copes with lost
// requests, lost replies and samples the monitor missed, without relying
// on the order of anything.
func pairByReplyTime(evs []events.RTT, pings []traffic.PingReply, window time.Duration) (pairs []pingPair, lonelyEv []events.RTT, lonelyPing []traffic.PingReply) {
	type cand struct {
		e, p int
		dt   time.Duration
	}
	var cands []cand
	for i := range evs {
		for j := range pings {
			dt := time.Duration(pings[j].RecvAt.UnixNano() - evs[i].Time)
			if dt < 0 {
				dt = -dt
			}
			if dt <= window {
				cands = append(cands, cand{i, j, dt})
			}
		}
	}
	sort.Slice(cands, func(a, b int) bool { return cands[a].dt < cands[b].dt })
	usedE := make([]bool, len(evs))
	usedP := make([]bool, len(pings))
	for _, c := range cands {
		if usedE[c.e] || usedP[c.p] {
			continue
		}
		usedE[c.e], usedP[c.p] = true, true
		pairs = append(pairs, pingPair{ping: pings[c.p], ev: evs[c.e]})
	}
	for i, u := range usedE {
		if !u {
			lonelyEv = append(lonelyEv, evs[i])
		}
	}
	for j, u := range usedP {
		if !u {
			lonelyPing = append(lonelyPing, pings[j])
		}
	}
	sort.Slice(pairs, func(a, b int) bool { return pairs[a].ping.Seq < pairs[b].ping.Seq })
	return pairs, lonelyEv, lonelyPing
}

func pingRTTs(rs []traffic.PingReply) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.RTT
	}
	return out
}

func sampleRTTs(evs []events.RTT) []time.Duration {
	out := make([]time.Duration, len(evs))
	for i, e := range evs {
		out[i] = e.RTT
	}
	return out
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// pingTarget is one pinger run from the client.
type pingTarget struct {
	dst     netip.Addr
	id      uint16
	replies []traffic.PingReply
	err     error
}

// pingAll runs the pingers concurrently from the client.
func pingAll(l *lab.Lab, targets []*pingTarget, count int, interval time.Duration) {
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(count)*interval+10*time.Second)
			defer cancel()
			tg.replies, tg.err = traffic.PingWith(ctx, l.Client, tg.dst, traffic.PingOptions{Count: count, Interval: interval, ID: tg.id})
		})
	}
	wg.Wait()
}

// checkPingPairs checks every monitor sample of tg against the pinger and
// returns the absolute differences.
//
// The pinger's RTT runs from a user-space clock reading taken just before
// sendto to the kernel's receive timestamp of the reply, so on a busy host
// it occasionally includes a scheduling delay (the sending goroutine
// preempted before the syscall, the client's softirq late) that no
// observer on the wire can see. The monitor's sample tells when the
// request left the middlebox (reply time - RTT) and when the reply came
// back, so each pair splits into the client's send leg (SentAt → request at
// the middlebox) and receive leg (reply at the middlebox → RecvAt), both
// tens of µs normally. A pair off by more than tol where the monitor's RTT
// is the smaller, a client leg is abnormally long (> tol/2) and neither leg
// is negative (the middlebox's times are causally consistent with the
// client's) is the pinger's delay: it is logged and excused, at most
// maxExcused per target. A wrong monitor timestamp would instead show as a
// negative leg or as the same excess on every echo. Every other pair must
// agree within tol.
func checkPingPairs(t *testing.T, tg *pingTarget, evs []events.RTT, count int, interval, tol time.Duration) []time.Duration {
	t.Helper()
	const (
		maxExcused = 2
		clockSlack = 50 * time.Microsecond // mono→wall mapping, timestamp points
	)
	if tg.err != nil {
		t.Errorf("ping %s: %v", tg.dst, tg.err)
		return nil
	}
	if len(tg.replies) < count*2/3 {
		t.Errorf("ping %s: only %d of %d replies", tg.dst, len(tg.replies), count)
	}
	pairs, lonelyEv, lonelyPing := pairByReplyTime(evs, tg.replies, interval/4)
	var diffs []time.Duration
	excused := 0
	for _, p := range pairs {
		d := p.ev.RTT - p.ping.RTT
		sendLeg := time.Duration(p.ev.Time-int64(p.ev.RTT)) - time.Duration(p.ping.SentAt.UnixNano())
		recvLeg := time.Duration(p.ping.RecvAt.UnixNano() - p.ev.Time)
		if sendLeg < -clockSlack || recvLeg < -clockSlack {
			t.Errorf("%s id %#x seq %d: monitor times inconsistent with the pinger's: client send leg %s, receive leg %s (monitor %s, pinger %s)",
				tg.dst, tg.id, p.ping.Seq, ms(sendLeg), ms(recvLeg), ms(p.ev.RTT), ms(p.ping.RTT))
		}
		if absDur(d) > tol && d < 0 && max(sendLeg, recvLeg) > tol/2 && excused < maxExcused {
			excused++
			t.Logf("%s id %#x seq %d: pinger RTT %s includes a client-side delay (send leg %s, receive leg %s; monitor %s): excused",
				tg.dst, tg.id, p.ping.Seq, ms(p.ping.RTT), ms(sendLeg), ms(recvLeg), ms(p.ev.RTT))
			continue
		}
		diffs = append(diffs, absDur(d))
		if absDur(d) > tol {
			t.Errorf("%s id %#x seq %d: monitor %s, pinger %s (diff %s > %s; client send leg %s, receive leg %s)",
				tg.dst, tg.id, p.ping.Seq, ms(p.ev.RTT), ms(p.ping.RTT), ms(d), ms(tol), ms(sendLeg), ms(recvLeg))
		}
	}
	// A sample without a pinger reply means the reply got lost between the
	// middlebox and the client's socket; a reply without a sample means
	// the monitor missed it. With RateLimit 0 neither should happen here.
	for _, e := range lonelyEv {
		t.Errorf("%s id %#x: monitor sample %s at %s has no pinger reply within %v", tg.dst, tg.id, ms(e.RTT), time.Unix(0, e.Time).Format("15:04:05.000000"), interval/4)
	}
	for _, p := range lonelyPing {
		t.Errorf("%s id %#x seq %d: pinger RTT %s but no monitor sample", tg.dst, tg.id, p.Seq, ms(p.RTT))
	}
	return diffs
}

// hooks describes what is attached to an interface inside a namespace.
type hooks struct {
	tcxIngress, tcxEgress int
	xdpProg               uint32
	clsact                bool
	filters               []string
}

func (h hooks) empty() bool {
	return h.tcxIngress == 0 && h.tcxEgress == 0 && h.xdpProg == 0 && !h.clsact && len(h.filters) == 0
}

func (h hooks) String() string {
	return fmt.Sprintf("tcx ingress %d, tcx egress %d, xdp prog %d, clsact %v, filters %v", h.tcxIngress, h.tcxEgress, h.xdpProg, h.clsact, h.filters)
}

// hooksOn inspects ifname in node through netlink and BPF_PROG_QUERY.
func hooksOn(t *testing.T, node *lab.Node, ifname string) hooks {
	t.Helper()
	var h hooks
	err := node.Do(func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		idx := l.Attrs().Index
		for _, q := range []struct {
			at ebpf.AttachType
			n  *int
		}{{ebpf.AttachTCXIngress, &h.tcxIngress}, {ebpf.AttachTCXEgress, &h.tcxEgress}} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: idx, Attach: q.at})
			if err != nil && !kernel.Has(kernel.TCX) {
				continue // 6.1 answers EINVAL: no TCX, nothing attached that way
			}
			if err != nil {
				return fmt.Errorf("query %v: %w", q.at, err)
			}
			*q.n = len(res.Programs)
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			h.xdpProg = x.ProgId
		}
		qds, err := netlink.QdiscList(l)
		if err != nil {
			return err
		}
		for _, q := range qds {
			if q.Type() == "clsact" {
				h.clsact = true
			}
		}
		if h.clsact {
			for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
				fs, err := netlink.FilterList(l, parent)
				if err != nil {
					return err
				}
				for _, f := range fs {
					name := f.Type()
					if bf, ok := f.(*netlink.BpfFilter); ok {
						name += " " + bf.Name
					}
					h.filters = append(h.filters, fmt.Sprintf("%s prio %d", name, f.Attrs().Priority))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inspect %s in %s: %v", ifname, node.Name, err)
	}
	return h
}

// waitHooksGone polls until nothing is attached to ifname (detaching after
// a process died may take a moment) and reports what is left otherwise.
func waitHooksGone(t *testing.T, node *lab.Node, ifname string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		h := hooksOn(t, node, ifname)
		if h.empty() {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s still has hooks %v after %v", ifname, h, d)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pairTolerance is tol, or 25 ms under emulation (scripts/vmtest.sh sets
// RTTSCOPE_VM): TCG adds milliseconds of noise to every timer and wake-up,
// and there these tests check which hooks and fallbacks work, not accuracy.
func pairTolerance(tol time.Duration) time.Duration {
	if os.Getenv("RTTSCOPE_VM") != "" {
		return 25 * time.Millisecond
	}
	return tol
}

// waitFor polls cond every 20 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// fmtStats renders a few figures of a difference distribution.
func fmtStats(d []time.Duration) string {
	if len(d) == 0 {
		return "n=0"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("n=%d median %s p90 %s max %s", len(s), ms(stats.Median(s)), ms(s[int(math.Ceil(0.9*float64(len(s))))-1]), ms(s[len(s)-1]))
}
