/* SPDX-License-Identifier: GPL-2.0 */
/* Overload policy of the timestamp map (docs/aggregation.md): when it is
 * full, a timestamp that is worth less than the new one is replaced before
 * the new one is refused. A ring shared by all CPUs remembers the keys
 * inserted last, as a queue: inserts add at head, the candidates are taken
 * from tail (the oldest key still queued), and tail moves past every key it
 * has looked at, replaced or not, so a key is considered once. (Slots
 * written by two CPUs at once may hold a mix of two keys: such a key names
 * no entry and is skipped.) A timestamp is only replaced when its direction
 * never got a sample or it is older than the timestamp timeout. The flow
 * table evicts inside a full bucket instead (flowtable.h, same rule). */
#ifndef RTTSCOPE_EVICT_H
#define RTTSCOPE_EVICT_H

#include "flow.h"
#include "config.h"
#include "counters.h"
#include "maps.h"
#include "flowtable.h"

#define EVICT_RING_SIZE 256 /* power of two */
#define EVICT_TRIES	8

struct ts_ring {
	__u32 head;
	__u32 tail;
	struct packet_id keys[EVICT_RING_SIZE];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct ts_ring);
	__uint(max_entries, 1);
} ts_ring SEC(".maps");

static __always_inline void remember_ts(const struct packet_id *pid)
{
	struct ts_ring *r;
	__u32 zero = 0, slot;

	r = bpf_map_lookup_elem(&ts_ring, &zero);
	if (!r)
		return;
	/* Two CPUs may pick the same slot: one key is lost, no harm. (The
	 * fetch-and-add result needs BPF atomics v3; clang's default cpu
	 * is v1.) */
	slot = r->head & (EVICT_RING_SIZE - 1);
	__sync_fetch_and_add(&r->head, 1);
	r->keys[slot] = *pid;
}

/* The flow key of evict_ts's candidate, per CPU: a map value rather than
 * a stack copy keeps evict_ts's frame small. It is the deepest call of the
 * data path, and the batched replay's whole call chain must fit older
 * verifiers' 512 bytes (6.1; see replay_last). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct network_tuple);
	__uint(max_entries, 1);
} evict_scratch SEC(".maps");

/* Deletes one replaceable timestamp. Returns 1 when it made room. */
__noinline int evict_ts(__u64 now)
{
	struct network_tuple *fkey;
	struct flow_slot *fslot;
	struct flow_state *fs;
	struct packet_id *pid;
	struct ts_ring *r;
	__u32 zero = 0, i, slot, side, head, tail;
	__u64 *ts;

	r = bpf_map_lookup_elem(&ts_ring, &zero);
	if (!r)
		return 0;
	fkey = bpf_map_lookup_elem(&evict_scratch, &zero);
	if (!fkey)
		return 0;
	head = r->head;
	tail = r->tail;
	if (head - tail > EVICT_RING_SIZE)
		tail = head - EVICT_RING_SIZE; /* overwritten */
	for (i = 0; i < EVICT_TRIES && tail != head; i++) {
		slot = tail++ & (EVICT_RING_SIZE - 1);
		pid = &r->keys[slot];
		ts = bpf_map_lookup_elem(&ts_map, pid);
		if (!ts)
			continue;
		side = canonical_tuple(&pid->flow, fkey) & SIDE_MASK;
		fslot = flow_lookup(fkey);
		fs = fslot ? &fslot->state : NULL;
		if (fs && fs->dir[side].min_rtt && now > *ts &&
		    now - *ts <= cfg_ts_timeout_ns)
			continue;
		if (bpf_map_delete_elem(&ts_map, pid) != 0)
			continue;
		r->tail = tail;
		count(COUNTER_TS_EVICTED);
		count(COUNTER_TS_DELETED);
		if (fs)
			outstanding_dec(&fs->dir[side]);
		return 1;
	}
	r->tail = tail;
	return 0;
}

#endif /* RTTSCOPE_EVICT_H */
