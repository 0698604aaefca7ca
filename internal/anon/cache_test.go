package anon

import (
	"math/rand/v2"
	"net/netip"
	"sync"
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
	n := 0
	for i := range c.shards {
		c.shards[i].mu.RLock()
		n += len(c.shards[i].m)
		c.shards[i].mu.RUnlock()
	}
	return n
}
