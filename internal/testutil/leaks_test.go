package testutil

import (
	"net/netip"
	"testing"
)

func TestLeaks(t *testing.T) {
	v4 := netip.MustParseAddr("10.0.0.1")
	v6 := netip.MustParseAddr("fd00:c::1")
	for _, c := range []struct {
		text string
		want bool
	}{
		{`"src_ip":"10.0.0.1"`, true},
		{"10.0.0.1:443+", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:0a00:0001", true},
		{"0000:0000:0000:0000:0000:ffff:0a00:0001", true},
		{"key 0A000001 ", true},
		{"0x0a000001", true},
		{`"fd00:c::1"`, true},
		{"fd00:000c:0000:0000:0000:0000:0000:0001", true},
		{"FD00:C::1", true},
		{"110.0.0.12 10.0.0.10", false},
		{"fd00:c::10 afd00:c::1", false},
		{"nothing", false},
	} {
		if got := len(Leaks(c.text, v4, v6)) > 0; got != c.want {
			t.Errorf("Leaks(%q) = %v, want %v", c.text, Leaks(c.text, v4, v6), c.want)
		}
	}
}
