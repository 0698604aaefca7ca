package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseExternal(t *testing.T) {
	e, err := ParseExternal("epping=/opt/pping -i {iface} -f")
	if err != nil || e.Name != "epping" || e.Cmd != "/opt/pping -i {iface} -f" {
		t.Errorf("got %+v, %v", e, err)
	}
	for _, bad := range []string{"", "noequals", "=cmd", "name=", "a b=cmd", "x/y=cmd"} {
		if _, err := ParseExternal(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A tool is stopped with SIGINT, then SIGTERM, then SIGKILL; the report
// says which it took, and its output and CPU are counted.
func TestProcToolStop(t *testing.T) {
	oldGrace, oldKill := toolStopGrace, toolKillWait
	toolStopGrace, toolKillWait = 300*time.Millisecond, 5*time.Second
	defer func() { toolStopGrace, toolKillWait = oldGrace, oldKill }()
	for _, c := range []struct{ cmd, want string }{
		{`echo one; echo two >&2; exec sleep 30`, "exited after SIGINT"},
		{`trap '' INT; echo one; echo two >&2; sleep 30 & wait`, "exited after SIGTERM"},
		{`trap '' INT TERM; echo one; echo two >&2; while :; do sleep 0.05; done`, "killed"},
	} {
		tool, err := startProcTool("", c.cmd, "")
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for tool.counters().outLines < 2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		how, err := tool.stop()
		if err != nil || !strings.HasPrefix(how, c.want) {
			t.Errorf("%q: stopped %q, %v; want %q", c.cmd, how, err, c.want)
		}
		if got := tool.counters(); got.outLines != 2 || got.outBytes != 8 {
			t.Errorf("%q: counted %d lines, %d bytes; want 2, 8", c.cmd, got.outLines, got.outBytes)
		}
		// Killed processes may linger as zombies for a moment.
		gone := time.Now().Add(2 * time.Second)
		for tool.groupAlive() && time.Now().Before(gone) {
			time.Sleep(20 * time.Millisecond)
		}
		if tool.groupAlive() {
			t.Errorf("%q: process group %d still alive", c.cmd, tool.pgid)
		}
	}
}

func TestProcToolExitedEarly(t *testing.T) {
	tool, err := startProcTool("", "echo bye; exit 3", "")
	if err != nil {
		t.Fatal(err)
	}
	// Until it has exited (a fixed sleep could end first on a busy
	// machine); the deadline only ends a test that would hang.
	deadline := time.Now().Add(30 * time.Second)
	for !tool.exited.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := tool.stop(); err == nil || !strings.Contains(err.Error(), "exited early") {
		t.Errorf("a tool that ended before its window was not reported: %v", err)
	}
}

func TestPgidOf(t *testing.T) {
	if g := pgidOf("123 (a b) S 1 456 456 0"); g != 456 {
		t.Errorf("pgid %d, want 456", g)
	}
}
