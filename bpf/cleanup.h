/* SPDX-License-Identifier: GPL-2.0 */
/* Expiry of stale state, run every --cleanup-interval, driven by user space
 * (user space never walks the maps itself). Two ways to walk the maps, with
 * the same per-entry logic:
 *  - map-element iterators (iter/bpf_map_elem, 5.8+), run by reading them;
 *  - where the kernel refuses those (some security policies do), a tc
 *    program that user space runs with BPF_PROG_TEST_RUN and that walks the
 *    maps with bpf_for_each_map_elem (5.13+).
 * The flow table is an array (flowtable.h): both walks go over its bitmap
 * of slots in use, flow_used, and visit only those; a flow is deleted by
 * swapping its tag. Deleting the current element is safe in both walks on
 * the timestamp map (a hash). */
#ifndef RTTSCOPE_CLEANUP_H
#define RTTSCOPE_CLEANUP_H

#include "counters.h"
#include "maps.h"
#include "flowtable.h"

static __always_inline __u64 cleanup_now(void)
{
	return cfg_replay ? replay_now : bpf_ktime_get_ns();
}

/* flow names the direction that timed out as its samples are named. */
static __always_inline void send_timeout_event(const struct network_tuple *flow,
					       __u64 now)
{
	struct flow_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(COUNTER_RINGBUF_FULL);
		return;
	}
	e->event_type = EVENT_TYPE_FLOW;
	e->ifindex = 0;
	e->timestamp = now;
	e->seen = now;
	e->flow = *flow;
	e->flow_event_type = FLOW_EVENT_CLOSING;
	e->reason = EVENT_REASON_FLOW_TIMEOUT;
	e->source = EVENT_SOURCE_GC;
	e->reserved = 0;
	bpf_ringbuf_submit(e, event_wakeup());
	count(COUNTER_FLOW_EVENTS);
}

/* Removes the flow in slot s, published with tag, if it has been idle past
 * its timeout, reporting its closing and summary. */
static __always_inline void expire_flow(struct flow_slot *s, __u64 tag,
					__u64 now)
{
	struct flow_state *fs = &s->state;
	struct network_tuple key, rev;
	__u64 timeout, last_seen;

	if (tag <= FLOW_TAG_CLAIMED)
		return; /* empty, or being created */
	/* Most entries are not due: decide that before anything else. */
	timeout = s->key.proto == IPPROTO_TCP ? cfg_tcp_flow_timeout_ns :
						cfg_other_flow_timeout_ns;
	last_seen = flow_last_seen(fs);
	if (now <= last_seen || now - last_seen <= timeout)
		return;
	/* Taken first, so that a flow also closing on a packet right now
	 * reports its end once. */
	if (!flow_take(s, tag))
		return;
	key = s->key;
	/* Each direction that had opened reports its closing: dir[0] is
	 * sent by key.saddr and named from the side that answers it. */
	if (!cfg_aggregate && fs->dir[0].conn_state == CONN_OPEN) {
		reverse_tuple(&key, &rev);
		send_timeout_event(&rev, now);
	}
	if (!cfg_aggregate && fs->dir[1].conn_state == CONN_OPEN)
		send_timeout_event(&key, now);
	summary_emit(&key, fs, now, EVENT_REASON_FLOW_TIMEOUT);
	flow_free(s);
	count(COUNTER_FLOWS_TIMED_OUT);
	count(COUNTER_FLOWS_DELETED);
}

/* Removes a timestamp that was never answered within the timeout. */
static __always_inline void expire_ts(const struct packet_id *kp, __u64 sent,
				      __u64 now)
{
	struct network_tuple fkey TUPLE_ALIGNED;
	struct flow_slot *fslot;
	struct packet_id pid;
	__u32 side;

	if (now <= sent || now - sent <= cfg_ts_timeout_ns)
		return;

	pid = *kp;
	if (bpf_map_delete_elem(&ts_map, &pid) != 0)
		return;
	count(COUNTER_TS_EXPIRED);
	count(COUNTER_TS_DELETED);

	/* Keep the flow's outstanding count honest so matching can skip the
	 * map lookup for flows with nothing outstanding. */
	side = canonical_tuple(&pid.flow, &fkey) & SIDE_MASK;
	fslot = flow_lookup(&fkey);
	if (fslot)
		outstanding_dec(&fslot->state.dir[side]);
}

/* Expires the flow in slot `index` if it is idle past its timeout. A
 * global function, so that the verifier checks its body once: inlined in
 * expire_used()'s walk of a word's 64 bits it was checked once per bit,
 * and on some 6.18 builds the cleanup program then passed the verifier's
 * limit of a million instructions (and took seconds to be refused). */
__noinline int expire_slot(__u32 index, __u64 now)
{
	/* As a map value pointer, the slot may be written (its tag). */
	struct flow_slot *s = flow_slot_at(index);

	if (s)
		expire_flow(s, READ_ONCE(s->tag), now);
	return 0;
}

/* Expires the idle flows among the slots that word `word` of flow_used
 * marks in use. */
static __always_inline void expire_used(__u32 word, __u64 used, __u64 now)
{
	int b;

	for (b = 0; b < FLOW_USED_BITS && used; b++, used >>= 1) {
		if (used & 1)
			expire_slot(word * FLOW_USED_BITS + b, now);
	}
}

/* Iterates flow_used. */
SEC("iter/bpf_map_elem")
int rttscope_cleanup_flows(struct bpf_iter__bpf_map_elem *ctx)
{
	__u32 *word = ctx->key;
	__u64 *used = ctx->value;

	if (word && used && *used)
		expire_used(*word, *used, cleanup_now());
	return 0;
}

SEC("iter/bpf_map_elem")
int rttscope_cleanup_timestamps(struct bpf_iter__bpf_map_elem *ctx)
{
	struct packet_id *kp = ctx->key;
	__u64 *ts = ctx->value;

	if (kp && ts)
		expire_ts(kp, *ts, cleanup_now());
	return 0;
}

/* Periodic per-flow summaries (--flow-summary-interval), iterating
 * flow_used. Without iterators user space reads flow_map (the flow table)
 * and summary_map itself instead. */
SEC("iter/bpf_map_elem")
int rttscope_flow_summaries(struct bpf_iter__bpf_map_elem *ctx)
{
	struct network_tuple key;
	__u32 *word = ctx->key;
	__u64 *used = ctx->value;
	struct flow_slot *s;
	__u64 bits;
	int b;

	if (!word || !used)
		return 0;
	bits = *used;
	for (b = 0; b < FLOW_USED_BITS && bits; b++, bits >>= 1) {
		if (!(bits & 1))
			continue;
		/* As a map value pointer, the state may be indexed by a
		 * variable. */
		s = flow_used_slot(*word, b);
		if (!s)
			continue;
		key = s->key;
		summary_write(ctx->meta->seq, &key, &s->state, cleanup_now());
	}
	return 0;
}

static long expire_used_cb(void *map, __u32 *word, __u64 *used, __u64 *now)
{
	if (*used)
		expire_used(*word, *used, *now);
	return 0;
}

static long expire_ts_cb(void *map, struct packet_id *key, __u64 *sent,
			 __u64 *now)
{
	expire_ts(key, *sent, *now);
	return 0;
}

/* The iterator-free expiry: one run walks both maps. The packet handed in by
 * BPF_PROG_TEST_RUN is ignored. */
SEC("tc")
int rttscope_cleanup_run(struct __sk_buff *skb)
{
	__u64 now = cleanup_now();

	bpf_for_each_map_elem(&flow_used, expire_used_cb, &now, 0);
	bpf_for_each_map_elem(&ts_map, expire_ts_cb, &now, 0);
	return TC_NEXT;
}

#endif /* RTTSCOPE_CLEANUP_H */
