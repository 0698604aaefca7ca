/* SPDX-License-Identifier: GPL-2.0 */
/* Aggregated mode: per-prefix RTT histograms and traffic counters, kept in
 * the kernel and read by user space once per interval (docs/aggregation.md).
 *
 * Two per-CPU hash maps hold two intervals. The programs write to the map
 * named by agg_epoch; user space flips agg_epoch at the end of an interval,
 * waits until every program that may have read the old value has returned
 * (synchronize_rcu through membarrier), and then reads and empties the old
 * map, which nothing writes to any more. Each update therefore lands in
 * exactly one interval. */
#ifndef RTTSCOPE_AGG_H
#define RTTSCOPE_AGG_H

#include "packet.h"
#include "config.h"
#include "counters.h"
#include "hist.h"
#include "maps.h"

struct agg_key {
	struct in6_addr prefix; /* masked; IPv4 as v4-mapped IPv6 */
	__u8 ipv; /* AF_INET or AF_INET6 */
	__u8 prefix_len;
	__u16 reserved;
};

enum proto_class {
	PROTO_CLASS_TCP = 0,
	PROTO_CLASS_UDP = 1,
	PROTO_CLASS_ICMP = 2, /* ICMP and ICMPv6 */
	PROTO_CLASS_OTHER = 3,
	PROTO_CLASSES = 4,
};

/* ePPing's traffic classes (its rx_stats/tx_stats): TCP packets with the
 * timestamp option (the ones tracked), other TCP, everything else. */
enum epping_class {
	EPP_TCP_TS = 0,
	EPP_TCP_NOTS = 1,
	EPP_OTHER = 2,
	EPP_CLASSES = 3,
};

/* One end's traffic in one direction. Two counts are left to user space,
 * which derives them from the others (internal/loader/aggregate.go,
 * addTraffic): the packets of ECN codepoint 0 (Not-ECT) are all packets
 * less those of the other three, and ePPing's TCP_TS packets are TCP's
 * less TCP_noTS's. So the common packet, a TCP segment with timestamps
 * and no ECN, writes three counters here instead of five, and in the
 * order below they lie within 80 bytes of its source's prefix slot (from
 * agg_slot.filled on; 136 before), two or three cache lines rather than
 * three or four: a live packet waits for every line it touches
 * (docs/performance.md, Round 14). */
struct traffic_counters {
	__u64 pkts[PROTO_CLASSES];
	__u64 bytes[PROTO_CLASSES]; /* IP header + payload */
	__u64 epp_bytes[EPP_CLASSES]; /* from the link-layer header on */
	__u64 epp_pkts[EPP_CLASSES]; /* [EPP_TCP_TS] stays 0 (above) */
	__u64 ecn[4]; /* packets by ECN codepoint (tos & 3); [0] stays 0 */
};

/* ePPing's histogram: 250 linear bins of 4 ms, the last one open-ended. */
#define AGG_LIN_BINS  250
#define AGG_LIN_WIDTH (4 * NS_PER_MS)

struct agg_stats {
	struct traffic_counters rx; /* packets from the prefix */
	struct traffic_counters tx; /* packets to the prefix */
	__u64 rtt_count;
	__u64 rtt_sum;
	__u64 rtt_min;
	__u64 rtt_max;
	__u32 hist[HIST_BINS];
	__u32 lin_hist[AGG_LIN_BINS];
	__u32 reserved;
	__u32 source_count[RTT_SOURCES]; /* samples by enum rtt_source */
};

/* One IP protocol's packets in the global record; bytes from the
 * link-layer header on. */
struct agg_proto_counts {
	__u64 pkts;
	__u64 bytes;
};

/* ePPing's global counters, since the start: user space reports their
 * differences per interval. proto is indexed by IP protocol: a packet's
 * two counts share a cache line. ecn[0] stays 0: user space derives the
 * Not-ECT packets as all IP packets less the other codepoints' (as in
 * struct traffic_counters). */
struct agg_global {
	__u64 ecn[4];
	__u64 nonip_pkts;
	__u64 nonip_bytes;
	__u64 slot_fills; /* this CPU's agg_slots fills (agg_slot.filled) */
	__u64 reserved; /* proto[] from byte 64 of the value */
	struct agg_proto_counts proto[256];
};

_Static_assert(sizeof(struct agg_key) == 20, "agg_key layout");
_Static_assert(sizeof(struct agg_stats) % 8 == 0, "agg_stats layout");

struct agg_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, struct agg_key);
	__type(value, struct agg_stats);
	__uint(max_entries, 1024);
};

struct agg_map agg_map0 SEC(".maps");
struct agg_map agg_map1 SEC(".maps");

/* All zero, never written: the initial value of a new prefix (too large
 * for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct agg_stats);
	__uint(max_entries, 1);
} agg_zero SEC(".maps");

/* The backup entries (0.0.0.0/0, ::/0) of both epochs, index epoch * 2 +
 * (family is IPv6): every untracked packet of a prefix without an entry of
 * its own lands here, and an array element costs no hashing. User space
 * reads them as the /0 records (internal/loader/aggregate.go). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct agg_stats);
	__uint(max_entries, 4);
} agg_backup SEC(".maps");

/* A per-CPU cache of prefixes known to have no entry in a prefix map:
 * untracked traffic of such a prefix skips the failed hash lookup. A slot
 * is valid only while its tag equals agg_absent_tag(): agg_gen counts the
 * entries programs created (the only way a prefix gets an entry; user
 * space only zeroes and deletes them), the low bit names the map. So a
 * slot never hides an entry created before the packet that reads it. */
struct agg_absent_slot {
	struct agg_key key;
	__u32 tag;
};

#define AGG_ABSENT_SLOTS 256

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct agg_absent_slot);
	__uint(max_entries, AGG_ABSENT_SLOTS);
} agg_absent SEC(".maps");

/* A per-CPU cache of prefixes that have an entry, which counts their
 * traffic itself: a packet whose prefix sits in its slot adds to the slot
 * and looks nothing up in the hash map. An empty slot is filled by a
 * tracked packet whose prefix's entry exists in the current map, and
 * stays that prefix's until the end of the interval. Each epoch has its
 * own AGG_SLOTS slots (index epoch * AGG_SLOTS + slot), so that user
 * space, after the epoch flip and the grace period, adds the old epoch's
 * slots to their prefixes' records and zeroes them while nothing writes
 * there: each count still lands in exactly one interval
 * (internal/loader/aggregate.go). User space deletes entries only from
 * the old map, whose slots it has just folded. */
struct agg_slot {
	struct agg_key key;
	__u32 reserved;
	/* 0: empty (user space zeroes a folded epoch); else this fill's
	 * reference, unique on the machine: bits 0-7 the slot's index in its
	 * epoch, 8-31 the CPU, 32-63 the CPU's fill count (agg_global). A
	 * flow direction that keeps it finds the slot again with one compare
	 * (agg_count_ref). */
	__u64 filled;
	struct traffic_counters rx;
	struct traffic_counters tx;
};

#define AGG_SLOTS 256

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct agg_slot);
	__uint(max_entries, 2 * AGG_SLOTS);
} agg_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct agg_global);
	__uint(max_entries, 1);
} agg_global_map SEC(".maps");

/* Which of agg_map0/agg_map1 the programs write to; user space flips it. */
__u32 agg_epoch = 0;
/* Prefix entries created by the programs (wraps after 2^31: a slot of
 * agg_absent would have to survive that many creations to be wrong). */
__u32 agg_gen = 0;

static __always_inline __u32 prefix_mask(__u32 plen, __u32 word)
{
	__u32 bits;

	if (plen <= word * 32)
		return 0;
	bits = plen - word * 32;
	if (bits >= 32)
		return 0xffffffff;
	return bpf_htonl(~0U << (32 - bits));
}

/* A prefix key's words made in registers: what make_agg_key() writes of
 * an address, also for code that compares keys without building one in
 * memory (the untracked packets' counting). */
struct agg_words {
	__u32 w[4]; /* the masked address, network order; IPv4 v4-mapped */
	__u8 ipv;
	__u8 prefix_len;
};

static __always_inline struct agg_words
agg_words_of(const struct in6_addr *addr, __u8 ipv)
{
	__u32 plen =
		ipv == AF_INET ? 96 + cfg_agg_prefix_v4 : cfg_agg_prefix_v6;
	struct agg_words kw;
	int i;

	/* IPv4 addresses are v4-mapped: the mask also keeps ::ffff. */
#pragma unroll
	for (i = 0; i < 4; i++)
		kw.w[i] = addr->in6_u.u6_addr32[i] & prefix_mask(plen, i);
	kw.ipv = ipv;
	kw.prefix_len = ipv == AF_INET ? cfg_agg_prefix_v4 : cfg_agg_prefix_v6;
	return kw;
}

/* The words of IPv4 prefix `prefix` (the masked address, network order)
 * of length plen: a v4-mapped address is 0, 0, ::ffff and the address. */
static __always_inline struct agg_words agg_words_v4(__be32 prefix, __u8 plen)
{
	struct agg_words kw = {.w = {0, 0, bpf_htonl(0xffff), prefix},
			       .ipv = AF_INET,
			       .prefix_len = plen};

	return kw;
}

static __always_inline void agg_key_set(struct agg_key *k,
					const struct agg_words *kw)
{
	int i;

#pragma unroll
	for (i = 0; i < 4; i++)
		k->prefix.in6_u.u6_addr32[i] = kw->w[i];
	k->ipv = kw->ipv;
	k->prefix_len = kw->prefix_len;
	k->reserved = 0;
}

/* Written field by field, not through agg_words: a struct agg_words
 * temporary would take frame space in the batched replay program, whose
 * call chain is at 6.1's 512-byte stack limit. */
static __always_inline void make_agg_key(struct agg_key *k,
					 const struct in6_addr *addr, __u8 ipv)
{
	/* IPv4 addresses are v4-mapped: the mask also keeps ::ffff. */
	__u32 plen =
		ipv == AF_INET ? 96 + cfg_agg_prefix_v4 : cfg_agg_prefix_v6;
	int i;

#pragma unroll
	for (i = 0; i < 4; i++)
		k->prefix.in6_u.u6_addr32[i] =
			addr->in6_u.u6_addr32[i] & prefix_mask(plen, i);
	k->ipv = ipv;
	k->prefix_len = ipv == AF_INET ? cfg_agg_prefix_v4 : cfg_agg_prefix_v6;
	k->reserved = 0;
}

static __always_inline void *agg_map_of(__u32 epoch)
{
	return (epoch & 1) ? (void *)&agg_map1 : (void *)&agg_map0;
}

static __always_inline struct agg_stats *agg_backup_stats(__u32 epoch, __u8 ipv)
{
	__u32 i = (epoch & 1) * 2 + (ipv == AF_INET6);

	return bpf_map_lookup_elem(&agg_backup, &i);
}

/* The stats of prefix k for a packet that may create its entry (a tracked
 * packet, an RTT sample). A prefix gets an entry of its own only that way,
 * as in ePPing; when the map is full the packet goes to the backup entry
 * of its family. */
static __always_inline struct agg_stats *
agg_stats_create(struct agg_key *k, __u32 epoch, bool *own)
{
	void *map = agg_map_of(epoch);
	struct agg_stats *s;
	__u32 zero = 0;
	void *init;
	int ret; /* see E2BIG_ERR */

	*own = true;
	s = bpf_map_lookup_elem(map, k);
	if (s)
		return s;
	init = bpf_map_lookup_elem(&agg_zero, &zero);
	if (!init)
		return NULL;
	ret = bpf_map_update_elem(map, k, init, BPF_NOEXIST);
	if (ret == 0)
		__sync_fetch_and_add(&agg_gen, 1);
	if (ret != -E2BIG_ERR)
		return bpf_map_lookup_elem(map, k);
	count(COUNTER_AGG_MAP_FULL);
	*own = false;
	return agg_backup_stats(epoch, k->ipv);
}

static __always_inline __u32 agg_absent_tag(__u32 epoch)
{
	return (READ_ONCE(agg_gen) << 1) | (epoch & 1);
}

/* The slot index (agg_absent, agg_slots) of a prefix key whose four
 * address words xor to words_xor. */
static __always_inline __u32 agg_index_of(__u32 words_xor, __u8 prefix_len)
{
	return ((words_xor ^ prefix_len) * 0x9e3779b1U) >> 24;
}

static __always_inline __u32 agg_absent_index(const struct agg_key *k)
{
	const __u32 *w = k->prefix.in6_u.u6_addr32;

	return agg_index_of(w[0] ^ w[1] ^ w[2] ^ w[3], k->prefix_len);
}

static __always_inline bool agg_key_equal(const struct agg_key *a,
					  const struct agg_key *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;

	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3]) |
		(x[4] ^ y[4])) == 0;
}

/* The stats of prefix k for an untracked packet: its entry if it has one,
 * else its family's backup entry. tag: agg_absent_tag(epoch), read before
 * the lookup, so that an entry created after it invalidates the slot. */
static __always_inline struct agg_stats *
agg_stats_lookup(struct agg_key *k, __u32 epoch, __u32 tag)
{
	struct agg_absent_slot *slot;
	struct agg_stats *s;
	__u32 i = agg_absent_index(k);

	slot = bpf_map_lookup_elem(&agg_absent, &i);
	if (slot && slot->tag == tag && agg_key_equal(&slot->key, k))
		return agg_backup_stats(epoch, k->ipv);
	s = bpf_map_lookup_elem(agg_map_of(epoch), k);
	if (s)
		return s;
	if (slot) {
		slot->key = *k;
		slot->tag = tag;
	}
	return agg_backup_stats(epoch, k->ipv);
}

static __always_inline __u32 proto_class(__u16 proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return PROTO_CLASS_TCP;
	case IPPROTO_UDP:
		return PROTO_CLASS_UDP;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return PROTO_CLASS_ICMP;
	}
	return PROTO_CLASS_OTHER;
}

/* What aggregated mode counts of one packet, worked out once for both of
 * its ends. */
struct agg_pkt {
	__u32 cls; /* enum proto_class */
	__u32 epp; /* enum epping_class */
	__u32 ecn; /* tos & 3 */
	__u32 l3_len; /* IP header + payload */
	__u32 l2l3_len; /* from the link-layer header on */
};

/* Adds n packets of one kind (a's class, ePPing class and ECN codepoint)
 * and their l3_bytes / l2l3_bytes to tc: one packet per call on the
 * packet path, a flow's folded packets at the interval's end
 * (agg_fold.h). */
static __always_inline void count_traffic_n(struct traffic_counters *tc,
					    const struct agg_pkt *a, __u64 n,
					    __u64 l3_bytes, __u64 l2l3_bytes)
{
	__u32 cls = a->cls & (PROTO_CLASSES - 1), epp = a->epp;

	tc->pkts[cls] += n;
	tc->bytes[cls] += l3_bytes;
	/* Not-ECT and TCP_TS packets are derived (struct traffic_counters). */
	if (a->ecn & 3)
		tc->ecn[a->ecn & 3] += n;
	barrier_var(epp);
	if (epp < EPP_CLASSES) {
		tc->epp_bytes[epp] += l2l3_bytes;
		if (epp != EPP_TCP_TS)
			tc->epp_pkts[epp] += n;
	}
}

static __always_inline void count_traffic(struct traffic_counters *tc,
					  const struct agg_pkt *a)
{
	count_traffic_n(tc, a, 1, a->l3_len, a->l2l3_len);
}

/* Gives an empty slot to prefix k, whose own entry exists in the current
 * map. A filled slot is not taken over: two prefixes sharing a slot would
 * otherwise hand it back and forth, with a hash lookup and a flush each
 * time; the later one counts in its entry until user space empties the
 * slots at the end of the interval. */
static __always_inline void agg_slot_fill(struct agg_slot *slot,
					  const struct agg_key *k, __u32 i)
{
	struct agg_global *g;
	__u32 zero = 0;
	__u64 fills;

	g = bpf_map_lookup_elem(&agg_global_map, &zero);
	if (!g)
		return;
	/* Per CPU: no other program writes this CPU's copy meanwhile. */
	fills = ++g->slot_fills;
	__builtin_memset(&slot->rx, 0, sizeof(slot->rx));
	__builtin_memset(&slot->tx, 0, sizeof(slot->tx));
	slot->key = *k;
	slot->filled = fills << 32 |
		       (__u64)(bpf_get_smp_processor_id() & 0xffffff) << 8 |
		       (i & (AGG_SLOTS - 1));
}

/* Whether k is the key whose words are kw, compared as 8, 8 and 4 bytes
 * against words in registers (constant words fold: an IPv4 key's first
 * eight bytes are compared with zero). k must be 8-byte aligned (a map
 * value's). */
static __always_inline bool agg_key_is(const struct agg_key *k,
				       const struct agg_words *kw)
{
	const __u64 *x = (const __u64 *)k;

	_Static_assert(__builtin_offsetof(struct agg_key, ipv) == 16 &&
			       __builtin_offsetof(struct agg_key, prefix_len) ==
				       17,
		       "agg_key_is() compares the key as 8, 8, 4 bytes");
	return x[0] == ((__u64)kw->w[0] | (__u64)kw->w[1] << 32) &&
	       x[1] == ((__u64)kw->w[2] | (__u64)kw->w[3] << 32) &&
	       *(const __u32 *)&x[2] == (kw->ipv | (__u32)kw->prefix_len << 8);
}

/* Whether k is the key make_agg_key() makes of the IPv4 prefix `prefix`
 * (the masked address, network order) of length plen. */
static __always_inline bool agg_key_is_v4(const struct agg_key *k, __u32 prefix,
					  __u32 plen)
{
	struct agg_words kw = agg_words_v4(prefix, plen);

	return agg_key_is(k, &kw);
}

/* This CPU's slot of the IPv4 prefix of addr (network order) in epoch,
 * if it holds that prefix; NULL otherwise. The slot agg_count_end() finds
 * through the prefix key, with the key's words made in registers: a
 * v4-mapped address (make_agg_key) is 0, 0, ::ffff and the masked
 * address, so the hash and the compare fold to a few operations. For the
 * fast path, which so reads no reference (agg_count_ref) from the flow:
 * those lie in a cache line of the flow's slot that the fast path
 * otherwise leaves alone (the ACK direction's), and name one CPU's fill,
 * so a flow whose packets come to two CPUs has them refused at every
 * switch. The steps lab's ingress (ACKs) took x0.75 of the time with the
 * keys (docs/performance.md, Round 14). */
static __always_inline struct agg_slot *agg_slot_of_v4(__be32 addr, __u32 epoch)
{
	__u32 plen = cfg_agg_prefix_v4;
	__u32 mapped = bpf_htonl(0xffff);
	__u32 prefix = addr & prefix_mask(96 + plen, 3);
	__u32 i = (epoch & 1) * AGG_SLOTS + agg_index_of(mapped ^ prefix, plen);
	struct agg_slot *slot;

	_Static_assert(__builtin_offsetof(struct agg_slot, key) == 0,
		       "agg_slot's key is 8-byte aligned");
	slot = bpf_map_lookup_elem(&agg_slots, &i);
	if (!slot)
		return NULL;
	/* No look at slot->filled: an empty slot is all zero (user space
	 * zeroes it whole), and no IPv4 key is (it holds ::ffff). */
	if (!agg_key_is_v4(&slot->key, prefix, plen))
		return NULL;
	return slot;
}

/* Counts packet a in the slot that reference ref names, if it still holds
 * the fill ref was taken from: on this CPU, in this epoch, not emptied or
 * refilled since. Returns false otherwise, and the caller takes the way
 * through the prefix key. */
static __always_inline bool agg_count_ref(const struct agg_pkt *a, __u64 ref,
					  __u32 epoch, bool tx)
{
	__u32 i = (epoch & 1) * AGG_SLOTS + (ref & (AGG_SLOTS - 1));
	struct agg_slot *slot;

	if (!ref)
		return false;
	slot = bpf_map_lookup_elem(&agg_slots, &i);
	if (!slot || slot->filled != ref)
		return false;
	count_traffic(tx ? &slot->tx : &slot->rx, a);
	return true;
}

/* Counts packet a for one end, prefix k (tx: the packet goes to the
 * prefix, else comes from it): in its slot if the prefix holds it, else
 * in its entry (created when tracked, which then fills the slot if it is
 * empty) or its family's backup entry. Counting happens where the
 * pointer was checked: a pointer computed from a maybe-NULL map value and
 * returned would meet the verifier before its NULL check once clang
 * merges the branches. Returns whether the prefix has its own entry in
 * this epoch's map (a slot is only filled for such a prefix). */
static __always_inline bool agg_count_end(const struct agg_pkt *a,
					  struct agg_key *k, __u32 epoch,
					  __u32 tag, bool tracked, bool tx,
					  __u64 *ref)
{
	__u32 i = (epoch & 1) * AGG_SLOTS + agg_absent_index(k);
	struct agg_slot *slot;
	struct agg_stats *s;
	bool own = false;

	slot = bpf_map_lookup_elem(&agg_slots, &i);
	if (!slot)
		return false;
	if (!slot->filled || !agg_key_equal(&slot->key, k)) {
		if (tracked)
			s = agg_stats_create(k, epoch, &own);
		else
			s = agg_stats_lookup(k, epoch, tag);
		if (!s)
			return false;
		if (!own || slot->filled) {
			count_traffic(tx ? &s->tx : &s->rx, a);
			return own;
		}
		agg_slot_fill(slot, k, i);
	}
	if (ref && *ref != slot->filled)
		*ref = slot->filled;
	count_traffic(tx ? &slot->tx : &slot->rx, a);
	return true;
}

/* n IP packets of protocol proto and ECN codepoint tos & 3 in ePPing's
 * global record, l2l3_bytes from the link-layer header on: one packet on
 * the packet path, a flow's folded packets at the interval's end. */
static __always_inline void agg_count_global_ip_n(__u8 proto, __u64 n,
						  __u64 l2l3_bytes, __u8 tos)
{
	struct agg_global *g;
	__u32 zero = 0;

	g = bpf_map_lookup_elem(&agg_global_map, &zero);
	if (!g)
		return;
	g->proto[proto].pkts += n;
	g->proto[proto].bytes += l2l3_bytes;
	if (tos & 3) /* Not-ECT is derived (struct agg_global) */
		g->ecn[tos & 3] += n;
}

static __always_inline void agg_count_global_ip(__u8 proto, __u32 l2l3_len,
						__u8 tos)
{
	agg_count_global_ip_n(proto, 1, l2l3_len, tos);
}

/* ePPing's global record: every packet by IP protocol (non-IP apart) and
 * ECN codepoint. pkt_len is used for packets that are not IP. */
static __always_inline void agg_count_global(struct packet_info *p,
					     __u32 pkt_len)
{
	struct agg_global *g;
	__u32 zero = 0;

	if (p->l3_valid) {
		agg_count_global_ip(p->pid.flow.proto & 0xff,
				    p->l2_len + p->l3_len, p->ip_tos);
		return;
	}
	g = bpf_map_lookup_elem(&agg_global_map, &zero);
	if (!g)
		return;
	g->nonip_pkts++;
	g->nonip_bytes += pkt_len;
}

/* What count_traffic() counts of an IP packet of protocol proto: tcp_ts
 * is ePPing's TCP class (struct packet_info). */
static __always_inline void agg_pkt_set(struct agg_pkt *a, __u16 proto,
					bool tcp_ts, __u8 tos, __u32 l3_len,
					__u32 l2l3_len)
{
	a->cls = proto_class(proto);
	/* ePPing's classes whatever source measures the packet: a TCP
	 * segment without the option is TCP_noTS also when the sequence
	 * source tracks it (docs/epping.md). */
	a->epp = proto != IPPROTO_TCP ? EPP_OTHER :
		 tcp_ts		      ? EPP_TCP_TS :
					EPP_TCP_NOTS;
	a->ecn = tos & 3;
	a->l3_len = l3_len;
	a->l2l3_len = l2l3_len;
}

static __always_inline void agg_pkt_of(struct agg_pkt *a,
				       const struct packet_info *p)
{
	agg_pkt_set(a, p->pid.flow.proto, p->tcp_ts, p->ip_tos, p->l3_len,
		    p->l2_len + p->l3_len);
}

/* One end (tx: the destination) of an untracked packet, whose prefix
 * key's words are kw: agg_count_end() of its prefix with the key in
 * registers. The slot if the prefix holds it (an empty slot is all zero,
 * which no key is: its ipv is not); else, when the absent-prefix cache
 * says the prefix has no entry, its family's backup entry; else
 * agg_stats_lookup() with the key (made on the stack only then, about
 * once per prefix, CPU and interval). */
static __always_inline void agg_count_untracked_end(const struct agg_pkt *a,
						    const struct agg_words *kw,
						    __u32 epoch, __u32 tag,
						    bool tx)
{
	__u32 i = agg_index_of(kw->w[0] ^ kw->w[1] ^ kw->w[2] ^ kw->w[3],
			       kw->prefix_len);
	__u32 si = (epoch & 1) * AGG_SLOTS + i;
	struct agg_absent_slot *absent;
	struct agg_stats *s;
	struct agg_slot *slot;
	struct agg_key k;

	_Static_assert(
		__builtin_offsetof(struct agg_slot, key) == 0 &&
			__builtin_offsetof(struct agg_absent_slot, key) == 0,
		"the slots' keys are 8-byte aligned");
	slot = bpf_map_lookup_elem(&agg_slots, &si);
	if (slot && agg_key_is(&slot->key, kw)) {
		count_traffic(tx ? &slot->tx : &slot->rx, a);
		return;
	}
	absent = bpf_map_lookup_elem(&agg_absent, &i);
	if (absent && absent->tag == tag && agg_key_is(&absent->key, kw)) {
		s = agg_backup_stats(epoch, kw->ipv);
	} else {
		agg_key_set(&k, kw);
		s = agg_stats_lookup(&k, epoch, tag);
	}
	if (s)
		count_traffic(tx ? &s->tx : &s->rx, a);
}

/* Counts one packet as ePPing does: in the global record and, when it is
 * IP, for the prefix of its source (rx: from the prefix) and of its
 * destination (tx: to the prefix). Here for packets no RTT source tracks
 * (they create no prefix entries). Inlined into the packet programs: a
 * bpf-to-bpf call returns through the kernel's return thunk where the
 * CPU needs one (SRSO on AMD Zen), which cost aggregated mode about 15 ns
 * a packet here (docs/performance.md, "One call, then none"). */
static __always_inline void agg_count(struct packet_info *p, __u32 pkt_len)
{
	struct agg_pkt a;
	struct agg_key k;
	__u32 epoch, tag;

	agg_count_global(p, pkt_len);
	if (!p->l3_valid)
		return;
	agg_pkt_of(&a, p);
	epoch = READ_ONCE(agg_epoch);
	tag = agg_absent_tag(epoch);
	make_agg_key(&k, &p->pid.flow.saddr.ip, p->pid.flow.ipv);
	agg_count_end(&a, &k, epoch, tag, false, false, NULL);
	make_agg_key(&k, &p->pid.flow.daddr.ip, p->pid.flow.ipv);
	agg_count_end(&a, &k, epoch, tag, false, true, NULL);
}

/* agg_count() of an untracked IP packet from its header's fields: proto,
 * tos (the traffic class in IPv6), l3_len (IP header and payload), the
 * bytes of link-layer header before it, and its prefix keys' words (src,
 * dst): the same counts, without a packet_info or the keys in memory. */
static __always_inline void agg_count_untracked(__u8 proto, __u8 tos,
						__u32 l3_len, __u32 l2_len,
						const struct agg_words *src,
						const struct agg_words *dst)
{
	__u32 epoch, tag;
	struct agg_pkt a;

	agg_count_global_ip(proto, l2_len + l3_len, tos);
	agg_pkt_set(&a, proto, false, tos, l3_len, l2_len + l3_len);
	epoch = READ_ONCE(agg_epoch);
	tag = agg_absent_tag(epoch);
	agg_count_untracked_end(&a, src, epoch, tag, false);
	agg_count_untracked_end(&a, dst, epoch, tag, true);
}

/* agg_count_untracked() of an IPv4 packet (iph, checked by the caller:
 * fastpath.h, fast_untracked_v4). */
static __always_inline void agg_count_untracked_v4(const struct iphdr *iph,
						   __u32 l2_len)
{
	__u8 plen = cfg_agg_prefix_v4;
	__u32 mask = prefix_mask(96 + plen, 3);
	struct agg_words src = agg_words_v4(iph->saddr & mask, plen);
	struct agg_words dst = agg_words_v4(iph->daddr & mask, plen);

	agg_count_untracked(iph->protocol, iph->tos, bpf_ntohs(iph->tot_len),
			    l2_len, &src, &dst);
}

/* agg_count_untracked() of an IPv6 packet whose next header is its
 * transport (ip6h, checked by the caller: fastpath.h, fast_untracked_v6). */
static __always_inline void agg_count_untracked_v6(const struct ipv6hdr *ip6h,
						   __u32 l2_len)
{
	struct agg_words src = agg_words_of(&ip6h->saddr, AF_INET6);
	struct agg_words dst = agg_words_of(&ip6h->daddr, AF_INET6);

	agg_count_untracked(ip6h->nexthdr, ipv6_tclass(ip6h),
			    bpf_ntohs(ip6h->payload_len) + sizeof(*ip6h),
			    l2_len, &src, &dst);
}

/* One end (tx: the destination) of a tracked packet whose flow direction
 * did not name its slot (ref: where it keeps the reference, NULL without
 * a flow): through the prefix key. A function of its own, so that its key
 * is not in handle_packet's frame (6.1's combined stack limit in the
 * replay batch program); its return thunk is paid on misses only, about
 * once per flow direction, CPU and interval. */
__noinline int agg_count_slow(struct packet_info *p, __u32 tx, __u64 *ref)
{
	struct agg_pkt a;
	struct agg_key k;
	__u32 epoch;

	if (!p)
		return 0;
	agg_pkt_of(&a, p);
	epoch = READ_ONCE(agg_epoch);
	make_agg_key(&k, tx ? &p->pid.flow.daddr.ip : &p->pid.flow.saddr.ip,
		     p->pid.flow.ipv);
	return agg_count_end(&a, &k, epoch, 0, true, tx, ref);
}

/* agg_count for a tracked packet (it may create prefix entries), once its
 * flow is known: fa, the sender direction's part (NULL without a flow),
 * whose slot references spare the prefix keys when they still name the
 * slots, and which learns when both prefixes have their entries
 * (AGG_FOLD_READY). */
static __always_inline void
agg_count_tracked(struct packet_info *p, __u32 pkt_len, struct flow_dir_agg *fa)
{
	bool own_src, own_dst;
	struct agg_pkt a;
	__u32 epoch;

	agg_count_global(p, pkt_len);
	if (!p->l3_valid)
		return;
	if (!fa) {
		agg_count_slow(p, 0, NULL);
		agg_count_slow(p, 1, NULL);
		return;
	}
	agg_pkt_of(&a, p);
	epoch = READ_ONCE(agg_epoch);
	/* A reference still valid names a slot filled in this epoch. */
	own_src = agg_count_ref(&a, fa->ref[0], epoch, false) ||
		  agg_count_slow(p, 0, &fa->ref[0]);
	own_dst = agg_count_ref(&a, fa->ref[1], epoch, true) ||
		  agg_count_slow(p, 1, &fa->ref[1]);
	if (cfg_agg_fold && own_src && own_dst)
		fa->fold[epoch & 1].pkts |= AGG_FOLD_READY;
}

/* Adds an RTT sample to the histogram of the prefix of the reply's source
 * (or destination with cfg_agg_reverse). */
__noinline int agg_add_rtt(struct packet_info *p, __u64 rtt)
{
	struct agg_stats *s;
	struct agg_key k;
	bool own;
	__u32 bin;

	if (!p)
		return 0;
	make_agg_key(&k,
		     cfg_agg_reverse ? &p->pid.flow.daddr.ip :
				       &p->pid.flow.saddr.ip,
		     p->pid.flow.ipv);
	s = agg_stats_create(&k, READ_ONCE(agg_epoch), &own);
	if (!s)
		return 0;
	if (!s->rtt_count || rtt < s->rtt_min)
		s->rtt_min = rtt;
	if (rtt > s->rtt_max)
		s->rtt_max = rtt;
	s->rtt_count++;
	s->rtt_sum += rtt;
	if (p->reply_source < RTT_SOURCES)
		s->source_count[p->reply_source]++;
	bin = hist_bin(rtt);
	/* clang knows bin < HIST_BINS and drops the check; 6.1's verifier
	 * cannot prove it and needs to see it. */
	barrier_var(bin);
	if (bin < HIST_BINS)
		s->hist[bin]++;
	bin = rtt < AGG_LIN_BINS * AGG_LIN_WIDTH ? rtt / AGG_LIN_WIDTH :
						   AGG_LIN_BINS - 1;
	barrier_var(bin);
	if (bin < AGG_LIN_BINS)
		s->lin_hist[bin]++;
	count(COUNTER_AGG_SAMPLES);
	return 0;
}

#endif /* RTTSCOPE_AGG_H */
