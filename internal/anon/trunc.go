package anon

import (
	"fmt"
	"net/netip"
)

// trunc keeps the first bits of an address and zeroes the rest.
type trunc struct {
	v4, v6 int
	name   string
}

// NewTruncate keeps the first v4bits (0..32) of IPv4 addresses and the
// first v6bits (0..128) of IPv6 addresses, and zeroes the rest. It needs no
// key and is not reversible, but every address in a kept prefix looks the
// same and the prefix itself is in the clear.
//
// Prefix truncates the network address and keeps p's length, so a prefix
// longer than the kept bits comes back with its extra bits zeroed.
func NewTruncate(v4bits, v6bits int) (Scheme, error) {
	if v4bits < 0 || v4bits > 32 || v6bits < 0 || v6bits > 128 {
		return nil, fmt.Errorf("--anonymize trunc:%d,%d: want V4BITS 0..32 and V6BITS 0..128, e.g. trunc:24,48", v4bits, v6bits)
	}
	return &trunc{v4: v4bits, v6: v6bits, name: truncName(v4bits, v6bits)}, nil
}

func (s *trunc) Name() string     { return s.name }
func (s *trunc) String() string   { return s.name }
func (s *trunc) GoString() string { return "anon.Scheme(" + s.name + ")" }

// PrefixPreserving is false: outputs share at least as many bits as their
// inputs, often more.
func (*trunc) PrefixPreserving() bool { return false }

func (s *trunc) Addr(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	a = normalize(a)
	bits := s.v6
	if a.Is4() {
		bits = s.v4
	}
	p, _ := a.Prefix(bits) // bits is in range for a's family
	return p.Addr()
}

func (s *trunc) Prefix(p netip.Prefix) netip.Prefix { return prefixVia(p, s.Addr) }
