package pdm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/testutil"
)

// Lab test: client and server namespaces both run rttscope pdm across a
// middlebox with a user-space delay line (10 ms toward the server, 5 ms
// back); the server application holds each request 2 ms. Captures at the
// client, the middlebox and the server, decoded by tshark, must show
// well-formed PDM in every packet with PSNs that follow RFC 8250, and PDM
// delays that agree within 0.5 ms with the delays the captures show: the
// server's hold between its capture's request and reply, the client's
// round trip between its capture's request and reply. (The delay line adds
// 15 ms plus up to 2 ms of jitter on a busy machine, and the applications'
// own clocks are later still: the captures are the known delays of each
// packet.)
const (
	labToServer     = 10 * time.Millisecond
	labToClient     = 5 * time.Millisecond
	labHold         = 2 * time.Millisecond
	labTolerance    = 500 * time.Microsecond
	labRequests     = 20
	labPort         = 7007
	labPings        = 5
	labTCPExchanges = 10
)

func TestLabTshark(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTools(t, "tshark", "tcpdump")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := pdmLab(ctx, t, lab.Config{Prefix: "rspdm", Paths: []lab.PathSpec{{DelayToServer: labToServer, DelayToClient: labToClient}}, ForceUserspaceDelay: true})
	srv, cli := l.Servers[0], l.Client

	dir := t.TempDir()
	pcaps := map[string]string{}
	for _, c := range []struct {
		name, ifname string
		node         *lab.Node
	}{{"client", lab.ClientIf, cli}, {"middlebox", l.MiddleboxClientIf, l.Middlebox}, {"server", lab.ServerIf, srv}} {
		pcaps[c.name] = filepath.Join(dir, c.name+".pcap")
		dump := c.node.Command(ctx, "tcpdump", "-n", "-U", "-i", c.ifname, "-w", pcaps[c.name], "ip6")
		stderr, _ := dump.StderrPipe()
		if err := dump.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = dump.Process.Kill(); _ = dump.Wait() }()
		waitListening(t, stderr)
		t.Cleanup(func() { _ = dump.Process.Signal(syscall.SIGINT); _ = dump.Wait() })
	}

	// rttscope pdm on both ends, and --passive on the middlebox (facing
	// the client).
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runs := []struct {
		node    *lab.Node
		ifname  string
		passive bool
	}{{cli, lab.ClientIf, false}, {srv, lab.ServerIf, false}, {l.Middlebox, l.MiddleboxClientIf, true}}
	outs := make([]*bytes.Buffer, len(runs))
	logs := make([]*bytes.Buffer, len(runs)) // attach modes, counters at exit
	errs := make([]error, len(runs))
	ready := make(chan struct{}, len(runs))
	for i, r := range runs {
		outs[i], logs[i] = new(bytes.Buffer), new(bytes.Buffer)
		w, _ := format.New("jsonl", outs[i], format.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Run(runCtx, Options{Interfaces: []string{r.ifname}, Netns: r.node.Name, Output: w, Log: logs[i],
				Ready:  func() { ready <- struct{}{} },
				Config: Config{MapSize: DefaultMapSize, Lifetime: DefaultLifetime, Passive: r.passive}})
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

	exchange(t, cli, srv, netip.AddrPortFrom(l.ServerAddr6[0], labPort))
	exchangeTCP(t, cli, srv, netip.AddrPortFrom(l.ServerAddr6[0], labPort+1))
	// ICMPv6 echo: the server's kernel answers, its egress adds PDM.
	if out, err := cli.Command(ctx, "ping", "-6", "-n", "-c", strconv.Itoa(labPings), "-i", "0.1", l.ServerAddr6[0].String()).CombinedOutput(); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rttscope pdm (%d): %v", i, err)
		}
	}
	t.Logf("client: %s", logs[0])
	t.Logf("server: %s", logs[1])
	t.Logf("middlebox: %s", logs[2])
	time.Sleep(200 * time.Millisecond) // tcpdump -U has written everything

	client := l.ClientAddr6.String()
	caps := map[string][]pdmPkt{}
	for name, file := range pcaps {
		caps[name] = readCapture(t, file, "udp", 2*labRequests)
		checkPSNs(t, name, caps[name], client)
		pings := readCapture(t, file, "icmpv6.type == 128 || icmpv6.type == 129", 2*labPings)
		checkPSNs(t, name+" (ping)", pings, client)
		checkPSNsTCP(t, name+" (TCP)", readCapture(t, file, "tcp", -1))
	}
	checkDelays(t, caps["client"], caps["server"])
	checkRecords(t, outs[0].Bytes(), caps["client"], caps["server"])
	checkPassive(t, outs[2].Bytes(), caps["client"], caps["server"])
	checkReadMatchesLive(t, pcaps["middlebox"], outs[2].Bytes(), l.ServerAddr6[0])
}

// checkReadMatchesLive: --read of the capture taken where --passive ran
// gives the records --passive gave live, field for field but for the
// time (capture time against the hook's) and the interface index. The
// server's packets leave the middlebox's client-facing interface: egress.
func checkReadMatchesLive(t *testing.T, pcap string, live []byte, server netip.Addr) {
	t.Helper()
	got, _ := readRecords(t, ReadOptions{Path: pcap, LocalNets: []netip.Prefix{netip.PrefixFrom(server, 128)}})
	var want []Record
	for _, line := range bytes.Split(bytes.TrimSpace(live), []byte("\n")) {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("passive record %q: %v", line, err)
		}
		r.Type = ""
		want = append(want, r)
	}
	var skew time.Duration
	for i := range want {
		want[i].Ifindex = 0
		if i < len(got) {
			skew = max(skew, time.Duration(got[i].Timestamp-want[i].Timestamp).Abs())
			got[i].Timestamp = want[i].Timestamp
		}
	}
	t.Logf("--read: %d records as live; capture time vs hook time: at most %v apart", len(got), skew)
	if len(want) < 2*labRequests {
		t.Fatalf("%d live passive records, want at least %d", len(want), 2*labRequests)
	}
	sameRecords(t, "--read of the middlebox capture vs --passive live", got, want)
}

// exchange runs labRequests UDP request/response pairs; the server holds
// each request labHold.
func exchange(t *testing.T, cli, srv *lab.Node, to netip.AddrPort) {
	t.Helper()
	var serverConn, clientConn *net.UDPConn
	if err := srv.Do(func() (err error) {
		serverConn, err = net.ListenUDP("udp6", net.UDPAddrFromAddrPort(to))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer serverConn.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := serverConn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			time.Sleep(labHold)
			_, _ = serverConn.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	if err := cli.Do(func() (err error) {
		clientConn, err = net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(to))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer clientConn.Close()
	buf := make([]byte, 2048)
	for i := range labRequests {
		if _, err := fmt.Fprintf(clientConn, "request %d", i); err != nil {
			t.Fatal(err)
		}
		_ = clientConn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := clientConn.Read(buf); err != nil {
			t.Fatalf("request %d: no reply: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitListening(t *testing.T, r io.Reader) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "listening on") {
			go func() {
				for sc.Scan() {
				}
			}()
			return
		}
	}
	t.Fatal("tcpdump did not start")
}

type pdmPkt struct {
	time         time.Duration // capture time (since the epoch)
	src          string
	psntp, psnlr int
	dtlr, dtls   time.Duration
}

// readCapture decodes the packets of a capture that filter (a tshark
// display filter) selects; there must be want of them (any number when
// want < 0), and every one must carry a PDM option that tshark does not call malformed.
func readCapture(t *testing.T, pcap, filter string, want int) []pdmPkt {
	t.Helper()
	out, err := exec.Command("tshark", "-r", pcap, "-Y", filter, "-T", "fields", "-E", "separator=,",
		"-e", "frame.time_epoch", "-e", "ipv6.src", "-e", "ipv6.opt.pdm.scale_dtlr", "-e", "ipv6.opt.pdm.scale_dtls",
		"-e", "ipv6.opt.pdm.psn_this_pkt", "-e", "ipv6.opt.pdm.psn_last_recv",
		"-e", "ipv6.opt.pdm.delta_last_recv", "-e", "ipv6.opt.pdm.delta_last_sent", "-e", "_ws.malformed").Output()
	if err != nil {
		t.Fatalf("tshark %s: %v", pcap, err)
	}
	var pkts []pdmPkt
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 9 || f[4] == "" {
			t.Fatalf("%s: packet without PDM (or not decoded): %q; all:\n%s", pcap, line, out)
		}
		if f[8] != "" {
			t.Fatalf("%s: tshark marks a packet malformed: %q", pcap, line)
		}
		ts, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("time of %q: %v", line, err)
		}
		n := make([]int, 6)
		for i := range n {
			v, err := strconv.ParseUint(f[2+i], 0, 64)
			if err != nil {
				t.Fatalf("field %d of %q: %v", i+2, line, err)
			}
			n[i] = int(v)
		}
		pkts = append(pkts, pdmPkt{time: time.Duration(ts * 1e9), src: f[1], psntp: n[2], psnlr: n[3],
			dtlr: Decode(uint16(n[4]), uint8(n[0])), dtls: Decode(uint16(n[5]), uint8(n[1]))})
	}
	if want >= 0 && len(pkts) != want {
		t.Fatalf("%s: %d PDM packets (%s) captured, want %d", pcap, len(pkts), filter, want)
	}
	return pkts
}

// checkPSNs: per direction PSNTP +1 per packet; PSNLR = the PSNTP of the
// last packet the sender received (the previous one in the other
// direction, in this strict ping-pong); the client's first has none.
func checkPSNs(t *testing.T, where string, pkts []pdmPkt, client string) {
	t.Helper()
	last := map[string]int{}
	for i, p := range pkts {
		if want := client; (i%2 == 0) != (p.src == want) {
			t.Fatalf("%s: packet %d from %s breaks the request/reply order", where, i, p.src)
		}
		if prev, ok := last[p.src]; ok && p.psntp != (prev+1)&0xffff {
			t.Errorf("%s: packet %d: PSNTP %d after %d", where, i, p.psntp, prev)
		}
		last[p.src] = p.psntp
		if i == 0 {
			if p.psnlr != 0 || p.dtlr != 0 || p.dtls != 0 {
				t.Errorf("%s: first packet %+v: want PSNLR, DTLR, DTLS 0", where, p)
			}
			continue
		}
		if want := pkts[i-1].psntp; p.psnlr != want {
			t.Errorf("%s: packet %d: PSNLR %d, want %d", where, i, p.psnlr, want)
		}
	}
}

func near(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if d := got - want; d < -labTolerance || d > labTolerance {
		t.Errorf("%s = %v, want %v ± %v", what, got, want, labTolerance)
	}
}

// checkDelays: the server's DTLR in reply i is its hold as its capture
// shows it; the client's DTLS in request i+1 is its round trip i as its
// capture shows it; their difference is at least the path's delay.
func checkDelays(t *testing.T, cli, srv []pdmPkt) {
	t.Helper()
	for i := range labRequests {
		hold := srv[2*i+1].time - srv[2*i].time
		near(t, fmt.Sprintf("server DTLR of reply %d", i), cli[2*i+1].dtlr, hold)
		if i+1 < labRequests {
			rt := cli[2*i+1].time - cli[2*i].time
			near(t, fmt.Sprintf("client DTLS after reply %d", i), cli[2*i+2].dtls, rt)
			if d := cli[2*i+2].dtls - cli[2*i+1].dtlr; d < labToServer+labToClient-labTolerance {
				t.Errorf("request %d: DTLS - DTLR = %v, below the path's %v", i+1, d, labToServer+labToClient)
			}
		}
	}
	t.Logf("reply 0: server hold %v, DTLR %v; client round trip %v, DTLS %v",
		srv[1].time-srv[0].time, cli[1].dtlr, cli[1].time-cli[0].time, cli[2].dtls)
}

// checkRecords: the client's records give, per reply, its round trip and
// the network RTT (round trip - the server's DTLR), as the captures do.
func checkRecords(t *testing.T, jsonl []byte, cli, srv []pdmPkt) {
	t.Helper()
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		if r.Protocol != "UDP" {
			continue // the pings
		}
		if n == labRequests {
			t.Fatalf("more records than replies: %s", line)
		}
		if r.RoundTrip == nil || r.NetworkRTT == nil {
			t.Fatalf("record without round_trip or network_rtt: %s", line)
		}
		rt := cli[2*n+1].time - cli[2*n].time
		hold := srv[2*n+1].time - srv[2*n].time
		near(t, fmt.Sprintf("round_trip of reply %d", n), time.Duration(*r.RoundTrip), rt)
		near(t, fmt.Sprintf("network_rtt of reply %d", n), time.Duration(*r.NetworkRTT), rt-hold)
		n++
	}
	if n != labRequests {
		t.Errorf("%d client records, want %d", n, labRequests)
	}
}

// checkPassive: the middlebox, decoding only, pairs each client request
// with the reply its PSNLR names: network_rtt = the request's DTLS - the
// reply's DTLR, the client's round trip without the server's hold, as the
// captures show them. It changed nothing: the captures already showed
// each packet exactly once with the PDM of its sender.
func checkPassive(t *testing.T, jsonl []byte, cli, srv []pdmPkt) {
	t.Helper()
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("passive record %q: %v", line, err)
		}
		if r.Protocol != "UDP" || r.Direction != "ingress" || r.NetworkRTT == nil {
			continue
		}
		if n == labRequests-1 {
			t.Fatalf("more paired requests than there are: %s", line)
		}
		// Request n+1 carries the DTLS of round trip n.
		want := (cli[2*n+1].time - cli[2*n].time) - (srv[2*n+1].time - srv[2*n].time)
		near(t, fmt.Sprintf("passive network_rtt of round trip %d", n), time.Duration(*r.NetworkRTT), want)
		n++
	}
	if n != labRequests-1 {
		t.Errorf("%d paired requests at the middlebox, want %d", n, labRequests-1)
	}
}

// exchangeTCP runs labTCPExchanges small request/response pairs over one
// TCP connection (small segments: a full-size one cannot grow by 16 bytes
// within the MTU and leaves without PDM, see docs/pdm.md).
func exchangeTCP(t *testing.T, cli, srv *lab.Node, to netip.AddrPort) {
	t.Helper()
	var ln *net.TCPListener
	if err := srv.Do(func() (err error) {
		ln, err = net.ListenTCP("tcp6", net.TCPAddrFromAddrPort(to))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 256)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			time.Sleep(labHold)
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	var c *net.TCPConn
	if err := cli.Do(func() (err error) {
		c, err = net.DialTCP("tcp6", nil, net.TCPAddrFromAddrPort(to))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 256)
	for i := range labTCPExchanges {
		if _, err := fmt.Fprintf(c, "request %d", i); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("TCP request %d: no reply: %v", i, err)
		}
	}
}

// checkPSNsTCP: TCP is not strict ping-pong (ACKs, handshake), so: PSNTP
// +1 per packet in each direction, and each PSNLR is 0 before the sender
// has received anything, else a PSNTP the other side sent.
func checkPSNsTCP(t *testing.T, where string, pkts []pdmPkt) {
	t.Helper()
	if len(pkts) < 2*labTCPExchanges+3 {
		t.Fatalf("%s: %d TCP packets with PDM, want at least %d", where, len(pkts), 2*labTCPExchanges+3)
	}
	last := map[string]int{}
	sent := map[string]map[int]bool{}
	for i, p := range pkts {
		if prev, ok := last[p.src]; ok && p.psntp != (prev+1)&0xffff {
			t.Errorf("%s: packet %d: PSNTP %d after %d", where, i, p.psntp, prev)
		}
		last[p.src] = p.psntp
		other := false
		for src, psns := range sent {
			if src != p.src && psns[p.psnlr] {
				other = true
			}
		}
		if !other && p.psnlr != 0 {
			t.Errorf("%s: packet %d: PSNLR %d is no PSNTP of the other side", where, i, p.psnlr)
		}
		if sent[p.src] == nil {
			sent[p.src] = map[int]bool{}
		}
		sent[p.src][p.psntp] = true
	}
}
