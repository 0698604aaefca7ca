/* SPDX-License-Identifier: GPL-2.0 */
/* Per-flow summaries (--flow-summary, docs/aggregation.md): RTT count, sum,
 * maximum and a coarse log-linear histogram per direction, kept beside the
 * flow entry and reported through their own ring buffer when the flow ends
 * (FIN, RST, timeout) and, driven by user space, periodically through an
 * iterator. */
#ifndef RTTSCOPE_SUMMARY_H
#define RTTSCOPE_SUMMARY_H

#include "flow.h"
#include "config.h"
#include "counters.h"
#include "hist.h"
#include "maps.h"

/* hist_bin >> 2: 8 sub-buckets per power of two (12.5% wide). */
#define FS_SHIFT 2
#define FS_BINS	 ((HIST_BINS >> FS_SHIFT) + 1)

struct flow_summary_dir {
	__u64 count;
	__u64 sum;
	__u64 max;
	__u16 hist[FS_BINS]; /* saturating */
	__u16 reserved[3];
	__u32 source_count[RTT_SOURCES]; /* samples by enum rtt_source */
};

struct flow_summary {
	__u64 start;
	struct flow_summary_dir dir[2];
};

struct flow_summary_dir_event {
	__u64 pkts; /* sent by this side */
	__u64 bytes;
	__u64 count; /* RTT samples of this side's packets */
	__u64 sum;
	__u64 min;
	__u64 max;
	__u16 hist[FS_BINS];
	__u16 reserved[3];
	__u32 source_count[RTT_SOURCES];
};

struct flow_summary_event {
	__u32 event_type;
	__u32 reason; /* enum flow_event_reason; 0: periodic */
	__u64 timestamp;
	struct network_tuple flow; /* the opener's direction */
	__u32 reserved;
	__u64 start;
	struct flow_summary_dir_event dir[2]; /* [0]: flow.saddr's side */
};

/* Read by offset in internal/events/summary.go; TestLayout there checks
 * every offset against the Go type bpf2go generates from this one. */
_Static_assert(FS_BINS == 217, "flow summary bins");
_Static_assert(sizeof(struct flow_summary_dir_event) == 512, "summary layout");
_Static_assert(sizeof(struct flow_summary_event) == 1096, "summary layout");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct network_tuple);
	__type(value, struct flow_summary);
	__uint(max_entries, 1);
} summary_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_summary);
	__uint(max_entries, 1);
} summary_zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} summaries SEC(".maps");

static __always_inline void summary_open(const struct network_tuple *key,
					 __u64 now)
{
	struct flow_summary *s;
	__u32 zero = 0;

	if (!cfg_flow_summary)
		return;
	s = bpf_map_lookup_elem(&summary_zero, &zero);
	if (!s)
		return;
	if (bpf_map_update_elem(&summary_map, key, s, BPF_ANY) != 0) {
		count(COUNTER_SUMMARY_MAP_FULL);
		return;
	}
	s = bpf_map_lookup_elem(&summary_map, key);
	if (s)
		s->start = now;
}

static __always_inline void summary_add(const struct network_tuple *key,
					__u32 side, __u64 rtt, __u8 source)
{
	struct flow_summary_dir *d;
	struct flow_summary *s;
	__u32 bin;

	if (!cfg_flow_summary)
		return;
	s = bpf_map_lookup_elem(&summary_map, key);
	if (!s)
		return;
	d = &s->dir[side & 1];
	d->count++;
	d->sum += rtt;
	if (rtt > d->max)
		d->max = rtt;
	if (source < RTT_SOURCES)
		d->source_count[source]++;
	bin = hist_bin(rtt) >> FS_SHIFT;
	barrier_var(bin); /* keep the bound check for older verifiers */
	if (bin < FS_BINS && d->hist[bin] != 0xffff)
		d->hist[bin]++;
}

/* Per-CPU scratch record for the iterator, which writes records to its
 * output stream instead of the ring buffer (no loss, flow-controlled by the
 * reader, however many flows there are). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_summary_event);
	__uint(max_entries, 1);
} summary_scratch SEC(".maps");

static __always_inline void summary_fill(struct flow_summary_event *e,
					 const struct network_tuple *key,
					 const struct flow_state *fs,
					 const struct flow_summary *s,
					 __u64 now, __u32 reason)
{
	__u32 i, side;

	e->event_type = EVENT_TYPE_FLOW_SUMMARY;
	e->reason = reason;
	e->timestamp = now;
	e->reserved = 0;
	e->start = s->start;
	if (fs->opener == 0)
		e->flow = *key;
	else
		reverse_tuple(key, &e->flow);
	e->flow.reserved = 0;
	for (i = 0; i < 2; i++) {
		side = (i ^ fs->opener) & 1;
		e->dir[i].pkts = dir_pkts(&fs->dir[side]);
		e->dir[i].bytes = fs->dir[side].sent_bytes;
		e->dir[i].min = fs->dir[side].min_rtt;
		e->dir[i].count = s->dir[side].count;
		e->dir[i].sum = s->dir[side].sum;
		e->dir[i].max = s->dir[side].max;
		__builtin_memcpy(e->dir[i].hist, s->dir[side].hist,
				 sizeof(e->dir[i].hist));
		e->dir[i].reserved[0] = 0;
		e->dir[i].reserved[1] = 0;
		e->dir[i].reserved[2] = 0;
		__builtin_memcpy(e->dir[i].source_count,
				 s->dir[side].source_count,
				 sizeof(e->dir[i].source_count));
	}
}

/* Reports the summary of a flow that ends (reason: enum flow_event_reason)
 * through the summaries ring buffer and forgets it. Global function:
 * verified once. */
__noinline int summary_emit(struct network_tuple *key, struct flow_state *fs,
			    __u64 now, __u32 reason)
{
	struct flow_summary_event *e;
	struct flow_summary *s;
	struct network_tuple k;

	if (!key || !fs || !cfg_flow_summary)
		return 0;
	/* A stack copy: 6.1's verifier refuses a map key of type mem (the
	 * argument of a global function). */
	k = *key;
	s = bpf_map_lookup_elem(&summary_map, &k);
	if (!s)
		return 0;
	e = bpf_ringbuf_reserve(&summaries, sizeof(*e), 0);
	if (e) {
		summary_fill(e, &k, fs, s, now, reason);
		bpf_ringbuf_submit(e, 0);
		count(COUNTER_SUMMARIES_SENT);
	} else {
		count(COUNTER_SUMMARY_RINGBUF_FULL);
	}
	bpf_map_delete_elem(&summary_map, &k);
	return 0;
}

/* Writes the running summary of a flow (reason 0) to an iterator's output. */
static __always_inline void summary_write(struct seq_file *seq,
					  struct network_tuple *key,
					  struct flow_state *fs, __u64 now)
{
	struct flow_summary_event *e;
	struct flow_summary *s;
	__u32 zero = 0;

	if (!cfg_flow_summary)
		return;
	s = bpf_map_lookup_elem(&summary_map, key);
	e = bpf_map_lookup_elem(&summary_scratch, &zero);
	if (!s || !e)
		return;
	summary_fill(e, key, fs, s, now, 0);
	bpf_seq_write(seq, e, sizeof(*e));
}

#endif /* RTTSCOPE_SUMMARY_H */
