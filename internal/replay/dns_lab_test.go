package replay_test

// The DNS source against a real server and a real resolver client: dnsmasq
// in the lab's server namespace, dig on the client, the live monitor and a
// capture on the middlebox; then the capture replayed, and tshark's
// dns.time of the same capture as the oracle.

import (
	"context"
	"fmt"
	"math"
	"net/netip"
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
)

// dnsQuery is one dig run and the samples it must give.
type dnsQuery struct {
	args []string // after @server
	want []string // "udp|tcp QTYPE RCODE [TC] NAME" of each sample, in order
}

var dnsQueries = []dnsQuery{
	{[]string{"a.lab", "A"}, []string{"udp A NOERROR a.lab."}},
	{[]string{"a.lab", "AAAA"}, []string{"udp AAAA NOERROR a.lab."}},
	{[]string{"nx.lab", "A"}, []string{"udp A NXDOMAIN nx.lab."}},
	{[]string{"+tcp", "a.lab", "A"}, []string{"tcp A NOERROR a.lab."}},
	// 800 bytes of TXT without EDNS: truncated over UDP, then over TCP.
	{[]string{"+noedns", "big.lab", "TXT"}, []string{"udp TXT NOERROR TC big.lab.", "tcp TXT NOERROR big.lab."}},
}

// TestLabDNS: dig queries a dnsmasq server through the middlebox over a
// 20 ms path, over IPv4 and IPv6, UDP and TCP (explicitly, and after a
// truncated answer). The monitor on the middlebox gives one dns sample per
// exchange with the question's type, the rcode, the TC bit and (with
// --dns-names) the name, none shorter than the configured RTT (less the
// delay lines' early-release margin, lab.ShortestRoundTrip; their
// median is logged beside the median ICMP echo sample of a ping right
// before: the lab's delay line is a user-space process, which a loaded
// machine delays by several ms, so it is not asserted); the replay of the
// capture gives the same samples (RTT within 1 ms, a few within 10 ms, 25 ms under emulation: checkLiveReplay; exactly the same
// details); tshark's dns.time equals the replay's RTT of every response to
// the microsecond, and each finds the same responses; with --dns-names
// the names equal tshark's dns.qry.name.
func TestLabDNS(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTools(t, "dnsmasq", "dig", "tcpdump", "tshark")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const rtt = 20 * time.Millisecond
	l := labFor(ctx, t, "rtt-dns", lab.PathSpec{DelayToServer: rtt / 2, DelayToClient: rtt / 2})
	dir := t.TempDir()
	servers := []netip.Addr{l.ServerAddr4[0], l.ServerAddr6[0]}
	startDnsmasq(t, l.Servers[0], dir, servers)

	ifname := l.MiddleboxServerIf[0]
	pcap := filepath.Join(dir, "dns.pcap")
	stopCapture := startCapture(t, l.Middlebox, "-i", ifname, "-w", pcap, "port 53 or icmp or icmp6")

	cfg := loader.DefaultConfig()
	cfg.TrackTCP, cfg.TrackDNS, cfg.TrackICMP, cfg.RateLimit = false, true, true, 0
	cfg.DNSNames = true
	live, stopMon := startLiveMonitor(ctx, t, l, ifname, cfg)

	// The path's RTT as the monitor sees it (ICMP echo, the same vantage
	// point), then the queries, one after the other.
	pingServer(ctx, t, l)
	var want []string
	for _, srv := range servers {
		for _, q := range dnsQueries {
			args := append([]string{"@" + srv.String(), "+tries=1", "+time=3", "+noall", "+comments"}, q.args...)
			out, err := l.Client.Command(ctx, "dig", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("dig %v: %v\n%s", args, err, out)
			}
			want = append(want, q.want...)
		}
	}
	time.Sleep(200 * time.Millisecond)
	stopMon()
	if dropped := stopCapture(); dropped > 0 {
		t.Logf("capture lost %d packets", dropped)
	}

	liveDNS := dnsSamples(live.rtts)
	if got := describeDNS(liveDNS); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("live dns samples:\n got %q\nwant %q", got, want)
	}
	var rtts, icmp []time.Duration
	for _, e := range liveDNS {
		rtts = append(rtts, e.RTT)
		if e.RTT < lab.ShortestRoundTrip(rtt) {
			t.Errorf("dns sample %v shorter than the path's %v allows (%v): %+v", e.RTT, rtt, lab.ShortestRoundTrip(rtt), e)
		}
	}
	for _, e := range live.rtts {
		if e.Source == events.SourceICMP {
			icmp = append(icmp, e.RTT)
		}
	}
	if len(rtts) > 0 && len(icmp) > 0 {
		// dnsmasq answers from memory: its samples are the path's RTT.
		med, ref := stats.Median(rtts), stats.Median(icmp)
		t.Logf("%d dns samples live, median %v; ICMP echo median %v (%d samples); path configured %v", len(rtts), med, ref, len(icmp), rtt)
	} else {
		t.Errorf("%d dns and %d ICMP samples live", len(rtts), len(icmp))
	}

	// The capture, replayed, and tshark's view of it.
	rep, _ := replayRTTs(t, replay.Options{Path: pcap, BPF: cfg, Direction: replay.DirectionRules{LocalNets: clientNets(l)}})
	repDNS := dnsSamples(rep)
	if got := describeDNS(repDNS); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("replayed dns samples:\n got %q\nwant %q", got, want)
	}
	if len(repDNS) == len(liveDNS) {
		t.Logf("|live - replay| %v", checkLiveReplay(t, "dns", liveDNS, repDNS))
	}
	tsharkDNS(t, pcap, repDNS)
}

// startDnsmasq runs dnsmasq on node, authoritative for .lab (a.lab has an
// A and an AAAA record, big.lab 800 bytes of TXT, other names are
// NXDOMAIN), until the
// test ends, and waits until it answers.
func startDnsmasq(t *testing.T, node *lab.Node, dir string, addrs []netip.Addr) {
	t.Helper()
	txt := strings.Repeat("x", 200)
	args := []string{"--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--no-poll",
		"--bind-interfaces", "--user=root", "--group=root", "--pid-file=" + filepath.Join(dir, "dnsmasq.pid"),
		"--local=/lab/", "--address=/a.lab/10.9.9.9", "--address=/a.lab/fd00::99", fmt.Sprintf("--txt-record=big.lab,%s,%s,%s,%s", txt, txt, txt, txt)}
	for _, a := range addrs {
		args = append(args, "--listen-address="+a.String())
	}
	cmd := node.Command(context.Background(), "dnsmasq", args...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("dnsmasq: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for i := 0; ; i++ {
		out, err := node.Command(context.Background(), "dig", "@"+addrs[0].String(), "+tries=1", "+time=1", "+short", "a.lab", "A").Output()
		if err == nil && strings.TrimSpace(string(out)) == "10.9.9.9" {
			return
		}
		if i == 50 {
			t.Fatalf("dnsmasq does not answer: %v %q\n%s", err, out, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dnsSamples(rtts []events.RTT) []events.RTT {
	var out []events.RTT
	for _, e := range rtts {
		if e.Source == events.SourceDNS {
			out = append(out, e)
		}
	}
	return out
}

// describeDNS renders samples as dnsQuery.want does.
func describeDNS(rtts []events.RTT) []string {
	var out []string
	for _, e := range rtts {
		s := "udp "
		if e.Flow.Proto == events.ProtoTCP {
			s = "tcp "
		}
		s += string(e.DNS.AppendQType(nil)) + " " + string(e.DNS.AppendRCode(nil))
		if e.DNS.Truncated {
			s += " TC"
		}
		out = append(out, s+" "+e.DNS.Name)
	}
	return out
}

// tsharkDNS compares tshark's dns.time with the replay's DNS samples: the
// same responses (by capture time), the same RTTs to the microsecond, the
// same question names.
func tsharkDNS(t *testing.T, pcap string, rep []events.RTT) {
	t.Helper()
	out, err := exec.Command("tshark", "-r", pcap, "-n", "-Y", "dns.flags.response == 1 && dns.time", "-T", "fields",
		"-e", "frame.time_epoch", "-e", "dns.time", "-e", "dns.qry.name").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	byTime := map[int64]events.RTT{}
	for _, e := range rep {
		byTime[e.Time] = e
	}
	var n int
	var worst int64
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("tshark line %q", line)
		}
		ts, err := parseEpoch(f[0])
		if err != nil {
			t.Fatal(err)
		}
		secs, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := byTime[ts]
		if !ok {
			t.Errorf("tshark: response at %d (dns.time %s s), no replay sample", ts, f[1])
			continue
		}
		n++
		d := int64(math.Abs(float64(e.RTT) - secs*1e9))
		worst = max(worst, d)
		if d > 1000 {
			t.Errorf("response at %d: tshark %s s, replay %v", ts, f[1], e.RTT)
		}
		if e.DNS.Name != f[2]+"." {
			t.Errorf("response at %d: tshark's name %q, the replay's %q", ts, f[2], e.DNS.Name)
		}
	}
	if n != len(rep) {
		t.Errorf("tshark found %d answered queries, the replay %d dns samples", n, len(rep))
	}
	t.Logf("%d responses: tshark's dns.time and the replay agree within %d ns", n, worst)
}
