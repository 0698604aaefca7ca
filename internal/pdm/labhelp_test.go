package pdm

import (
	"context"
	"testing"

	"github.com/rttscope/rttscope/internal/lab"
)

// pdmLab builds a lab for one test (closed when it ends) whose client and
// first server accept destination options, as PDM's receivers must
// (SPEC §3: net.ipv6.max_dst_opts_number set explicitly).
func pdmLab(ctx context.Context, t *testing.T, cfg lab.Config) *lab.Lab {
	t.Helper()
	l, err := lab.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
	})
	for _, n := range []*lab.Node{l.Servers[0], l.Client} {
		if err := n.SetSysctl("net.ipv6.max_dst_opts_number", "8"); err != nil {
			t.Fatal(err)
		}
	}
	return l
}
