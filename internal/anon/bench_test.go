package anon

import (
	"net/netip"
	"testing"
)

// seqAddr is the i-th of a run of distinct addresses spread over the whole
// space (an odd multiplier is a bijection).
func seqAddr(i int, v6 bool) netip.Addr {
	x := uint64(i) * 0x9e3779b97f4a7c15
	if !v6 {
		v := uint32(x >> 32)
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	var b [16]byte
	b[0] = 0x20
	for j := range 8 {
		b[8+j] = byte(x >> (56 - 8*j))
	}
	b[2], b[3] = byte(i>>8), byte(i)
	return netip.AddrFrom16(b)
}

// BenchmarkAddr measures ns per address: raw is the scheme alone on
// addresses it has not seen, new is Cached on addresses it has not seen
// (the scheme, plus inserting and evicting), cached is Cached on a working
// set it holds.
func BenchmarkAddr(b *testing.B) {
	for _, s := range testSchemes(b) {
		b.Run(s.Name(), func(b *testing.B) {
			for _, fam := range []struct {
				name string
				v6   bool
			}{{"v4", false}, {"v6", true}} {
				b.Run("raw/"+fam.name, func(b *testing.B) {
					i := 0
					for b.Loop() {
						s.Addr(seqAddr(i, fam.v6))
						i++
					}
				})
				b.Run("new/"+fam.name, func(b *testing.B) {
					c := Cached(s, 4096)
					i := 0
					for b.Loop() {
						c.Addr(seqAddr(i, fam.v6))
						i++
					}
				})
				b.Run("cached/"+fam.name, func(b *testing.B) {
					c := Cached(s, 4096)
					set := make([]netip.Addr, 1024)
					for i := range set {
						set[i] = seqAddr(i, fam.v6)
						c.Addr(set[i])
					}
					i := 0
					for b.Loop() {
						c.Addr(set[i&1023])
						i++
					}
				})
			}
		})
	}
}

func BenchmarkPortMap(b *testing.B) {
	pm, err := NewPortMapper([]byte("0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		pm.Map(6, uint16(i))
		i++
	}
}
