package anon

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"sync"
)

// Cached returns s with a bounded cache of Addr results, and another of
// Prefix results, in front of it; safe for concurrent use. Each cache holds
// at most max entries, allocated up front (about 50 bytes per Addr
// entry; the Prefix cache is allocated on first use). A max of 0 or less
// returns s itself.
//
// Each cache is set-associative, like a CPU cache: a hash of the key picks
// one set of 8 entries, each set with its own lock, and a full set evicts
// by CLOCK (second chance): entries hit since the hand last passed are
// skipped once, so addresses seen often stay. Lookups and insertions cost
// O(1) and never allocate, concurrent callers rarely contend, and there is
// no moment where everything is evicted at once. Sets fill unevenly, so
// give max about twice the working set. The hash is seeded per cache, so
// chosen inputs cannot be aimed at one set from outside.
func Cached(s Scheme, max int) Scheme {
	if max <= 0 {
		return s
	}
	return &cached{s: s, max: max, addrs: newCache[netip.Addr](max)}
}

type cached struct {
	s     Scheme
	max   int
	addrs *cache[netip.Addr]

	// Prefixes are rare next to addresses: their cache is made on first use.
	prefixOnce sync.Once
	prefixes   *cache[netip.Prefix]
}

func (c *cached) Name() string           { return c.s.Name() }
func (c *cached) String() string         { return c.s.Name() }
func (c *cached) GoString() string       { return "anon.Scheme(" + c.s.Name() + ", cached)" }
func (c *cached) PrefixPreserving() bool { return c.s.PrefixPreserving() }

func (c *cached) Addr(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	return c.addrs.get(a, a.As16(), 0, c.s.Addr)
}

func (c *cached) Prefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() {
		return p
	}
	c.prefixOnce.Do(func() { c.prefixes = newCache[netip.Prefix](c.max) })
	return c.prefixes.get(p, p.Addr().As16(), uint64(p.Bits())+1, c.s.Prefix)
}

// ways is the number of entries in a set.
const ways = 8

type cache[K comparable] struct {
	seed uint64
	mask uint64 // len(sets)-1, a power of two minus one
	ways int    // entries used per set: ways, or max when that is smaller
	sets []set[K]
}

// set holds up to ways entries. The zero K (an invalid address or prefix,
// which is never cached) marks an empty slot.
type set[K comparable] struct {
	mu   sync.Mutex
	used uint8 // slots filled, from 0 up
	hand uint8 // CLOCK hand: next slot considered for eviction
	ref  uint8 // bit i: slot i was hit since the hand last passed it
	keys [ways]K
	vals [ways]K
}

func newCache[K comparable](max int) *cache[K] {
	w := min(ways, max)
	n := 1 << (bits.Len(uint(max/w)) - 1) // largest power of two <= max/w
	return &cache[K]{seed: rand.Uint64(), mask: uint64(n - 1), ways: w, sets: make([]set[K], n)}
}

// get returns the cached value for k, or computes it with f and caches it.
// b and extra are k's bits, to choose the set.
func (c *cache[K]) get(k K, b [16]byte, extra uint64, f func(K) K) K {
	s := &c.sets[c.hash(b, extra)&c.mask]
	s.mu.Lock()
	for i := range c.ways {
		if s.keys[i] == k {
			v := s.vals[i]
			s.ref |= 1 << i
			s.mu.Unlock()
			return v
		}
	}
	s.mu.Unlock()

	v := f(k) // outside the lock: it may take hundreds of AES blocks

	s.mu.Lock()
	for i := range c.ways {
		if s.keys[i] == k { // another goroutine got there first
			s.mu.Unlock()
			return v
		}
	}
	s.put(k, v, c.ways)
	s.mu.Unlock()
	return v
}

// put stores k and v in an empty slot or, in a full set, in the first slot
// from the hand on that has not been hit since the hand last passed it,
// clearing the hit bits it passes. Called with s.mu held.
func (s *set[K]) put(k, v K, ways int) {
	i := int(s.used)
	if i < ways {
		s.used++
	} else {
		for s.ref&(1<<s.hand) != 0 {
			s.ref &^= 1 << s.hand
			s.hand = uint8((int(s.hand) + 1) % ways)
		}
		i = int(s.hand)
		s.hand = uint8((i + 1) % ways)
	}
	s.keys[i], s.vals[i] = k, v
	s.ref &^= 1 << i
}

// hash mixes the key's bits with the seed by multiply-and-fold steps.
func (c *cache[K]) hash(b [16]byte, extra uint64) uint64 {
	h := c.seed
	for _, w := range [3]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), extra} {
		hi, lo := bits.Mul64(h^w, 0x9e3779b97f4a7c15)
		h = hi ^ lo
	}
	return h
}
