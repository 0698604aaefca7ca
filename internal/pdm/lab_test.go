package pdm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/testutil"
)

// Lab test: client and server namespaces both run rttscope pdm across a
// middlebox with a user-space delay line (10 ms toward the server, 5 ms
// back); the server application holds each request 2 ms. A capture at the
// middlebox, decoded by tshark, must show well-formed PDM in every packet
// with PSNs that follow RFC 8250, and PDM delays that agree with the known
// ones within 0.5 ms.
const (
	labToServer  = 10 * time.Millisecond
	labToClient  = 5 * time.Millisecond
	labHold      = 2 * time.Millisecond
	labTolerance = 500 * time.Microsecond
	labRequests  = 20
	labPort      = 7007
)

func TestLabTshark(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"tshark", "tcpdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (scripts/setup.sh installs it): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := lab.New(ctx, lab.Config{Prefix: "rspdm", Paths: []lab.PathSpec{{DelayToServer: labToServer, DelayToClient: labToClient}}, ForceUserspaceDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
	})
	srv, cli := l.Servers[0], l.Client
	for _, n := range []*lab.Node{srv, cli} {
		if err := n.SetSysctl("net.ipv6.max_dst_opts_number", "8"); err != nil {
			t.Fatal(err)
		}
	}

	// Capture at the middlebox, facing the client.
	pcap := filepath.Join(t.TempDir(), "pdm.pcap")
	dump := l.Middlebox.Command(ctx, "tcpdump", "-n", "-U", "-i", l.MiddleboxClientIf, "-w", pcap, "ip6")
	stderr, _ := dump.StderrPipe()
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dump.Process.Kill(); _ = dump.Wait() }()
	waitListening(t, stderr)

	// rttscope pdm on both ends.
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	outs := make([]*bytes.Buffer, 2)
	errs := make([]error, 2)
	for i, n := range []*lab.Node{cli, srv} {
		outs[i] = new(bytes.Buffer)
		w, _ := NewWriter(outs[i], "jsonl")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Run(runCtx, Options{Interfaces: []string{lab.ClientIf}, Netns: n.Name, Output: w,
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
	time.Sleep(time.Second) // attach (Run has no ready signal)

	// UDP request/response: the server holds each request labHold.
	var serverConn, clientConn *net.UDPConn
	srvAddr := netip.AddrPortFrom(l.ServerAddr6[0], labPort)
	if err := srv.Do(func() (err error) {
		serverConn, err = net.ListenUDP("udp6", net.UDPAddrFromAddrPort(srvAddr))
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
		clientConn, err = net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(srvAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer clientConn.Close()
	buf := make([]byte, 2048)
	for i := range labRequests {
		if _, err := clientConn.Write([]byte(fmt.Sprintf("request %d", i))); err != nil {
			t.Fatal(err)
		}
		_ = clientConn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := clientConn.Read(buf); err != nil {
			t.Fatalf("request %d: no reply: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rttscope pdm (%d): %v", i, err)
		}
	}
	_ = dump.Process.Signal(syscall.SIGINT)
	_ = dump.Wait()

	checkTshark(t, pcap, l.ClientAddr6.String())
	checkRecords(t, outs[0].Bytes())
}

func waitListening(t *testing.T, r interface{ Read([]byte) (int, error) }) {
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
	src                        string
	psntp, psnlr               int
	dtlr, dtls                 time.Duration
	scaleDTLR, scaleDTLS, vals [2]int
}

func checkTshark(t *testing.T, pcap, client string) {
	t.Helper()
	out, err := exec.Command("tshark", "-r", pcap, "-Y", "udp", "-T", "fields", "-E", "separator=,",
		"-e", "ipv6.src", "-e", "ipv6.opt.pdm.scale_dtlr", "-e", "ipv6.opt.pdm.scale_dtls",
		"-e", "ipv6.opt.pdm.psn_this_pkt", "-e", "ipv6.opt.pdm.psn_last_recv",
		"-e", "ipv6.opt.pdm.delta_last_recv", "-e", "ipv6.opt.pdm.delta_last_sent", "-e", "_ws.malformed", "-e", "_ws.expert.severity").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	var pkts []pdmPkt
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 9 || f[3] == "" {
			t.Fatalf("packet without PDM (or not decoded): %q", line)
		}
		if f[7] != "" {
			t.Fatalf("tshark marks a packet malformed: %q", line)
		}
		n := make([]int, 6)
		for i := range n {
			v, err := strconv.ParseUint(f[1+i], 0, 64)
			if err != nil {
				t.Fatalf("field %d of %q: %v", i+1, line, err)
			}
			n[i] = int(v)
		}
		pkts = append(pkts, pdmPkt{src: f[0], psntp: n[2], psnlr: n[3],
			dtlr: Decode(uint16(n[4]), uint8(n[0])), dtls: Decode(uint16(n[5]), uint8(n[1]))})
	}
	if len(pkts) != 2*labRequests {
		t.Fatalf("%d PDM packets captured, want %d", len(pkts), 2*labRequests)
	}
	// PSN rules: per direction +1 per packet; PSNLR = the PSNTP of the
	// last packet the sender received (the previous one in the other
	// direction, in this strict ping-pong); the client's first has none.
	last := map[string]int{}
	for i, p := range pkts {
		if prev, ok := last[p.src]; ok && p.psntp != (prev+1)&0xffff {
			t.Errorf("packet %d: PSNTP %d after %d", i, p.psntp, prev)
		}
		last[p.src] = p.psntp
		if i == 0 {
			if p.src != client || p.psnlr != 0 {
				t.Errorf("first packet %+v: want the client's, PSNLR 0", p)
			}
			continue
		}
		if want := pkts[i-1].psntp; p.psnlr != want {
			t.Errorf("packet %d: PSNLR %d, want %d", i, p.psnlr, want)
		}
	}
	// Delays: the server's DTLR is its hold time (the application's sleep
	// plus its own scheduling); the client's DTLS (in its next request) is
	// its round trip, path + that DTLR, so DTLS - DTLR is the path.
	near := func(what string, got, want time.Duration) {
		if d := got - want; d < -labTolerance || d > labTolerance {
			t.Errorf("%s = %v, want %v ± %v", what, got, want, labTolerance)
		}
	}
	for i := 1; i < len(pkts); i++ {
		p := pkts[i]
		if p.src != client {
			near(fmt.Sprintf("server DTLR (packet %d)", i), p.dtlr, labHold)
		} else {
			near(fmt.Sprintf("client DTLS - server DTLR (packet %d)", i), p.dtls-pkts[i-1].dtlr, labToServer+labToClient)
			if i == len(pkts)-2 {
				t.Logf("last pair: server DTLR %v, client DTLS %v", pkts[i-1].dtlr, p.dtls)
			}
		}
	}
}

func checkRecords(t *testing.T, jsonl []byte) {
	t.Helper()
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		if r.NetworkRTT == nil {
			t.Errorf("record without network_rtt: %s", line)
			continue
		}
		n++
		want := labToServer + labToClient
		if d := time.Duration(*r.NetworkRTT) - want; d < -labTolerance || d > labTolerance {
			t.Errorf("network_rtt %v, want %v ± %v", time.Duration(*r.NetworkRTT), want, labTolerance)
		}
	}
	if n != labRequests {
		t.Errorf("%d client records with network_rtt, want %d", n, labRequests)
	}
}
