package anon

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
)

// Cached gives what the scheme gives, from many goroutines at once, with a
// cache small enough to evict all the time.
func TestCachedEqualsUncached(t *testing.T) {
	for _, s := range testSchemes(t) {
		for _, max := range []int{1, 7, 64, 100000} {
			c := Cached(s, max)
			if c.Name() != s.Name() || c.PrefixPreserving() != s.PrefixPreserving() {
				t.Fatalf("Cached(%s) is %s", s, c)
			}
			r := rand.New(rand.NewPCG(uint64(max), 5))
			pool := make([]netip.Addr, 300)
			for i := range pool {
				pool[i] = randAddr(r, i%2 == 1)
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 6))
					for range 400 {
						a := pool[r.IntN(len(pool))]
						if got, want := c.Addr(a), s.Addr(a); got != want {
							t.Errorf("Cached(%s, %d).Addr(%s) = %s, want %s", s, max, a, got, want)
							return
						}
						p, _ := a.Prefix(r.IntN(a.BitLen() + 1))
						if got, want := c.Prefix(p), s.Prefix(p); got != want {
							t.Errorf("Cached(%s, %d).Prefix(%s) = %s, want %s", s, max, p, got, want)
							return
						}
					}
				})
			}
			wg.Wait()
			if n := cacheLen(c.(*cached).addrs); n > max {
				t.Errorf("Cached(%s, %d) holds %d addresses", s, max, n)
			}
			if got := c.Addr(netip.Addr{}); got.IsValid() {
				t.Errorf("Cached(%s).Addr(invalid) = %s", s, got)
			}
		}
	}
	if s := testSchemes(t)[0]; Cached(s, 0) != s {
		t.Error("Cached(s, 0) is not s")
	}
}

func cacheLen[K comparable](c *cache[K]) int {
	var zero K
	n := 0
	for i := range c.sets {
		s := &c.sets[i]
		s.mu.Lock()
		for _, k := range s.keys {
			if k != zero {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// counting counts the calls that reach the scheme behind a cache.
type counting struct {
	Scheme
	n atomic.Int64
}

func (c *counting) Addr(a netip.Addr) netip.Addr { c.n.Add(1); return c.Scheme.Addr(a) }

func TestCachedHitsAndEvicts(t *testing.T) {
	inner := &counting{Scheme: testSchemes(t)[0]}
	c := Cached(inner, 256)
	// A fixed seed makes the test repeatable: with some seeds more than 8
	// of the addresses share a set, and a cyclic scan through an
	// overfull set misses every time.
	c.(*cached).addrs.seed = 1
	for i := range 1000 {
		c.Addr(seqAddr(i%100, i%2 == 1))
	}
	// 100 distinct addresses in 256 entries: nearly all of the 1000 calls
	// must be hits.
	if n := inner.n.Load(); n < 100 || n > 150 {
		t.Errorf("%d of 1000 calls reached the scheme for 100 distinct addresses", n)
	}
	// A hot address survives a stream of new ones: CLOCK gives it a second
	// chance each time the hand comes round.
	hot := seqAddr(5000, false)
	c.Addr(hot)
	inner.n.Store(0)
	for i := range 2000 {
		c.Addr(hot)
		c.Addr(seqAddr(6000+i, false))
	}
	if n := inner.n.Load(); n > 2000+20 {
		t.Errorf("hot address recomputed %d times among 2000 new ones", n-2000)
	}
	inner.n.Store(0)
	for i := range 10000 {
		c.Addr(seqAddr(1000+i, false))
	}
	if n := cacheLen(c.(*cached).addrs); n > 256 || n < 200 {
		t.Errorf("cache holds %d entries after 10000 misses, want 200..256", n)
	}
	if inner.n.Load() != 10000 {
		t.Errorf("%d of 10000 new addresses reached the scheme", inner.n.Load())
	}
}
