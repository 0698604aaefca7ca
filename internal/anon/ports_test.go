package anon

import (
	"sync"
	"testing"
)

func TestPortMapperBijection(t *testing.T) {
	pm, err := NewPortMapper([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	maps := map[uint8][]uint16{}
	for _, proto := range []uint8{6, 17, 132} {
		seen := make([]bool, 1<<16)
		out := make([]uint16, 1<<16)
		fixed := 0
		for p := range 1 << 16 {
			q := pm.Map(proto, uint16(p))
			if seen[q] {
				t.Fatalf("proto %d: two ports map to %d", proto, q)
			}
			seen[q] = true
			out[p] = q
			if q == uint16(p) {
				fixed++
			}
		}
		// A random permutation has about one fixed point; many would mean
		// the network barely mixes.
		if fixed > 10 {
			t.Errorf("proto %d: %d ports map to themselves", proto, fixed)
		}
		maps[proto] = out
	}
	for _, pair := range [][2]uint8{{6, 17}, {6, 132}, {17, 132}} {
		same := 0
		for p := range 1 << 16 {
			if maps[pair[0]][p] == maps[pair[1]][p] {
				same++
			}
		}
		if same > 10 {
			t.Errorf("protocols %d and %d agree on %d ports", pair[0], pair[1], same)
		}
	}
	other, err := NewPortMapper([]byte("fedcba9876543210"))
	if err != nil {
		t.Fatal(err)
	}
	if other.Map(6, 443) == pm.Map(6, 443) && other.Map(6, 80) == pm.Map(6, 80) {
		t.Error("two keys give the same ports")
	}
	if _, err := NewPortMapper(make([]byte, 32)); err == nil {
		t.Error("NewPortMapper took a 32-byte key")
	}
}

func TestPortMapperConcurrent(t *testing.T) {
	pm, err := NewPortMapper([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]uint16, 1024)
	ref, _ := NewPortMapper([]byte("0123456789abcdef"))
	for p := range want {
		want[p] = ref.Map(17, uint16(p))
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for p := range want {
				if got := pm.Map(17, uint16(p)); got != want[p] {
					t.Errorf("Map(17, %d) = %d, want %d", p, got, want[p])
					return
				}
			}
		})
	}
	wg.Wait()
}
