package doctor

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/testutil"
)

// With every optional feature disabled, doctor still finds that rttscope
// runs, and names each disabled feature and the fallback in use.
func TestDoctorAllDisabled(t *testing.T) {
	testutil.RequireRoot(t)
	t.Setenv(kernel.DisableEnv, "all")
	r := Check()
	var out bytes.Buffer
	if err := r.Write(&out); err != nil {
		t.Fatalf("Write: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"map_elem_iter", "disabled", "cleanup=none", "summaries=map-walk", "replay=tc",
		"egress clsact", "ingress tc only", "fallback: map-element iterators disabled",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if r.Live.Cleanup != "none" || r.Replay.Replay != "tc" {
		t.Errorf("variants live %+v replay %+v", r.Live, r.Replay)
	}
}

// Without disabling anything, the trial loads succeed on this machine.
func TestDoctorHost(t *testing.T) {
	testutil.RequireRoot(t)
	t.Setenv(kernel.DisableEnv, "")
	r := Check()
	var out bytes.Buffer
	if err := r.Write(&out); err != nil || !r.OK() {
		t.Fatalf("Write: %v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if r.Live.Cleanup == "" || r.Live.Summaries == "" || r.Replay.Replay == "" {
		t.Errorf("variants not all set: live %+v replay %+v", r.Live, r.Replay)
	}
}
