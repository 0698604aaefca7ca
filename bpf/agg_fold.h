/* SPDX-License-Identifier: GPL-2.0 */
/* Aggregated mode's fold: the fast path's segments counted in their flow,
 * added to the prefixes once per interval instead of once per packet.
 *
 * The fast path's common segment (fastpath.h) in aggregated mode used to
 * look up this CPU's slots of its source's and destination's prefixes and
 * write three counters in each and two in ePPing's global record: five or
 * more cache lines and some fifty instructions a packet that the default
 * mode does not pay (docs/performance.md, Round 20). Every such segment is
 * IPv4 TCP with the timestamp option, and a flow direction's segments are
 * nearly all of one kind: one length of link-layer header (14 bytes, 18 on
 * a VLAN) and one ECN codepoint (Not-ECT, or ECT(0) in an ECN flow). Their
 * records therefore only need how many there were and their IP bytes,
 * which the fast path adds in the sender direction of the flow it has just
 * found (flow.h, struct agg_fold; the kind in the count's top bits), in a
 * pair of counters chosen by the parity of agg_epoch.
 *
 * After user space flips agg_epoch and the grace period has passed
 * (internal/loader/aggregate.go), no program writes the old parity's
 * counters any more; rttscope_agg_fold, run then with BPF_PROG_TEST_RUN,
 * walks the flows in use and adds each one's old-parity counters to the
 * old epoch's prefix entries (creating them as a tracked packet would) and
 * to the global record, and zeroes them, before user space reads that
 * epoch. So every packet still lands in the interval it was counted in. A
 * flow that goes (closed, expired, evicted) adds both parities to the
 * current epoch first (agg_flush_flow), so nothing it counted is lost. A
 * flow going on one CPU while the walk reads it on another is not counted
 * twice: each takes a pair's two words with an atomic exchange, so each
 * word is added by one of them (agg_fold_take). Replay runs one
 * program at a time: there the fold is exact (TestFastPathSameOutput
 * compares every record with the general path's per-packet counting). */
#ifndef RTTSCOPE_AGG_FOLD_H
#define RTTSCOPE_AGG_FOLD_H

#include "agg.h"
#include "flowtable.h"

/* Takes the counts out of f into n (n->pkts with f's kind bits) and leaves
 * f empty (AGG_FOLD_READY and the kind too: its interval is over); false
 * when there was nothing. Each word with an atomic exchange: when the walk
 * and a going flow's flush take the same pair at once, one may get the
 * packets and the other the bytes, and each adds what it got, so the sums
 * stay exact (bytes alone come with no kind: no packet, no link-layer
 * byte, no ECN count). */
static __always_inline bool agg_fold_take(struct agg_fold *f,
					  struct agg_fold *n)
{
	n->pkts = __sync_lock_test_and_set(&f->pkts, 0);
	n->l3_bytes = __sync_lock_test_and_set(&f->l3_bytes, 0);
	return (n->pkts & AGG_FOLD_COUNT_MASK) || n->l3_bytes;
}

static __always_inline __u64 agg_fold_count(const struct agg_fold *n)
{
	return n->pkts & AGG_FOLD_COUNT_MASK;
}

static __always_inline __u8 agg_fold_ecn(const struct agg_fold *n)
{
	return (n->pkts >> AGG_FOLD_ECN_SHIFT) & 3;
}

/* The bytes of n's packets from the link-layer header on. */
static __always_inline __u64 agg_fold_l2l3_bytes(const struct agg_fold *n)
{
	return n->l3_bytes +
	       agg_fold_count(n) *
		       ((n->pkts >> AGG_FOLD_L2_SHIFT) & AGG_FOLD_L2_MAX);
}

static __always_inline void agg_fold_end(const struct agg_fold *n,
					 const struct in6_addr *addr, __u8 ipv,
					 __u32 epoch, bool tx)
{
	struct agg_stats *s;
	struct agg_pkt a;
	struct agg_key k;
	bool own;

	make_agg_key(&k, addr, ipv);
	s = agg_stats_create(&k, epoch, &own);
	if (!s)
		return;
	/* TCP, ePPing's TCP_TS class (the lengths passed below). */
	agg_pkt_set(&a, IPPROTO_TCP, true, agg_fold_ecn(n), 0, 0);
	count_traffic_n(tx ? &s->tx : &s->rx, &a, agg_fold_count(n),
			n->l3_bytes, agg_fold_l2l3_bytes(n));
}

/* Adds f, the fold of the direction of the flow with key that side sends
 * (0: key->saddr), to epoch's records of its source's prefix (rx) and its
 * destination's (tx) and to the global record, and empties it. A function
 * of its own: the going flow's callers are deep in the data path (6.1's
 * combined stack limit, see agg_count_slow). */
__noinline int agg_fold_add(const struct network_tuple *key, __u32 side,
			    struct agg_fold *f, __u32 epoch)
{
	struct agg_fold n;

	if (!key || !f || !agg_fold_take(f, &n))
		return 0;
	agg_fold_end(&n, side ? &key->daddr.ip : &key->saddr.ip, key->ipv,
		     epoch, false);
	agg_fold_end(&n, side ? &key->saddr.ip : &key->daddr.ip, key->ipv,
		     epoch, true);
	agg_count_global_ip_n(IPPROTO_TCP, agg_fold_count(&n),
			      agg_fold_l2l3_bytes(&n), agg_fold_ecn(&n));
	count_add(COUNTER_AGG_FOLDED, agg_fold_count(&n));
	return 0;
}

/* Folds pair p of side's direction of the flow in s into epoch, if it
 * holds anything (counts, or AGG_FOLD_READY alone, which it clears). */
static __always_inline void agg_fold_pair(struct flow_slot *s, int side,
					  __u32 p, __u32 epoch)
{
	struct agg_fold *f = &s->state.dir[side].u.agg.fold[p & 1];

	if (f->pkts)
		agg_fold_add(&s->key, side, f, epoch);
}

/* Both directions' folds of a going flow, both parities, to the current
 * epoch (declared in flowtable.h). */
int agg_flush_flow(struct flow_slot *s)
{
	__u32 epoch = READ_ONCE(agg_epoch);
	int side, p;

	if (!s)
		return 0;
#pragma unroll
	for (side = 0; side < 2; side++)
#pragma unroll
		for (p = 0; p < 2; p++)
			agg_fold_pair(s, side, p, epoch);
	return 0;
}

/* Folds the old parity of the flows among the slots that one word of
 * flow_used marks in use; a pair with only AGG_FOLD_READY set is emptied
 * too. */
static long agg_fold_used_cb(void *map, __u32 *word, __u64 *used,
			     __u32 *old_epoch)
{
	__u64 bits = *used;
	__u32 old = *old_epoch;
	struct flow_slot *s;
	int b, side;

	for (b = 0; b < FLOW_USED_BITS && bits; b++, bits >>= 1) {
		if (!(bits & 1))
			continue;
		/* A claimed slot's deleter flushes it. */
		s = flow_used_slot(*word, b);
		if (!s)
			continue;
#pragma unroll
		for (side = 0; side < 2; side++)
			agg_fold_pair(s, side, old, old);
	}
	return 0;
}

/* Run by user space after each epoch flip and grace period, before it
 * reads the old epoch (the packet BPF_PROG_TEST_RUN hands in is ignored).
 * It writes this CPU's copy of the per-CPU records; user space sums the
 * copies. */
SEC("tc")
int rttscope_agg_fold(struct __sk_buff *skb)
{
	__u32 old = READ_ONCE(agg_epoch) ^ 1;

	bpf_for_each_map_elem(&flow_used, agg_fold_used_cb, &old, 0);
	return TC_NEXT;
}

#endif /* RTTSCOPE_AGG_FOLD_H */
