package kafkasink

import (
	"net/netip"
	"testing"

	"github.com/rttscope/rttscope/internal/events"
)

// TestKeys: both directions of a connection have one key, in each mode;
// the keys name what they say; dropped addresses key by the flow number.
func TestKeys(t *testing.T) {
	ep := func(a string, p uint16) events.Endpoint { return events.Endpoint{IP: netip.MustParseAddr(a), Port: p} }
	f := events.Flow{Src: ep("192.0.2.7", 443), Dst: ep("10.1.2.3", 40000), Proto: events.ProtoTCP}
	r := f.Reverse()
	for _, c := range []struct {
		name string
		key  func([]byte, *events.Flow) []byte
		want string
	}{
		{"flow", flowKey, "TCP 10.1.2.3:40000 192.0.2.7:443"},
		{"prefix", prefixKey, "10.1.2.0/24 192.0.2.0/24"},
	} {
		a, b := string(c.key(nil, &f)), string(c.key(nil, &r))
		if a != c.want || b != c.want {
			t.Errorf("%s: keys %q and %q, want %q for both directions", c.name, a, b, c.want)
		}
	}
	v6 := events.Flow{Src: ep("2001:db8:1:2::1", 1), Dst: ep("2001:db8:9::5", 2), Proto: events.ProtoICMPv6}
	if k := string(prefixKey(nil, &v6)); k != "2001:db8:1::/48 2001:db8:9::/48" {
		t.Errorf("IPv6 prefix key %q", k)
	}
	dropped := events.Flow{ID: 17, Proto: events.ProtoTCP}
	if k := string(flowKey(nil, &dropped)); k != "flow 17" || string(prefixKey(nil, &dropped)) != k {
		t.Errorf("dropped addresses: %q", k)
	}
	agg := events.Aggregate{Prefix: netip.MustParsePrefix("10.1.2.0/24")}
	if k := string(aggregateKey(nil, &agg)); k != "10.1.2.0/24" {
		t.Errorf("aggregate key %q", k)
	}
	if k := string(aggregateKey(nil, &events.Aggregate{PrefixID: 3})); k != "prefix 3" {
		t.Errorf("numbered prefix key %q", k)
	}
}
