/* SPDX-License-Identifier: GPL-2.0 */
/* Aggregated mode: per-prefix RTT histograms and traffic counters, kept in
 * the kernel and read by user space once per interval (docs/aggregation.md).
 *
 * Two per-CPU hash maps hold two intervals, and the traffic counters' cache
 * (agg_cache) two halves. The programs write to the map and half named by
 * agg_epoch; user space flips agg_epoch at the end of an interval, waits
 * until every program that may have read the old value has returned
 * (synchronize_rcu through membarrier), and then reads and empties the old
 * map and half, which nothing writes to any more. Each update therefore
 * lands in exactly one interval. */
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

struct traffic_counters {
	__u64 pkts[PROTO_CLASSES];
	__u64 bytes[PROTO_CLASSES]; /* IP header + payload */
	__u64 ecn[4]; /* packets by ECN codepoint (tos & 3) */
};

struct agg_stats {
	struct traffic_counters rx; /* ingress, from the prefix */
	struct traffic_counters tx; /* egress, to the prefix */
	__u64 rtt_count;
	__u64 rtt_sum;
	__u64 rtt_min;
	__u64 rtt_max;
	__u32 hist[HIST_BINS];
	__u32 reserved;
	__u32 source_count[RTT_SOURCES]; /* samples by enum rtt_source */
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

/* Which of agg_map0/agg_map1 (and which half of agg_cache) the programs
 * write to; user space flips it. */
__u32 agg_epoch = 0;

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

static __always_inline struct agg_stats *get_agg_stats(struct agg_key *k,
						       __u32 epoch)
{
	void *map = (epoch & 1) ? (void *)&agg_map1 : (void *)&agg_map0;
	struct agg_stats *s;
	__u32 zero = 0;
	void *init;
	int ret; /* see E2BIG_ERR */

	s = bpf_map_lookup_elem(map, k);
	if (s)
		return s;
	init = bpf_map_lookup_elem(&agg_zero, &zero);
	if (!init)
		return NULL;
	ret = bpf_map_update_elem(map, k, init, BPF_NOEXIST);
	if (ret == -E2BIG_ERR) {
		count(COUNTER_AGG_MAP_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(map, k);
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

/* Traffic counters: a small direct-mapped cache per CPU and epoch, keyed by
 * prefix and hook, in front of the prefix maps. A packet whose prefix is in
 * its slot costs an inlined per-CPU array lookup, a key compare and three
 * increments instead of a hash lookup (most traffic comes from few
 * prefixes at a time); a packet of another prefix first moves the slot's
 * counts to the prefix map of the same epoch. At the end of an interval
 * user space reads and empties that epoch's slots of every CPU together
 * with its prefix map, after the grace period: each packet is counted in
 * exactly one interval, as with the prefix maps alone. */
#define AGG_CACHE_BITS	6
#define AGG_CACHE_SLOTS (1 << AGG_CACHE_BITS)

struct agg_cache_entry {
	struct agg_key key; /* ipv 0: empty */
	__u32 egress; /* tx counts (1) or rx counts (0) of key's prefix */
	struct traffic_counters c;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct agg_cache_entry);
	__uint(max_entries, 2 * AGG_CACHE_SLOTS); /* [epoch][slot] */
} agg_cache SEC(".maps");

static __always_inline __u32 agg_cache_slot(const struct agg_key *k,
					    __u32 egress)
{
	const __u32 *w = k->prefix.in6_u.u6_addr32;
	__u32 h = w[0] ^ w[1] ^ w[2] ^ w[3] ^ egress;

	return (h * 0x9e3779b1) >> (32 - AGG_CACHE_BITS);
}

static __always_inline bool agg_cache_hit(const struct agg_cache_entry *ce,
					  const struct agg_key *k, __u32 egress)
{
	const __u32 *a = ce->key.prefix.in6_u.u6_addr32;
	const __u32 *b = k->prefix.in6_u.u6_addr32;

	return ce->key.ipv == k->ipv && ce->egress == egress && a[0] == b[0] &&
	       a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/* Moves a cache slot's counts to the prefix map of epoch. */
static __always_inline void agg_cache_flush(struct agg_cache_entry *ce,
					    __u32 epoch)
{
	struct traffic_counters *t;
	struct agg_stats *s;
	struct agg_key k;
	int i;

	if (!ce->key.ipv)
		return;
	k = ce->key; /* a stack copy for the map helpers */
	s = get_agg_stats(&k, epoch);
	if (!s)
		return;
	/* Plain additions: a per-CPU value, like the slot. */
	t = ce->egress ? &s->tx : &s->rx;
#pragma unroll
	for (i = 0; i < 4; i++) {
		t->pkts[i] += ce->c.pkts[i];
		t->bytes[i] += ce->c.bytes[i];
		t->ecn[i] += ce->c.ecn[i];
	}
}

/* Counts one IP packet for the prefix of its remote end, in the cache.
 * A global function: inlined it was 8 % cheaper per small packet
 * (docs/performance.md), but its stack then adds to the batched replay's
 * call chain, which 6.1's verifier limits to 512 bytes (544 with the other
 * RTT sources). */
__noinline int agg_count_packet(struct packet_info *p)
{
	const struct in6_addr *addr;
	struct agg_cache_entry *ce;
	struct agg_key k;
	__u32 epoch, egress, slot, cls;
	bool use_src;

	if (!p)
		return 0;
	/* Ingress: the remote end is the source; egress: the destination. */
	use_src = !p->is_egress != cfg_agg_reverse;
	addr = use_src ? &p->pid.flow.saddr.ip : &p->pid.flow.daddr.ip;
	if (p->pid.flow.ipv == AF_INET) {
		/* The v4-mapped key without make_agg_key's loop: only the
		 * last word varies. */
		k.prefix.in6_u.u6_addr32[0] = 0;
		k.prefix.in6_u.u6_addr32[1] = 0;
		k.prefix.in6_u.u6_addr32[2] = bpf_htonl(0xffff);
		k.prefix.in6_u.u6_addr32[3] =
			addr->in6_u.u6_addr32[3] &
			prefix_mask(96 + cfg_agg_prefix_v4, 3);
		k.ipv = AF_INET;
		k.prefix_len = cfg_agg_prefix_v4;
		k.reserved = 0;
	} else {
		make_agg_key(&k, addr, p->pid.flow.ipv);
	}
	epoch = agg_epoch & 1;
	egress = p->is_egress ? 1 : 0;
	slot = agg_cache_slot(&k, egress) + epoch * AGG_CACHE_SLOTS;
	ce = bpf_map_lookup_elem(&agg_cache, &slot);
	if (!ce)
		return 0;
	if (!agg_cache_hit(ce, &k, egress)) {
		agg_cache_flush(ce, epoch);
		__builtin_memset(&ce->c, 0, sizeof(ce->c));
		ce->key = k;
		ce->egress = egress;
	}
	cls = proto_class(p->pid.flow.proto) & (PROTO_CLASSES - 1);
	ce->c.pkts[cls]++;
	ce->c.bytes[cls] += p->l3_len;
	ce->c.ecn[p->ip_tos & 3]++;
	return 0;
}

/* Adds an RTT sample to the histogram of the prefix of the reply's source
 * (or destination with cfg_agg_reverse). */
__noinline int agg_add_rtt(struct packet_info *p, __u64 rtt)
{
	struct agg_stats *s;
	struct agg_key k;
	__u32 bin;

	if (!p)
		return 0;
	make_agg_key(&k,
		     cfg_agg_reverse ? &p->pid.flow.daddr.ip :
				       &p->pid.flow.saddr.ip,
		     p->pid.flow.ipv);
	s = get_agg_stats(&k, agg_epoch);
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
	count(COUNTER_AGG_SAMPLES);
	return 0;
}

#endif /* RTTSCOPE_AGG_H */
