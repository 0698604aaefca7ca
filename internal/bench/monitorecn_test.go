package bench

import (
	"testing"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/testutil"
)

// TestEnableECN: --ecn turns ECN on for the connections of the lab's TCP
// endpoints (the client and the server), and leaves the router as it is:
// a router forwards ECN marks whatever its own setting.
func TestEnableECN(t *testing.T) {
	testutil.RequireRoot(t)
	l := directLab(t, "rttecn")
	router, err := l.Middlebox.Sysctl("net.ipv4.tcp_ecn")
	if err != nil {
		t.Fatal(err)
	}
	if err := enableECN(l); err != nil {
		t.Fatal(err)
	}
	for _, n := range append([]*lab.Node{l.Client}, l.Servers...) {
		if v, err := n.Sysctl("net.ipv4.tcp_ecn"); err != nil || v != "1" {
			t.Errorf("%s: net.ipv4.tcp_ecn = %q (%v), want 1", n.Name, v, err)
		}
	}
	if v, err := l.Middlebox.Sysctl("net.ipv4.tcp_ecn"); err != nil || v != router {
		t.Errorf("router: net.ipv4.tcp_ecn = %q (%v), want it unchanged (%q)", v, err, router)
	}
}
