package anon

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"sync"
)

// Cached returns s with a bounded cache of Addr and Prefix results in
// front of it, safe for concurrent use. Each of the two caches holds at
// most max entries. A full cache evicts one arbitrary entry per insertion
// (the first one Go's randomized map iteration yields), which costs O(1)
// and has no cliff where everything is recomputed at once; addresses seen
// often are likely to be back soon after an eviction.
//
// The cache is split into shards, each with its own lock, so concurrent
// callers rarely wait for each other. A max of 0 or less returns s itself.
func Cached(s Scheme, max int) Scheme {
	if max <= 0 {
		return s
	}
	return &cached{s: s, addrs: newCache[netip.Addr](max), prefixes: newCache[netip.Prefix](max)}
}

type cached struct {
	s        Scheme
	addrs    *cache[netip.Addr]
	prefixes *cache[netip.Prefix]
}

func (c *cached) Name() string           { return c.s.Name() }
func (c *cached) String() string         { return c.s.Name() }
func (c *cached) GoString() string       { return "anon.Scheme(" + c.s.Name() + ", cached)" }
func (c *cached) PrefixPreserving() bool { return c.s.PrefixPreserving() }

func (c *cached) Addr(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	b := a.As16()
	return c.addrs.get(a, b, 0, c.s.Addr)
}

func (c *cached) Prefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() {
		return p
	}
	b := p.Addr().As16()
	return c.prefixes.get(p, b, uint64(p.Bits()), c.s.Prefix)
}

// maxShards bounds the number of shards; a power of two.
const maxShards = 32

type cache[K comparable] struct {
	seed     uint64
	mask     uint64 // len(shards)-1
	perShard int
	shards   []shard[K]
}

type shard[K comparable] struct {
	mu sync.RWMutex
	m  map[K]K
	_  [40]byte // keeps neighbouring shards' locks off one cache line
}

func newCache[K comparable](max int) *cache[K] {
	n := min(maxShards, 1<<(bits.Len(uint(max))-1)) // largest power of two <= max
	c := &cache[K]{seed: rand.Uint64(), mask: uint64(n - 1), perShard: max / n, shards: make([]shard[K], n)}
	for i := range c.shards {
		c.shards[i].m = make(map[K]K)
	}
	return c
}

// get returns the cached value for k or computes it with f. b and extra are
// k's bits for choosing the shard; the seed keeps chosen inputs from
// landing in one shard.
func (c *cache[K]) get(k K, b [16]byte, extra uint64, f func(K) K) K {
	s := &c.shards[c.hash(b, extra)&c.mask]

	s.mu.RLock()
	v, ok := s.m[k]
	s.mu.RUnlock()
	if ok {
		return v
	}
	v = f(k) // outside the lock: it may take thousands of AES blocks
	s.mu.Lock()
	if len(s.m) >= c.perShard {
		for old := range s.m {
			delete(s.m, old)
			break
		}
	}
	s.m[k] = v
	s.mu.Unlock()
	return v
}

// hash mixes the key's bits with the seed by multiply-and-fold steps: fast,
// and good enough to spread keys over a few dozen shards.
func (c *cache[K]) hash(b [16]byte, extra uint64) uint64 {
	h := c.seed
	for _, w := range [3]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), extra} {
		hi, lo := bits.Mul64(h^w, 0x9e3779b97f4a7c15)
		h = hi ^ lo
	}
	return h
}
