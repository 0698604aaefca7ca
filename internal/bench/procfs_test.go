package bench

import (
	"math"
	"testing"
)

func TestProcStat(t *testing.T) {
	text := "cpu  100 5 50 800 20 3 12 10 0 0\ncpu0 50 2 25 400 10 1 6 5 0 0\nintr 1 2 3\n"
	got, ok := parseProcStat(text)
	want := cpuTimes{Total: 1000, Idle: 820, Softirq: 12, Steal: 10, System: 50, User: 105, Irq: 3}
	if !ok || got != want {
		t.Fatalf("parseProcStat = %+v, %v; want %+v", got, ok, want)
	}
	// One CPU's line (pinned runs count only those CPUs).
	if c0, ok := parseProcStatCPUs(text, []int{0}); !ok || c0.Total != 499 || c0.System != 25 || c0.Softirq != 6 {
		t.Errorf("parseProcStatCPUs(cpu0) = %+v, %v", c0, ok)
	}
	if _, ok := parseProcStatCPUs(text, []int{1}); ok {
		t.Error("a CPU without a line must fail")
	}
	u := cpuUseBetween(cpuTimes{}, want, 10)
	if !near(u.Busy, 0.18) || !near(u.Softirq, 0.012) || !near(u.System, 0.05) || !near(u.StealShare, 0.01) {
		t.Errorf("cpuUseBetween = %+v", u)
	}
	if _, ok := parseProcStat("intr 1 2\n"); ok {
		t.Error("no cpu line must fail")
	}
	if b, _ := cpuShares(want, want); !math.IsNaN(b) {
		t.Errorf("no elapsed time: busy = %v, want NaN", b)
	}
}

func TestCPUSharesAndCores(t *testing.T) {
	// 2 s of a 2-CPU machine: 400 ticks; 40 of softirq, 100 idle, 4 stolen.
	a := cpuTimes{Total: 1000, Idle: 500, Softirq: 10, Steal: 0}
	b := cpuTimes{Total: 1400, Idle: 600, Softirq: 50, Steal: 4}
	if busy, steal := cpuShares(a, b); !near(busy, 0.75) || !near(steal, 0.01) {
		t.Errorf("cpuShares = %v, %v; want 0.75, 0.01", busy, steal)
	}
	u := cpuUseBetween(a, b, 2)
	if !near(u.Softirq, 0.2) || !near(u.Busy, 1.5) || !near(u.StealShare, 0.01) {
		t.Errorf("cpuUseBetween = %+v; want softirq 0.2, busy 1.5, steal 0.01", u)
	}
	if u := cpuUseBetween(b, a, 2); !math.IsNaN(u.Softirq) || !math.IsNaN(u.Busy) {
		t.Errorf("cpuUseBetween backwards = %+v, want NaN", u)
	}
}

func TestParsePidStat(t *testing.T) {
	// Field 2 may hold spaces and parentheses.
	text := "4242 (rtt scope (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 123 45 0 0 20 0 8 0 100 0 0"
	got, ok := parsePidStat(text)
	if !ok || got != 168 {
		t.Fatalf("parsePidStat = %d, %v; want 168, true", got, ok)
	}
	if _, ok := parsePidStat("4242 (x) S 1"); ok {
		t.Error("parsePidStat accepted a short line")
	}
}

func TestSNMPField(t *testing.T) {
	text := "Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
		"Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n" +
		"Tcp: 1 200 120000 -1 10000 0 0 0 10000 123456 654321 4242 0 7 0\n" +
		"Udp: InDatagrams RetransSegs\nUdp: 5 6\n"
	if n, err := parseSNMPField(text, "Tcp", "RetransSegs"); err != nil || n != 4242 {
		t.Errorf("Tcp RetransSegs = %d, %v; want 4242", n, err)
	}
	if n, err := parseSNMPField(text, "Udp", "RetransSegs"); err != nil || n != 6 {
		t.Errorf("Udp RetransSegs = %d, %v; want 6 (the field of that protocol)", n, err)
	}
	if _, err := parseSNMPField(text, "Tcp", "NoSuchField"); err == nil {
		t.Error("a missing field must fail")
	}
	// This machine's own counters parse (no namespace switch: the test's).
	if _, err := tcpRetransSegs(); err != nil {
		t.Errorf("tcpRetransSegs: %v", err)
	}
}
