package replay_test

// The QUIC spin bit source against a real QUIC stack that spins (aioquic):
// a client and a server in the lab, the live monitor and a capture on the
// middlebox, the capture replayed, and the spin bits tshark decodes from
// the same capture as the oracle.

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/replay"
	"github.com/rttscope/rttscope/internal/stats"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// quicStreamTime is how long each connection of TestLabQUICSpin sends: 3
// s, or 10 s under emulation (scripts/vmtest.sh sets RTTSCOPE_VM). Under
// TCG the Python endpoints stretch the spin period to ~200 ms on an idle
// host and further on a busy one, and one direction of a 3 s stream once
// ended with no sample (6.1, 2026-12-05): 10 s leaves it tens of edges.
func quicStreamTime() time.Duration {
	if os.Getenv("RTTSCOPE_VM") != "" {
		return 10 * time.Second
	}
	return 3 * time.Second
}

// TestLabQUICSpin: aioquic connections (IPv4 and IPv6) send a stream for
// 3 s each (quicStreamTime) over a 40 ms path. The monitor on the
// middlebox reports quic_spin samples in both directions of both
// connections, none shorter
// than the configured RTT (a spin period cannot be shorter than the
// path's round trip; lab.ShortestRoundTrip allows the delay lines' early
// releases); the replay of the capture gives the same samples (checkLiveReplay);
// and every replayed sample is an interval between two spin bit changes
// that tshark decodes in that direction (quic.spin_bit), at the same
// packets, to the nanosecond. How far the spin period lies above the path
// RTT is logged, not asserted: it adds each endpoint's time until it next
// sends, here a Python event loop writing every 2 ms and a receiver that
// acknowledges every second packet, which a loaded machine stretches
// (measured 4-10 ms on an idle-ish 2-vCPU VM, up to 50 ms at load
// average 20).
func TestLabQUICSpin(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTools(t, "tcpdump", "tshark")
	if err := traffic.QUICAvailable(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const rtt = 40 * time.Millisecond
	l := labFor(ctx, t, "rtt-qs", lab.PathSpec{DelayToServer: rtt / 2, DelayToClient: rtt / 2})
	const port = 443
	servers := []netip.Addr{l.ServerAddr4[0], l.ServerAddr6[0]}
	for _, a := range servers {
		stop, err := traffic.StartQUICServer(l.Servers[0], a, port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := stop(); err != nil {
				t.Errorf("QUIC server: %v", err)
			}
		})
	}
	ifname := l.MiddleboxServerIf[0]
	pcap := filepath.Join(t.TempDir(), "quic.pcap")
	stopCapture := startCapture(t, l.Middlebox, "-i", ifname, "-w", pcap, "udp port 443")

	cfg := loader.DefaultConfig()
	cfg.TrackTCP, cfg.TrackQUIC, cfg.TrackICMP, cfg.RateLimit = false, true, true, 0
	live, stopMon := startLiveMonitor(ctx, t, l, ifname, cfg)
	pingServer(ctx, t, l)
	for _, a := range servers {
		n, err := traffic.QUICBulk(ctx, l.Client, netip.AddrPortFrom(a, port), quicStreamTime())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("QUIC to %s: %d bytes", a, n)
	}
	time.Sleep(200 * time.Millisecond)
	stopMon()
	dropped := stopCapture()

	var icmp []time.Duration
	spin := map[events.Flow][]events.RTT{}
	for _, e := range live.rtts {
		switch e.Source {
		case events.SourceICMP:
			icmp = append(icmp, e.RTT)
		case events.SourceQUICSpin:
			spin[e.Flow] = append(spin[e.Flow], e)
		default:
			t.Errorf("sample of source %v", e.Source)
		}
	}
	if len(spin) != 4 || len(icmp) == 0 {
		t.Fatalf("quic_spin samples in %d flow directions (want 2 connections x 2), %d ICMP samples", len(spin), len(icmp))
	}
	ref := stats.Median(icmp)
	var all []time.Duration
	for f, evs := range spin {
		var d []time.Duration
		for _, e := range evs {
			d = append(d, e.RTT)
			if e.RTT < lab.ShortestRoundTrip(rtt) {
				t.Errorf("%v: sample %v shorter than the path's %v allows (%v)", f, e.RTT, rtt, lab.ShortestRoundTrip(rtt))
			}
		}
		all = append(all, d...)
		t.Logf("%s:%d -> %s:%d: %d samples, median %v", f.Src.IP, f.Src.Port, f.Dst.IP, f.Dst.Port, len(d), stats.Median(d))
		// How many spin periods fit in 3 s depends on the endpoints'
		// reaction (above): 4 per direction under qemu's emulation, where
		// it adds ~160 ms. Two samples show the source working in this
		// direction; each one is checked against tshark below.
		if len(d) < 2 {
			t.Errorf("%v: only %d samples", f, len(d))
		}
	}
	med := stats.Median(all)
	t.Logf("quic_spin median %v, ICMP echo median %v: the endpoints' reaction adds %v (path configured %v)", med, ref, med-ref, rtt)
	if dropped > 0 {
		// The live checks above stand (a failure there still fails
		// the test); the replay needs every packet.
		t.Skipf("skipped the replay and tshark checks: the capture lost %d packets (machine loaded)", dropped)
	}

	rep, sum := replayRTTs(t, replay.Options{Path: pcap, BPF: cfg, Direction: replay.DirectionRules{LocalNets: clientNets(l)}})
	repSpin := map[events.Flow][]events.RTT{}
	for _, e := range rep {
		if e.Source == events.SourceQUICSpin {
			repSpin[e.Flow] = append(repSpin[e.Flow], e)
		}
	}
	for f, evs := range spin {
		r := repSpin[f]
		if len(r) != len(evs) {
			t.Errorf("%v: %d samples live, %d replayed", f, len(evs), len(r))
			continue
		}
		t.Logf("%v: |live - replay| %v", f, checkLiveReplay(t, fmt.Sprint(f), evs, r))
	}
	tsharkSpin(t, pcap, repSpin, sum.Packets)
}

// tsharkSpin checks every replayed sample against the spin bit changes
// tshark decodes: the sample's packet changes its direction's bit, and the
// RTT is the time since an earlier change in that direction.
func tsharkSpin(t *testing.T, pcap string, rep map[events.Flow][]events.RTT, packets uint64) {
	t.Helper()
	out, err := exec.Command("tshark", "-r", pcap, "-n", "-Y", "quic.spin_bit", "-T", "fields",
		"-e", "frame.time_epoch", "-e", "ip.src", "-e", "ipv6.src", "-e", "udp.srcport", "-e", "quic.spin_bit").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	type dirKey struct {
		src  netip.Addr
		port string
	}
	changes := map[dirKey]map[int64]bool{} // times of bit changes per direction
	last := map[dirKey]string{}
	var n int
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("tshark line %q", line)
		}
		n++
		ts, err := parseEpoch(f[0])
		if err != nil {
			t.Fatal(err)
		}
		k := dirKey{netip.MustParseAddr(f[1] + f[2]), f[3]}
		bit := strings.Split(f[4], ",")[0]
		if prev, ok := last[k]; ok && prev != bit {
			if changes[k] == nil {
				changes[k] = map[int64]bool{}
			}
			changes[k][ts] = true
		}
		last[k] = bit
	}
	var checked int
	for f, evs := range rep {
		k := dirKey{f.Src.IP, strconv.Itoa(int(f.Src.Port))}
		for _, e := range evs {
			if !changes[k][e.Time] || !changes[k][e.Time-int64(e.RTT)] {
				t.Errorf("%v: sample %v at %d is not between two spin changes tshark sees", f, e.RTT, e.Time)
				continue
			}
			checked++
		}
	}
	t.Logf("tshark decoded the spin bit of %d of %d packets; %d replayed samples each span two spin changes it sees", n, packets, checked)
	if checked == 0 {
		t.Error("no sample checked against tshark")
	}
}
