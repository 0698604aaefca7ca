/* SPDX-License-Identifier: GPL-2.0 */
/* Flow and packet identifiers. Addresses are kept as 16 bytes, IPv4 as
 * v4-mapped IPv6 (::ffff:a.b.c.d), so one key type serves both families. */
#ifndef RTTSCOPE_TUPLE_H
#define RTTSCOPE_TUPLE_H

#include "common.h"

struct flow_address {
	struct in6_addr ip;
	__u16 port; /* network byte order; ICMP echo identifier for ICMP */
	__u16 reserved;
};

/* One direction of a flow: saddr sent the packet. */
struct network_tuple {
	struct flow_address saddr;
	struct flow_address daddr;
	__u16 proto; /* IPPROTO_* */
	__u8 ipv; /* AF_INET or AF_INET6 */
	__u8 reserved;
};

/* A packet identifier (TCP TSval, ICMP echo sequence, ...) in one direction
 * of a flow: the key of the timestamp map. */
struct packet_id {
	struct network_tuple flow;
	__u32 identifier;
};

static __always_inline void reverse_tuple(const struct network_tuple *in,
					  struct network_tuple *out)
{
	out->saddr = in->daddr;
	out->daddr = in->saddr;
	out->proto = in->proto;
	out->ipv = in->ipv;
	out->reserved = 0;
}

/* A tuple on the stack that tuple_equal() reads: the verifier refuses a
 * misaligned stack access, and struct network_tuple itself is only 4-byte
 * aligned (its 44 bytes are in events and map keys). */
#define TUPLE_ALIGNED __attribute__((aligned(8)))

/* Words that may alias the tuple's fields: clang must not move these loads
 * across the stores that built the tuple. */
typedef __u64 __attribute__((may_alias)) tuple_word64;
typedef __u32 __attribute__((may_alias)) tuple_word32;

/* Whether two tuples are the same, compared as five 64-bit words and a
 * 32-bit one: no call to memcmp, no branch per word (half the compares of
 * 32-bit words: ~4 ns of a flow lookup). Both must be 8-byte aligned: a
 * map value's, or a TUPLE_ALIGNED variable's. */
static __always_inline bool tuple_equal(const struct network_tuple *a,
					const struct network_tuple *b)
{
	const tuple_word64 *x = (const tuple_word64 *)a;
	const tuple_word64 *y = (const tuple_word64 *)b;
	__u64 diff = 0;
	int i;

	_Static_assert(sizeof(*a) == 5 * 8 + 4, "network_tuple is 44 bytes");
#pragma unroll
	for (i = 0; i < 5; i++)
		diff |= x[i] ^ y[i];
	diff |= ((const tuple_word32 *)a)[10] ^ ((const tuple_word32 *)b)[10];
	return diff == 0;
}

/* A tuple as the flow table's hash and key compare read it: its first 40
 * bytes as five 64-bit words as they lie in memory, and its last 32-bit
 * word. The fast path builds them from a packet's fields alone (fast_key
 * in fastpath.h), and the compiler keeps them in registers. */
struct tuple_words {
	__u64 w[5];
	__u32 last;
};

/* tuple_equal() of t and the tuple tw holds. */
static __always_inline bool tuple_is(const struct network_tuple *t,
				     const struct tuple_words *tw)
{
	const tuple_word64 *x = (const tuple_word64 *)t;
	__u64 diff = 0;
	int i;

#pragma unroll
	for (i = 0; i < 5; i++)
		diff |= x[i] ^ tw->w[i];
	diff |= ((const tuple_word32 *)t)[10] ^ tw->last;
	return diff == 0;
}

/* Orders two endpoints so that both directions of a flow share one key in
 * the flow map. Returns true when a sorts before b. */
static __always_inline bool endpoint_lt(const struct flow_address *a,
					const struct flow_address *b)
{
	const __u32 *x = (const __u32 *)&a->ip;
	const __u32 *y = (const __u32 *)&b->ip;
	int i;

	for (i = 0; i < 4; i++) {
		if (x[i] != y[i])
			return bpf_ntohl(x[i]) < bpf_ntohl(y[i]);
	}
	return bpf_ntohs(a->port) < bpf_ntohs(b->port);
}

#endif /* RTTSCOPE_TUPLE_H */
