/* SPDX-License-Identifier: GPL-2.0 */
/* The flow table: per-flow state in the slots of an array map, each flow in
 * one of FLOW_WAYS slots of the bucket its key hashes to.
 *
 * Why not a BPF hash map: a hash map lookup is a call into the kernel
 * (__htab_map_lookup_elem: jhash, bucket walk, memcmp), the only call left
 * on the per-packet path, and live about 60 % of the egress program's time
 * (docs/performance.md, "The flow lookup, by kind of table"). An array
 * lookup is inlined by the verifier, and the hash and key compare below
 * are a few dozen instructions.
 *
 * A slot's tag says what it holds: 0 empty, FLOW_TAG_CLAIMED being filled
 * by one CPU, anything else a published flow (its hash's upper half with
 * bit 1 set, so never 0 or 1). Every change of a tag is a compare-and-swap,
 * and whoever's swap succeeds owns the change: creating the flow, or
 * deleting it (and reporting its end) as bpf_map_delete_elem's return value
 * decided with the hash map. A slot being deleted stays claimed until its
 * end is reported; then it keeps its stale contents until the next creator
 * clears them. A packet on another CPU that still holds its pointer may
 * write to it meanwhile, as with the preallocated hash map, whose elements
 * are reused the same way. docs/flowtable-design.md has the
 * design and its alternatives. */
#ifndef RTTSCOPE_FLOWTABLE_H
#define RTTSCOPE_FLOWTABLE_H

#include "flow.h"
#include "config.h"
#include "counters.h"
#include "summary.h"

#define FLOW_WAYS	 4
#define FLOW_TAG_CLAIMED 1

/* The tag is 64 bits wide only because a compare-and-swap on 32 bits needs
 * BPF's v3 instruction set, and the objects are built for v1. */
struct flow_slot {
	__u64 tag;
	struct network_tuple key;
	__u32 index; /* this slot's own index in flow_map, for flow_used */
	struct flow_state state;
};

_Static_assert(__builtin_offsetof(struct flow_slot, state) % 8 == 0,
	       "flow_slot layout");

/* max_entries = cfg_flow_buckets * FLOW_WAYS, set by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_slot);
	__uint(max_entries, 16384 * FLOW_WAYS);
} flow_map SEC(".maps");

/* Which slots hold something: bit i % 64 of word i / 64 is set while slot
 * i is claimed or published. The walks over the table (cleanup, summaries)
 * read this bitmap, 1 bit per slot, and then only the slots in use, where a
 * walk of flow_map would read every slot of a mostly empty table (65 MB at
 * the default size, every --cleanup-interval).
 * max_entries = FLOW_USED_WORDS(slots), set by the loader. */
#define FLOW_USED_BITS	       64
#define FLOW_USED_WORDS(slots) (((slots) + FLOW_USED_BITS - 1) / FLOW_USED_BITS)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, FLOW_USED_WORDS(16384 * FLOW_WAYS));
} flow_used SEC(".maps");

/* Where a key lives: the first slot of its bucket, and its tag. */
struct flow_ref {
	__u32 base;
	__u32 tag;
};

/* A multiply-xor chain over the key's 64-bit words, started from the
 * load's random seed, so that which tuples share a bucket differs from one
 * load to the next and cannot be aimed at (not a cryptographic hash). The
 * low half picks the bucket (multiply-shift: any bucket count), the high
 * half is the tag. Two entries: a key in memory (flow_locate) and the
 * words of one in registers (flow_locate_words, the fast path's), whose
 * loads the general path does not pay: copied out of memory they would be
 * kept on the stack across the bucket's lookups, and the batched replay's
 * call chain has no room for that on 6.1 (replay_last). */
static __always_inline __u64 flow_hash_step(__u64 h, __u64 word)
{
	return (h ^ word) * 0x9e3779b97f4a7c15ULL;
}

static __always_inline void flow_hash_end(__u64 h, __u32 last,
					  struct flow_ref *ref)
{
	h = (h ^ last) * 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 29;
	ref->base =
		(__u32)(((__u64)(__u32)h * cfg_flow_buckets) >> 32) * FLOW_WAYS;
	ref->tag = (__u32)(h >> 32) | 2;
}

/* key must be 8-byte aligned (TUPLE_ALIGNED, or a map value's). */
static __always_inline void flow_locate(const struct network_tuple *key,
					struct flow_ref *ref)
{
	const tuple_word64 *x = (const tuple_word64 *)key;
	__u64 h = cfg_flow_seed;
	int i;

#pragma unroll
	for (i = 0; i < 5; i++)
		h = flow_hash_step(h, x[i]);
	flow_hash_end(h, ((const tuple_word32 *)key)[10], ref);
}

static __always_inline void flow_locate_words(const struct tuple_words *tw,
					      struct flow_ref *ref)
{
	__u64 h = cfg_flow_seed;
	int i;

#pragma unroll
	for (i = 0; i < 5; i++)
		h = flow_hash_step(h, tw->w[i]);
	flow_hash_end(h, tw->last, ref);
}

static __always_inline struct flow_slot *flow_slot_at(__u32 i)
{
	return bpf_map_lookup_elem(&flow_map, &i);
}

/* The flow published in slot b of flow_used's word `word` (for the walks
 * over the bitmap), or NULL: empty, or claimed (being created, or taken
 * by a CPU that deletes it and reports its end). */
static __always_inline struct flow_slot *flow_used_slot(__u32 word, int b)
{
	struct flow_slot *s = flow_slot_at(word * FLOW_USED_BITS + b);

	if (!s || READ_ONCE(s->tag) <= FLOW_TAG_CLAIMED)
		return NULL;
	return s;
}

/* Way w of ref's bucket, when it holds a flow with ref's tag. */
static __always_inline struct flow_slot *flow_way(const struct flow_ref *ref,
						  int w)
{
	struct flow_slot *s = flow_slot_at(ref->base + w);

	if (s && READ_ONCE(s->tag) == ref->tag)
		return s;
	return NULL;
}

/* The slot of the flow with this key (8-byte aligned), NULL if there is
 * none. */
static __always_inline struct flow_slot *
flow_lookup(const struct network_tuple *key)
{
	struct flow_slot *s;
	struct flow_ref ref;
	int w;

	flow_locate(key, &ref);
#pragma unroll
	for (w = 0; w < FLOW_WAYS; w++) {
		s = flow_way(&ref, w);
		if (s && tuple_equal(&s->key, key))
			return s;
	}
	return NULL;
}

/* flow_lookup() of the key that tw holds. */
static __always_inline struct flow_slot *
flow_lookup_words(const struct tuple_words *tw)
{
	struct flow_slot *s;
	struct flow_ref ref;
	int w;

	flow_locate_words(tw, &ref);
#pragma unroll
	for (w = 0; w < FLOW_WAYS; w++) {
		s = flow_way(&ref, w);
		if (s && tuple_is(&s->key, tw))
			return s;
	}
	return NULL;
}

/* Takes the flow in s, published with tag, for deletion: the slot is then
 * claimed, so that no lookup finds the flow and no creator reuses the slot
 * while the caller reports the flow's end from it. Returns whether this call
 * took it: only then may the caller report, and it must flow_free() the
 * slot after. */
static __always_inline bool flow_take(struct flow_slot *s, __u64 tag)
{
	return tag > FLOW_TAG_CLAIMED &&
	       __sync_val_compare_and_swap(&s->tag, tag, FLOW_TAG_CLAIMED) ==
		       tag;
}

/* Sets (delta 1) or clears (delta -1) slot i's bit in flow_used. Only the
 * CPU that holds the slot claimed calls this, so a bit is never added while
 * set nor taken while clear, and an atomic add does what an atomic or /
 * and-not would (those need BPF's v3 instruction set; the objects are v1). */
static __always_inline void flow_used_add(__u32 i, __s64 delta)
{
	__u32 word = i / FLOW_USED_BITS;
	__u64 *w = bpf_map_lookup_elem(&flow_used, &word);

	if (w)
		__sync_fetch_and_add(w, delta << (i % FLOW_USED_BITS));
}

/* Adds the fast path's packets that the flow's directions still keep
 * (dir_fast_unflushed) to their counter: the flow is going. A packet of the
 * flow still on the fast path on another CPU can add one after this read,
 * which is then not counted: a window of nanoseconds, like the flow's
 * other races (handle_packet). */
static __always_inline void flow_flush_fast(const struct flow_state *fs)
{
	__u64 n = dir_fast_unflushed(&fs->dir[0]) +
		  dir_fast_unflushed(&fs->dir[1]);

	if (n)
		count_add(COUNTER_FAST_PATH, n);
}

/* agg_fold.h: what a going flow counted for aggregated mode's prefixes
 * and has not folded into them yet goes to them now. */
int agg_flush_flow(struct flow_slot *s);

/* Empties a slot taken by flow_take(). Its bit goes first, while the slot
 * is still claimed: a creator can only set it again after the swap below.
 * A swap rather than a store: it also orders the caller's reads of the slot
 * before the slot can be reused. */
static __always_inline void flow_free(struct flow_slot *s)
{
	flow_flush_fast(&s->state);
	if (cfg_agg_fold)
		agg_flush_flow(s);
	flow_used_add(s->index, -1);
	__sync_val_compare_and_swap(&s->tag, FLOW_TAG_CLAIMED, 0);
}

/* Fills a slot this CPU has claimed and publishes it. */
static __always_inline struct flow_slot *
flow_fill(struct flow_slot *s, const struct network_tuple *key, __u32 tag)
{
	s->key = *key;
	__builtin_memset(&s->state, 0, sizeof(s->state));
	/* The swap orders the stores above before the tag on every
	 * architecture: a reader that sees the tag sees the key. */
	__sync_val_compare_and_swap(&s->tag, FLOW_TAG_CLAIMED, tag);
	return s;
}

/* Whether a flow may be replaced by a new one (the overload policy of
 * docs/aggregation.md): it never gave an RTT sample in either direction
 * (a flood of new 5-tuples creates exactly such flows), or it has been idle
 * past its timeout. Established flows are never replaced. */
static __always_inline bool flow_replaceable(const struct flow_slot *s,
					     __u64 now)
{
	const struct flow_state *fs = &s->state;
	__u64 timeout, last;

	if (!fs->dir[0].min_rtt && !fs->dir[1].min_rtt)
		return true;
	timeout = s->key.proto == IPPROTO_TCP ? cfg_tcp_flow_timeout_ns :
						cfg_other_flow_timeout_ns;
	last = flow_last_seen(fs);
	return now > last && now - last > timeout;
}

/* A full bucket: claims its replaceable flow seen least recently, if
 * any (none: the flow map is full for this flow, counted). Its summary
 * goes without a report (as an evicted flow's always did). */
static __always_inline struct flow_slot *flow_evict(__u32 base, __u64 now)
{
	struct flow_slot *s, *victim = NULL;
	__u64 oldest = ~0ULL, last, tag = 0, t;
	int w;

#pragma unroll
	for (w = 0; w < FLOW_WAYS; w++) {
		s = flow_slot_at(base + w);
		if (!s)
			continue;
		t = READ_ONCE(s->tag);
		if (t <= FLOW_TAG_CLAIMED || !flow_replaceable(s, now))
			continue;
		last = flow_last_seen(&s->state);
		if (last < oldest) {
			oldest = last;
			victim = s;
			tag = t;
		}
	}
	if (!victim) {
		count(COUNTER_FLOW_MAP_FULL);
		return NULL;
	}
	/* Lost to another CPU evicting it too: not a full table. */
	if (__sync_val_compare_and_swap(&victim->tag, tag, FLOW_TAG_CLAIMED) !=
	    tag)
		return NULL;
	if (cfg_flow_summary)
		bpf_map_delete_elem(&summary_map, &victim->key);
	flow_flush_fast(&victim->state);
	if (cfg_agg_fold)
		agg_flush_flow(victim);
	count(COUNTER_FLOWS_EVICTED);
	count(COUNTER_FLOWS_DELETED);
	return victim;
}

/* Creates the flow with this key. Returns its slot, with *created set when
 * this call made it; the slot of the same flow when another CPU created it
 * first; NULL when there is no room (counted by flow_evict) or another CPU
 * is creating or evicting a flow in the same bucket right now (the next
 * packet tries again). Only
 * after flow_lookup() missed. */
static __always_inline struct flow_slot *
flow_create(const struct network_tuple *key, __u64 now, bool *created)
{
	struct flow_slot *s;
	struct flow_ref ref;
	int w, empty = -1;
	__u64 t;

	*created = false;
	flow_locate(key, &ref);
	/* The whole bucket first: the flow may have been created in any
	 * of its ways since the lookup missed. (The empty way is kept as an
	 * index: clang would merge tests of a pointer into arithmetic on it,
	 * which the verifier refuses.) */
#pragma unroll
	for (w = 0; w < FLOW_WAYS; w++) {
		s = flow_slot_at(ref.base + w);
		if (!s)
			return NULL;
		t = READ_ONCE(s->tag);
		if (t == FLOW_TAG_CLAIMED)
			return NULL;
		/* Created meanwhile; or a flow whose tag is the same (one in
		 * 2^31 pairs of a bucket): the new one waits for it to end. */
		if (t == ref.tag)
			return tuple_equal(&s->key, key) ? s : NULL;
		if (!t && empty < 0)
			empty = w;
	}
	if (empty >= 0) {
		s = flow_slot_at(ref.base + empty);
		if (!s ||
		    __sync_val_compare_and_swap(&s->tag, 0, FLOW_TAG_CLAIMED))
			return NULL;
		s->index = ref.base + empty;
		flow_used_add(s->index, 1);
	} else { /* a taken slot stays in use: its bit stays set */
		s = flow_evict(ref.base, now);
		if (!s)
			return NULL;
	}
	*created = true;
	return flow_fill(s, key, ref.tag);
}

#endif /* RTTSCOPE_FLOWTABLE_H */
