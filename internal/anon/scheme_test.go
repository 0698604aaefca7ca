package anon

import (
	"bytes"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// testSchemes builds every scheme with fixed, distinct keys.
func testSchemes(t testing.TB) []Scheme {
	t.Helper()
	key := bytes.Repeat([]byte{0}, 32)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	var out []Scheme
	for _, m := range []string{"pfx", "cryptopan", "det", "trunc:24,48"} {
		mode, err := ParseMode(m)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(mode, key[:mode.KeySize()])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func randAddr(r *rand.Rand, v6 bool) netip.Addr {
	if !v6 {
		var b [4]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	a := netip.AddrFrom16(b)
	if a.Is4In6() { // not in 2^-96 lifetimes, but keep the family certain
		b[0] = 0x20
		a = netip.AddrFrom16(b)
	}
	return a
}

// commonBits is the length of the common prefix of two addresses of one
// family.
func commonBits(a, b netip.Addr) int {
	x, y := a.AsSlice(), b.AsSlice()
	for i := range x {
		if d := x[i] ^ y[i]; d != 0 {
			return 8*i + bits.LeadingZeros8(d)
		}
	}
	return 8 * len(x)
}

// sharePrefix returns an address sharing exactly n leading bits with a
// (all of them when n is the address length), random after that.
func sharePrefix(r *rand.Rand, a netip.Addr, n int) netip.Addr {
	b := randAddr(r, a.Is6()).AsSlice()
	x := a.AsSlice()
	for i := 0; i < n && i < 8*len(x); i++ {
		m := byte(0x80) >> (i % 8)
		b[i/8] = b[i/8]&^m | x[i/8]&m
	}
	if n < 8*len(x) {
		m := byte(0x80) >> (n % 8)
		b[n/8] = b[n/8]&^m | ^x[n/8]&m
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}

func TestPrefixPreservation(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range testSchemes(t) {
		if !s.PrefixPreserving() {
			continue
		}
		for _, v6 := range []bool{false, true} {
			for range 2000 {
				a := randAddr(r, v6)
				n := r.IntN(a.BitLen() + 1)
				b := sharePrefix(r, a, n)
				if got := commonBits(a, b); got != n {
					t.Fatalf("test helper: %s and %s share %d bits, want %d", a, b, got, n)
				}
				ea, eb := s.Addr(a), s.Addr(b)
				if ea.Is4() != a.Is4() || eb.Is4() != b.Is4() {
					t.Fatalf("%s: family changed: %s -> %s, %s -> %s", s, a, ea, b, eb)
				}
				if got := commonBits(ea, eb); got != n {
					t.Fatalf("%s: %s and %s share %d bits, their outputs %s and %s share %d", s, a, b, n, ea, eb, got)
				}
			}
		}
	}
}

// Anonymizing a prefix gives the prefix that holds the anonymized
// addresses of its members, for the prefix-preserving schemes and trunc.
func TestPrefixContainsMembers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range testSchemes(t) {
		if s.Name() == "det" {
			continue
		}
		for _, v6 := range []bool{false, true} {
			for range 300 {
				a := randAddr(r, v6)
				p, _ := a.Prefix(r.IntN(a.BitLen() + 1))
				ep := s.Prefix(p)
				if ep.Bits() != p.Bits() || ep.Addr().Is4() != a.Is4() || ep != ep.Masked() {
					t.Fatalf("%s.Prefix(%s) = %s", s, p, ep)
				}
				if ea := s.Addr(a); !ep.Contains(ea) {
					t.Fatalf("%s.Prefix(%s) = %s does not hold %s = %s.Addr(%s)", s, p, ep, ea, s, a)
				}
			}
		}
	}
}

func TestPrefixMappedAndDet(t *testing.T) {
	for _, s := range testSchemes(t) {
		p4 := netip.MustParsePrefix("192.0.2.0/24")
		p46 := netip.MustParsePrefix("::ffff:192.0.2.0/120")
		if got, want := s.Prefix(p46), s.Prefix(p4); got != want {
			t.Errorf("%s.Prefix(%s) = %s, want %s as for %s", s, p46, got, want, p4)
		}
		if s.Name() != "det" {
			continue
		}
		got := s.Prefix(netip.MustParsePrefix("192.0.2.77/24"))
		want := s.Addr(netip.MustParseAddr("192.0.2.0"))
		if got != netip.PrefixFrom(want, 128) {
			t.Errorf("det.Prefix(192.0.2.77/24) = %s, want %s/128", got, want)
		}
	}
}

func TestInvalid(t *testing.T) {
	for _, s := range testSchemes(t) {
		if got := s.Addr(netip.Addr{}); got.IsValid() {
			t.Errorf("%s.Addr(invalid) = %s", s, got)
		}
		if got := s.Prefix(netip.Prefix{}); got.IsValid() {
			t.Errorf("%s.Prefix(invalid) = %s", s, got)
		}
	}
}

func TestDetOutputIsIPv6(t *testing.T) {
	s := testSchemes(t)[2]
	if got := s.Addr(netip.MustParseAddr("10.1.2.3")); !got.Is6() || got.Is4In6() {
		t.Errorf("det(10.1.2.3) = %s, want a plain IPv6 address", got)
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		v4, v6  int
		in, out string
	}{
		{24, 48, "192.0.2.77", "192.0.2.0"},
		{24, 48, "::ffff:192.0.2.77", "192.0.2.0"},
		{24, 48, "2001:db8:aaaa:bbbb::1", "2001:db8:aaaa::"},
		{0, 0, "10.1.2.3", "0.0.0.0"},
		{0, 0, "2001:db8::1", "::"},
		{32, 128, "10.1.2.3", "10.1.2.3"},
		{32, 128, "2001:db8::1", "2001:db8::1"},
		{13, 3, "255.255.255.255", "255.248.0.0"},
		{13, 3, "ffff::", "e000::"},
	} {
		s, err := NewTruncate(c.v4, c.v6)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.Addr(netip.MustParseAddr(c.in)), netip.MustParseAddr(c.out); got != want {
			t.Errorf("%s(%s) = %s, want %s", s, c.in, got, want)
		}
	}
	s, _ := NewTruncate(16, 32)
	if got, want := s.Prefix(netip.MustParsePrefix("10.1.2.0/24")), netip.MustParsePrefix("10.1.0.0/24"); got != want {
		t.Errorf("%s.Prefix(10.1.2.0/24) = %s, want %s", s, got, want)
	}
	for _, b := range [][2]int{{-1, 0}, {33, 0}, {0, -1}, {0, 129}} {
		if _, err := NewTruncate(b[0], b[1]); err == nil {
			t.Errorf("NewTruncate(%d, %d) succeeded", b[0], b[1])
		}
	}
}

// What fmt prints of a Scheme or PortMapper is its name, never key material.
func TestFormatShowsNoKey(t *testing.T) {
	key := bytes.Repeat([]byte{0xab, 0xcd}, 16)
	pm, err := NewPortMapper(key[:16])
	if err != nil {
		t.Fatal(err)
	}
	things := []any{pm}
	for _, s := range testSchemes(t) {
		things = append(things, s, Cached(s, 10))
	}
	for _, x := range things {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			out := fmt.Sprintf(verb, x)
			if strings.Contains(out, "{") || strings.Contains(out, "0x") || strings.Contains(out, "abcd") || len(out) > 40 {
				t.Errorf("Sprintf(%q, %T) = %q: looks like it prints the struct", verb, x, out)
			}
		}
	}
}

func TestNewErrors(t *testing.T) {
	secret := bytes.Repeat([]byte{0x5a}, 31)
	for _, c := range []struct {
		mode string
		key  []byte
		want string
	}{
		{"none", nil, "no address scheme"},
		{"drop", nil, "no address scheme"},
		{"pfx", secret, "key is 31 bytes, want 32"},
		{"cryptopan", secret, "key is 31 bytes, want 32"},
		{"det", secret, "key is 31 bytes, want 16"},
		{"pfx", bytes.Repeat([]byte{0x5a}, 32), "halves of the key are equal"},
	} {
		m, err := ParseMode(c.mode)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(m, c.key)
		if err == nil || s != nil {
			t.Errorf("New(%s) = %v, %v: want an error", c.mode, s, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(strings.ToLower(err.Error()), "5a5a") {
			t.Errorf("New(%s): %q, want it to say %q and no key bytes", c.mode, err, c.want)
		}
	}
	if _, err := New(Mode{Kind: "trunc", V4Bits: 8, V6Bits: 16}, nil); err != nil {
		t.Errorf("New(trunc:8,16): %v", err)
	}
}
