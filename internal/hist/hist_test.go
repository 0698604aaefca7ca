package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBinBounds(t *testing.T) {
	prev := uint64(0)
	for b := 0; b < Bins; b++ {
		lo := Lower(b)
		if b > 0 && lo != prev {
			t.Fatalf("bin %d starts at %d, previous ended at %d", b, lo, prev)
		}
		if Bin(lo) != b {
			t.Fatalf("Bin(Lower(%d)=%d) = %d", b, lo, Bin(lo))
		}
		if b < Overflow {
			hi := Upper(b)
			if Bin(hi-1) != b {
				t.Fatalf("Bin(Upper(%d)-1) = %d", b, Bin(hi-1))
			}
			if lo >= 1<<MinExp && float64(hi-lo)/float64(lo) > 1.0/32+1e-12 {
				t.Fatalf("bin %d [%d,%d) wider than 1/32", b, lo, hi)
			}
			prev = hi
		}
	}
	if Bin(60e9) >= Overflow {
		t.Fatalf("60 s falls into the overflow bin")
	}
	if Bin(1e3) >= Subs || Bin(1100) < Subs {
		t.Fatalf("1 µs boundary misplaced")
	}
	if Bin(^uint64(0)) != Overflow {
		t.Fatal("max value not in overflow")
	}
}

// Quantiles of random sets stay within the documented bound of the exact
// nearest-rank quantile.
func TestQuantileBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 200; iter++ {
		n := 1 + r.IntN(5000)
		vals := make([]uint64, n)
		h := make([]uint32, Bins)
		for i := range vals {
			// log-uniform from 100 ns to 60 s
			v := uint64(100 * math.Pow(6e8, r.Float64()))
			vals[i] = v
			h[Bin(v)]++
		}
		slices.Sort(vals)
		for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 1} {
			want := vals[NearestRank(n, q)-1]
			got := Quantile(h, uint64(n), q, vals[0], vals[n-1])
			diff := float64(got) - float64(want)
			if diff < 0 {
				diff = -diff
			}
			bound := float64(want) / 64
			if want < 1<<MinExp {
				bound = 16
			}
			if diff > bound+1 {
				t.Fatalf("n=%d q=%v: got %d want %d (bound %v)", n, q, got, want, bound)
			}
		}
	}
}
