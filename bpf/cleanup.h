/* SPDX-License-Identifier: GPL-2.0 */
/* Expiry of stale state. These map-element iterators run in the kernel when
 * user space reads them (every --cleanup-interval); user space never walks
 * the maps itself. Deleting the current element is safe for hash maps. */
#ifndef RTTSCOPE_CLEANUP_H
#define RTTSCOPE_CLEANUP_H

#include "maps.h"

static __always_inline __u64 cleanup_now(void)
{
	return cfg_replay ? replay_now : bpf_ktime_get_ns();
}

static __always_inline void send_timeout_event(struct network_tuple *key,
					       struct flow_state *fs, __u64 now,
					       struct counters *c)
{
	struct flow_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		c->ringbuf_full++;
		return;
	}
	e->event_type = EVENT_TYPE_FLOW;
	e->ifindex = 0;
	e->timestamp = now;
	if (fs->opener == 0)
		e->flow = *key;
	else
		reverse_tuple(key, &e->flow);
	e->flow_event_type = FLOW_EVENT_CLOSING;
	e->reason = EVENT_REASON_FLOW_TIMEOUT;
	e->triggered_by_src = 1;
	e->reserved = 0;
	bpf_ringbuf_submit(e, 0);
	c->flow_events++;
}

SEC("iter/bpf_map_elem")
int rttscope_cleanup_flows(struct bpf_iter__bpf_map_elem *ctx)
{
	struct network_tuple *kp = ctx->key, key;
	struct flow_state *fs = ctx->value;
	struct counters *c = get_counters();
	__u64 now = cleanup_now(), timeout;

	if (!kp || !fs || !c)
		return 0;
	timeout = kp->proto == IPPROTO_TCP ? cfg_tcp_flow_timeout_ns :
					     cfg_other_flow_timeout_ns;
	if (now <= fs->last_seen || now - fs->last_seen <= timeout)
		return 0;

	key = *kp;
	if (!fs->closing_sent && !cfg_aggregate)
		send_timeout_event(&key, fs, now, c);
	summary_emit(&key, fs, now, EVENT_REASON_FLOW_TIMEOUT);
	if (bpf_map_delete_elem(&flow_map, &key) == 0) {
		c->flows_timed_out++;
		c->flows_deleted++;
	}
	return 0;
}

/* Periodic per-flow summaries (--flow-summary-interval). */
SEC("iter/bpf_map_elem")
int rttscope_flow_summaries(struct bpf_iter__bpf_map_elem *ctx)
{
	struct network_tuple *kp = ctx->key, key;
	struct flow_state *fs;

	if (!kp || !ctx->value)
		return 0;
	key = *kp;
	/* As a map value pointer, fs may be indexed by a variable. */
	fs = bpf_map_lookup_elem(&flow_map, &key);
	if (fs)
		summary_write(ctx->meta->seq, &key, fs, cleanup_now());
	return 0;
}

SEC("iter/bpf_map_elem")
int rttscope_cleanup_timestamps(struct bpf_iter__bpf_map_elem *ctx)
{
	struct packet_id *kp = ctx->key, pid;
	struct network_tuple fkey;
	struct flow_state *fs;
	__u64 *ts = ctx->value;
	struct counters *c = get_counters();
	__u64 now = cleanup_now();
	__u32 side;

	if (!kp || !ts || !c)
		return 0;
	if (now <= *ts || now - *ts <= cfg_ts_timeout_ns)
		return 0;

	pid = *kp;
	if (bpf_map_delete_elem(&ts_map, &pid) != 0)
		return 0;
	c->ts_expired++;
	c->ts_deleted++;

	/* Keep the flow's outstanding count honest so matching can skip the
	 * map lookup for flows with nothing outstanding. */
	side = canonical_tuple(&pid.flow, &fkey) & SIDE_MASK;
	fs = bpf_map_lookup_elem(&flow_map, &fkey);
	if (fs && fs->dir[side].outstanding)
		__sync_fetch_and_add(&fs->dir[side].outstanding, -1);
	return 0;
}

#endif /* RTTSCOPE_CLEANUP_H */
