package kernel

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/testutil"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Status
	}{
		{fmt.Errorf("load program: %w", unix.EPERM), Refused},
		{unix.EACCES, Refused},
		{fmt.Errorf("detect: %w", ebpf.ErrNotSupported), Missing},
		{unix.EINVAL, Missing},
		{unix.Errno(524), Missing},
		{errors.New("something else"), Failed},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestExplainNamesCause(t *testing.T) {
	msg := Explain(fmt.Errorf("load program: %w", unix.EPERM))
	want := "run as root"
	if os.Geteuid() == 0 {
		want = "security policy"
	}
	if !strings.Contains(msg, "EPERM") || !strings.Contains(msg, want) {
		t.Errorf("Explain(EPERM) = %q, want EPERM and %q", msg, want)
	}
	if msg := Explain(unix.EINVAL); !strings.Contains(msg, "kernel too old") {
		t.Errorf("Explain(EINVAL) = %q", msg)
	}
	if msg := Explain(fmt.Errorf("load program: %w", unix.E2BIG)); !strings.Contains(msg, "complexity limit") {
		t.Errorf("Explain(E2BIG) = %q", msg)
	}
}

// RTTSCOPE_DISABLE switches optional features off, never required ones,
// and is read on every call.
func TestDisable(t *testing.T) {
	t.Setenv(DisableEnv, " tcx , map_elem_iter")
	for id, want := range map[ID]bool{TCX: true, MapElemIter: true, XDP: false, ForEachMapElem: false} {
		if got := disabled(id); got != want {
			t.Errorf("disabled(%s) = %v, want %v", id, got, want)
		}
	}
	if r := Check(TCX); r.Status != Disabled || r.OK() {
		t.Errorf("Check(tcx) = %+v, want disabled", r)
	}
	t.Setenv(DisableEnv, "all")
	for _, r := range All() {
		if r.Required && r.Status == Disabled {
			t.Errorf("required feature %s disabled", r.ID)
		}
		if !r.Required && r.Status != Disabled {
			t.Errorf("%s: %v with %s=all", r.ID, r.Status, DisableEnv)
		}
	}
}

// On the machines rttscope is tested on, every required feature is there
// and every probe gives a definite answer.
func TestProbesAsRoot(t *testing.T) {
	testutil.RequireRoot(t)
	t.Setenv(DisableEnv, "")
	if err := CheckRequired(); err != nil {
		t.Fatal(err)
	}
	for _, r := range All() {
		t.Logf("%-18s %-8v %v", r.ID, r.Status, r.Err)
		if r.Status == Failed {
			t.Errorf("%s: probe failed: %v", r.ID, r.Err)
		}
		if (r.Status == Present) != (r.Err == nil) {
			t.Errorf("%s: status %v with error %v", r.ID, r.Status, r.Err)
		}
	}
}
