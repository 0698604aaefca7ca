package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/testutil"
)

func newTestLab(t *testing.T, cfg Config) *Lab {
	t.Helper()
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

func nsExists(name string) bool {
	_, err := os.Lstat(filepath.Join(netnsDir, name))
	return err == nil
}

// leftovers lists namespaces under /run/netns whose name starts with prefix.
func leftovers(t *testing.T, prefix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(netnsDir, prefix+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuildAndTeardown(t *testing.T) {
	l := newTestLab(t, Config{
		Prefix: "rtt-lt",
		Paths: []PathSpec{
			{DelayToServer: time.Millisecond, DelayToClient: time.Millisecond},
			{DelayToServer: 2 * time.Millisecond, DelayToClient: time.Millisecond, RateBitsPerSec: 10_000_000},
		},
	})
	if l.DelayMethod != DelayUserspace && l.DelayMethod != DelayNetem {
		t.Fatalf("DelayMethod = %q", l.DelayMethod)
	}
	if out, err := exec.Command("sh", "-c", "zcat /proc/config.gz 2>/dev/null | grep -q '^CONFIG_NET_SCH_NETEM='").CombinedOutput(); err != nil && l.DelayMethod != DelayUserspace {
		t.Errorf("kernel config has no netem but DelayMethod = %q (%s)", l.DelayMethod, out)
	}
	t.Logf("delay method %s", l.DelayMethod)

	nodes := l.Nodes()
	want := 2 + 2*len(l.Servers) // both paths are delayed: a delay namespace each
	if len(nodes) != want || len(l.Servers) != 2 {
		t.Fatalf("%d namespaces, %d servers", len(nodes), len(l.Servers))
	}
	listed, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if !nsExists(n.Name) || !strings.Contains(string(listed), n.Name) {
			t.Errorf("namespace %s missing while the lab is up", n.Name)
		}
		if !strings.HasPrefix(n.Name, "rtt-lt-") {
			t.Errorf("namespace %s lacks the prefix", n.Name)
		}
	}

	// Address plan.
	if l.ClientAddr4 != netip.MustParseAddr("10.10.0.2") || l.ClientAddr6 != netip.MustParseAddr("fd00:10::2") {
		t.Errorf("client addresses %v %v", l.ClientAddr4, l.ClientAddr6)
	}
	if l.ServerAddr4[1] != netip.MustParseAddr("10.20.1.2") || l.ServerAddr6[1] != netip.MustParseAddr("fd00:20:1::2") {
		t.Errorf("server 1 addresses %v %v", l.ServerAddr4[1], l.ServerAddr6[1])
	}
	if l.MiddleboxClientIf != "mb-cli" || l.MiddleboxServerIf[1] != "mb-srv1" {
		t.Errorf("middlebox interfaces %q %q", l.MiddleboxClientIf, l.MiddleboxServerIf)
	}

	// Offloads off on every lab veth.
	check := func(n *Node, ifs ...string) {
		for _, ifname := range ifs {
			off, on, err := OffloadsOff(n, ifname)
			if err != nil || !off {
				t.Errorf("%s/%s: offloads off = %v (on: %v), %v", n.Name, ifname, off, on, err)
			}
		}
	}
	check(l.Client, ClientIf)
	check(l.Middlebox, append([]string{l.MiddleboxClientIf}, l.MiddleboxServerIf...)...)
	for i, s := range l.Servers {
		check(s, ServerIf)
		if l.Delays[i] != nil {
			check(l.Delays[i], DelayIfMbox, DelayIfServer)
		}
	}
	// And the ethtool binary agrees.
	out, err := l.Client.Command(context.Background(), "ethtool", "-k", ClientIf).CombinedOutput()
	if err == nil {
		for _, f := range []string{"\ttx-tcp-accecn-segmentation: off", "tcp-segmentation-offload: off", "generic-segmentation-offload: off", "generic-receive-offload: off", "tx-checksumming: off"} {
			if !strings.Contains(string(out), f) {
				t.Errorf("ethtool -k %s lacks %q", ClientIf, f)
			}
		}
	}

	// Sysctls.
	for key, n := range map[string]*Node{"net.ipv4.ip_forward": l.Middlebox, "net.ipv6.conf.all.forwarding": l.Middlebox, "net.ipv4.tcp_timestamps": l.Client} {
		if v, err := n.Sysctl(key); err != nil || v != "1" {
			t.Errorf("%s: %s = %q, %v", n.Name, key, v, err)
		}
	}
	if v, _ := l.Client.Sysctl("net.ipv6.conf.eth0.accept_dad"); v != "0" {
		t.Errorf("client accept_dad = %q", v)
	}

	// Static neighbour entries on the routed links.
	out, err = l.Middlebox.Command(context.Background(), "ip", "neigh", "show", "nud", "permanent").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "10.20.1.2 dev mb-srv1") || !strings.Contains(string(out), "fd00:10::2 dev mb-cli") {
		t.Errorf("middlebox permanent neighbours: %v\n%s", err, out)
	}

	// Reachability of every server, v4 and v6, with the system ping.
	for i := range l.Servers {
		for _, dst := range []netip.Addr{l.ServerAddr4[i], l.ServerAddr6[i]} {
			out, err := l.Client.Command(context.Background(), "ping", "-n", "-c", "1", "-W", "2", dst.String()).CombinedOutput()
			if err != nil {
				t.Errorf("ping %s: %v\n%s", dst, err, out)
			}
		}
	}

	// Teardown.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, n := range nodes {
		if nsExists(n.Name) {
			t.Errorf("namespace %s still exists after Close", n.Name)
		}
	}
	if err := l.Client.Do(func() error { return nil }); err == nil {
		t.Error("Do on a closed node succeeded")
	}
	_ = l.DelayStats() // still safe after Close
}

func TestFailureCleansUp(t *testing.T) {
	testutil.RequireRoot(t)
	defer func() { testHook = nil }()
	for i, step := range []string{"namespaces", "delay-method", "links", "offloads", "addresses", "delay-line", "up", "routes", "neighbours", "netem", "wait-ready"} {
		prefix := fmt.Sprintf("rtt-lf%d", i)
		injected := errors.New("injected failure")
		testHook = func(s string) error {
			if s == step {
				return injected
			}
			return nil
		}
		l, err := New(context.Background(), Config{Prefix: prefix, Paths: []PathSpec{{DelayToServer: time.Millisecond}, {}}, ForceUserspaceDelay: true})
		if err == nil {
			_ = l.Close()
			t.Fatalf("step %s: New succeeded despite the injected failure", step)
		}
		if !errors.Is(err, injected) || !strings.Contains(err.Error(), step) {
			t.Errorf("step %s: error %v", step, err)
		}
		if left := leftovers(t, prefix); len(left) != 0 {
			t.Errorf("step %s: left behind %v", step, left)
		}
	}
}

func TestCancelDuringSetup(t *testing.T) {
	testutil.RequireRoot(t)
	defer func() { testHook = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	testHook = func(s string) error {
		if s == "addresses" {
			cancel()
		}
		return nil
	}
	l, err := New(ctx, Config{Prefix: "rtt-lc", Paths: []PathSpec{{DelayToServer: time.Millisecond}}})
	if err == nil {
		_ = l.Close()
		t.Fatal("New succeeded with a cancelled context")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
	if left := leftovers(t, "rtt-lc"); len(left) != 0 {
		t.Errorf("left behind %v", left)
	}
}

func netnsInode(t *testing.T) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestNodeDo(t *testing.T) {
	l := newTestLab(t, Config{Prefix: "rtt-ld", Paths: []PathSpec{{}}})
	var st unix.Stat_t
	if err := unix.Stat(l.Client.Path(), &st); err != nil {
		t.Fatal(err)
	}
	var inside uint64
	err := l.Client.Do(func() error {
		inside = netnsInode(t)
		return errors.New("from fn")
	})
	if err == nil || err.Error() != "from fn" {
		t.Fatalf("Do returned %v", err)
	}
	if inside != st.Ino {
		t.Fatalf("fn ran in netns inode %d, want %d", inside, st.Ino)
	}
	// Threads handed back by Do are in the original namespace again.
	var root unix.Stat_t
	if err := unix.Stat("/proc/1/ns/net", &root); err == nil {
		for range 20 {
			if ino := netnsInode(t); ino == st.Ino {
				t.Fatal("a thread stayed in the lab namespace after Do")
			}
		}
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = l.Client.Do(func() error { panic("boom") })
	}()
	out, err := l.Client.Command(context.Background(), "ip", "-br", "addr", "show", "dev", ClientIf).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "10.10.0.2/24") {
		t.Fatalf("Command: %v %s", err, out)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{},
		{Prefix: "bad name", Paths: []PathSpec{{}}},
		{Prefix: "waytoolongprefix-xx", Paths: []PathSpec{{}}},
		{Paths: []PathSpec{{DelayToServer: -time.Millisecond}}},
		{Paths: []PathSpec{{DelayToClient: time.Hour}}},
		{Paths: []PathSpec{{RateBitsPerSec: 100}}},
		{Paths: []PathSpec{{QueuePackets: -1}}},
	} {
		if _, err := New(context.Background(), c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
	c, err := normalize(Config{Paths: []PathSpec{{RateBitsPerSec: 1e6}}})
	if err != nil || c.Prefix != DefaultPrefix || c.Paths[0].QueuePackets != DefaultQueuePackets {
		t.Errorf("normalize: %+v %v", c, err)
	}
}

// TestDelayLineSteadyState floods a delay line with pings from the system
// ping binary (another process) and checks that forwarding allocates
// nothing per packet and keeps every frame.
func TestDelayLineSteadyState(t *testing.T) {
	l := newTestLab(t, Config{Prefix: "rtt-la", Paths: []PathSpec{{DelayToServer: time.Millisecond, DelayToClient: time.Millisecond}}, ForceUserspaceDelay: true})
	// Resolve neighbours first.
	if out, err := l.Client.Command(context.Background(), "ping", "-n", "-c", "1", "-W", "2", l.ServerAddr4[0].String()).CombinedOutput(); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	before := l.DelayStats()[0]
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cmd := l.Client.Command(context.Background(), "ping", "-n", "-q", "-c", "1000", "-i", "0.001", "-W", "2", l.ServerAddr4[0].String())
	out, err := cmd.CombinedOutput()
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	after := l.DelayStats()[0]
	fwd := after.ToServer.Forwarded - before.ToServer.Forwarded + after.ToClient.Forwarded - before.ToClient.Forwarded
	mallocs := m1.Mallocs - m0.Mallocs
	t.Logf("forwarded %d frames with %d heap allocations in the whole process; %+v", fwd, mallocs, after)
	if fwd < 2000 {
		t.Errorf("forwarded only %d frames for 1000 pings", fwd)
	}
	if mallocs > fwd/4 {
		t.Errorf("%d allocations for %d forwarded frames: the delay line allocates per packet", mallocs, fwd)
	}
	if d := after.ToServer.Dropped() + after.ToClient.Dropped(); d != 0 {
		t.Errorf("%d frames dropped at 1000 pps", d)
	}
}

func TestGOMAXPROCSRestored(t *testing.T) {
	testutil.RequireRoot(t)
	before := runtime.GOMAXPROCS(0)
	l := newTestLab(t, Config{Prefix: "rtt-lg", Paths: []PathSpec{{}, {}}, ForceUserspaceDelay: true})
	if got := runtime.GOMAXPROCS(0); got < before+2*procsPerLine {
		t.Errorf("GOMAXPROCS %d while 2 delay lines run, want >= %d", got, before+2*procsPerLine)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS %d after Close, want %d again", got, before)
	}
}

func TestCleanupStale(t *testing.T) {
	testutil.RequireRoot(t)
	l := newTestLab(t, Config{Prefix: "rtt-ls", Paths: []PathSpec{{}}})
	marker := filepath.Join(markerDir, l.base)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no ownership marker: %v", err)
	}
	// A live creator (this process): left alone.
	if removed, err := CleanupStale(); err != nil || containsAny(removed, l.base) {
		t.Fatalf("CleanupStale removed a live lab: %v %v", removed, err)
	}
	// Pretend the creator died: pid 1's start time never matches ours.
	if err := os.WriteFile(marker, []byte("1 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := CleanupStale()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != len(l.Nodes()) || !containsAny(removed, l.base) {
		t.Fatalf("removed %v, want the %d namespaces of %s", removed, len(l.Nodes()), l.base)
	}
	for _, n := range l.Nodes() {
		if nsExists(n.Name) {
			t.Errorf("%s survived CleanupStale", n.Name)
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("marker still there: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close after CleanupStale: %v", err)
	}
}

func containsAny(names []string, base string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, base+"-") {
			return true
		}
	}
	return false
}
