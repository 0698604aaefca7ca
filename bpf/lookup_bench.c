// SPDX-License-Identifier: GPL-2.0
/* Micro-benchmark of the flow lookup (internal/bench/lookup_bench_test.go):
 * what one packet pays to find its flow state, by kind of table, under
 * BPF_PROG_TEST_RUN on warm caches. Each run looks up LOOKUP_BATCH keys of
 * LOOKUP_FLOWS flows (created by the first run) and bumps a counter in
 * each state, as the packet programs do. LOOKUP_NONE misses none but reads
 * the key. It answers issue 15's suspect
 * "the 40+-byte keys": how much of a lookup is the key's size, and how
 * much the hash map itself. */
#include "flow.h"

#define LOOKUP_BATCH 64
#define LOOKUP_FLOWS 8 /* a power of two */
#define LOOKUP_TABLE 65536 /* a power of two, as the flow map's default */

/* Exported to Go (bpf2go -type lookup_table). */
enum lookup_table {
	LOOKUP_NONE = 0, /* the key built, nothing looked up: the loop's cost */
	LOOKUP_HASH_TUPLE = 1, /* hash map, struct network_tuple (44 bytes) */
	LOOKUP_HASH_V4 = 2, /* hash map, a 16-byte IPv4-only key */
	LOOKUP_ARRAY_TUPLE = 3, /* array slot chosen by a hash in BPF */
};

struct v4_key {
	__be32 saddr, daddr;
	__be16 sport, dport;
	__u8 proto;
	__u8 reserved[3];
};

/* LOOKUP_ARRAY_TUPLE's slot: the key stored beside the state. One probe,
 * no collision handling: the lower bound of a table of our own. */
struct tuple_slot {
	struct network_tuple key;
	__u32 used;
	struct flow_state state;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct network_tuple);
	__type(value, struct flow_state);
	__uint(max_entries, LOOKUP_TABLE);
} tuple_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct v4_key);
	__type(value, struct flow_state);
	__uint(max_entries, LOOKUP_TABLE);
} v4_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct tuple_slot);
	__uint(max_entries, LOOKUP_TABLE);
} tuple_slots SEC(".maps");

BTF_EXPORT(enum lookup_table, lookup_table);

volatile const __u32 lookup_kind = LOOKUP_NONE;

__u64 lookup_runs = 0;
__u64 lookup_missed = 0; /* lookups that found no state (LOOKUP_NONE: all) */

/* A flow of the benchmark: 10.0.0.n:40000+n -> 10.0.1.1:443, TCP. */
static __always_inline void bench_tuple(struct network_tuple *t, __u32 n)
{
	__builtin_memset(t, 0, sizeof(*t));
	t->saddr.ip.in6_u.u6_addr32[2] = bpf_htonl(0xffff);
	t->saddr.ip.in6_u.u6_addr32[3] = bpf_htonl(0x0a000000 | n);
	t->saddr.port = bpf_htons(40000 + n);
	t->daddr.ip.in6_u.u6_addr32[2] = bpf_htonl(0xffff);
	t->daddr.ip.in6_u.u6_addr32[3] = bpf_htonl(0x0a000101);
	t->daddr.port = bpf_htons(443);
	t->proto = IPPROTO_TCP;
	t->ipv = AF_INET;
}

/* The initial state of a new flow: a global, so that no lookup pays for
 * zeroing 264 bytes of stack (clang does that before the lookup, not in
 * the branch that needs it). */
struct flow_state lookup_zero = {};

static __always_inline void *hash_lookup(void *map, void *key)
{
	void *v;

	v = bpf_map_lookup_elem(map, key);
	if (v)
		return v;
	bpf_map_update_elem(map, key, &lookup_zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

/* A hash of the key's 11 words: the words multiplied by odd constants
 * (independent multiplies, which the CPU runs in parallel, where a chain
 * of multiply-xor steps waits on each one) and the products xor-ed. */
static __always_inline __u32 tuple_hash(const struct network_tuple *t)
{
	const __u32 *w = (const __u32 *)t;
	__u64 h = 0;
	int i;

#pragma unroll
	for (i = 0; i < sizeof(*t) / 4; i++)
		h ^= (__u64)w[i] * (0x9e3779b97f4a7c15ULL + 2 * i);
	return (__u32)(h >> 32) ^ (__u32)h;
}

static __always_inline struct flow_state *
slot_lookup(const struct network_tuple *t)
{
	__u32 i = tuple_hash(t) & (LOOKUP_TABLE - 1);
	struct tuple_slot *s;

	s = bpf_map_lookup_elem(&tuple_slots, &i);
	if (!s)
		return NULL;
	if (s->used && tuple_equal(&s->key, t))
		return &s->state;
	if (s->used)
		return NULL;
	s->key = *t;
	s->used = 1;
	return &s->state;
}

static __always_inline struct flow_state *lookup_one(__u32 n)
{
	struct network_tuple t;
	struct v4_key k4;

	bench_tuple(&t, n);
	switch (lookup_kind) {
	case LOOKUP_HASH_TUPLE:
		return hash_lookup(&tuple_map, &t);
	case LOOKUP_HASH_V4:
		k4.saddr = t.saddr.ip.in6_u.u6_addr32[3];
		k4.daddr = t.daddr.ip.in6_u.u6_addr32[3];
		k4.sport = t.saddr.port;
		k4.dport = t.daddr.port;
		k4.proto = t.proto;
		__builtin_memset(k4.reserved, 0, sizeof(k4.reserved));
		return hash_lookup(&v4_map, &k4);
	case LOOKUP_ARRAY_TUPLE:
		return slot_lookup(&t);
	}
	/* Read the key, so that it is built as for the other kinds. */
	if (t.saddr.port == 0)
		lookup_missed++;
	return NULL;
}

char LICENSE[] SEC("license") = "GPL";

SEC("tc")
int lookup_bench(struct __sk_buff *skb)
{
	struct flow_state *fs;
	__u32 i;

	for (i = 0; i < LOOKUP_BATCH; i++) {
		fs = lookup_one(i & (LOOKUP_FLOWS - 1));
		if (fs)
			fs->dir[0].sent_pkts++;
		else if (lookup_kind != LOOKUP_NONE)
			lookup_missed++;
	}
	lookup_runs++;
	return TC_NEXT;
}
