/* SPDX-License-Identifier: GPL-2.0 */
/* Kernel-side counters: one slot of a per-CPU array per counter, summed by
 * user space in one loop. bpf2go exports enum counter to Go (-type counter),
 * and a test there fails when a counter has no name in the stats record, so
 * a counter added here reaches the user. */
#ifndef RTTSCOPE_COUNTERS_H
#define RTTSCOPE_COUNTERS_H

#include "common.h"
#include "config.h"
#include "events.h"

enum counter {
	/* packets the general path looked at; the stats record's packets
	 * adds COUNTER_FAST_PATH's, so that a packet bumps one counter (on
	 * the fast path, one in FAST_COUNT_BATCH) */
	COUNTER_PACKETS,
	COUNTER_RTT_EVENTS, /* events sent to user space */
	COUNTER_FLOW_EVENTS,
	COUNTER_RINGBUF_FULL, /* events dropped: no room in the ring buffer */
	COUNTER_FLOWS_CREATED,
	COUNTER_FLOWS_DELETED, /* closed, timed out or evicted */
	COUNTER_FLOW_MAP_FULL, /* flows not created: no room, nothing evicted */
	COUNTER_FLOWS_TIMED_OUT,
	COUNTER_TS_CREATED,
	COUNTER_TS_DELETED, /* matched, expired or evicted */
	COUNTER_TS_MAP_FULL,
	COUNTER_TS_EXPIRED,
	COUNTER_FLOWS_EVICTED, /* replaced to make room (evict.h) */
	COUNTER_TS_EVICTED,
	COUNTER_AGG_SAMPLES, /* RTT samples added to a histogram */
	COUNTER_AGG_MAP_FULL, /* updates lost: no room for a new prefix */
	COUNTER_SUMMARY_MAP_FULL,
	COUNTER_SUMMARY_RINGBUF_FULL,
	COUNTER_SUMMARIES_SENT,
	/* RTT samples per source, in enum rtt_source order */
	COUNTER_SAMPLES_TCP_TS,
	COUNTER_SAMPLES_ICMP,
	COUNTER_SAMPLES_TCP_SEQ,
	COUNTER_SAMPLES_TCP_SYN,
	COUNTER_SAMPLES_DNS,
	COUNTER_SAMPLES_QUIC_SPIN,
	/* TCP segments carrying sequence numbers already sent (id_tcp_seq.h) */
	COUNTER_TCP_SEQ_RETRANSMISSIONS,
	/* timed ranges dropped by Karn's rule: retransmitted before an ACK */
	COUNTER_TCP_SEQ_AMBIGUOUS,
	/* DNS queries whose id was outstanding on their tuple: timing dropped */
	COUNTER_DNS_DUPLICATE_QUERIES,
	/* DNS responses that answered no outstanding query */
	COUNTER_DNS_UNMATCHED_RESPONSES,
	/* QUIC spin edges rejected: closer than 1/8 of the RTT estimate */
	COUNTER_QUIC_SPIN_REJECTED,
	/* QUIC flow directions whose spin bit looked random: no samples */
	COUNTER_QUIC_SPIN_RANDOM,
	/* packets the fast paths took whole (fastpath.h): TCP segments added
	 * FAST_COUNT_BATCH at a time and when their flow goes (user space adds
	 * what the flows still there keep: loader, StatsExact), untracked
	 * IPv4 packets one by one */
	COUNTER_FAST_PATH,
	/* aggregated mode: fast-path packets counted in their flow and added
	 * to the prefixes at the interval's end or when the flow went
	 * (agg_fold.h) */
	COUNTER_AGG_FOLDED,
	COUNTER_NR,
};
_Static_assert(COUNTER_SAMPLES_QUIC_SPIN - COUNTER_SAMPLES_TCP_TS ==
		       RTT_SOURCE_QUIC_SPIN,
	       "per-source sample counters follow enum rtt_source");
BTF_EXPORT(enum counter, counter);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, COUNTER_NR);
} counters SEC(".maps");

/* The only way to change a counter: add n. A plain add: the slot is this
 * CPU's own. Recent verifiers inline the lookup of a per-CPU array, so one
 * lookup per update costs a few instructions. */
static __always_inline void count_add(enum counter c, __u64 n)
{
	__u32 key = c;
	__u64 *v;

	if (cfg_steps < STEP_COUNTERS)
		return;
	v = bpf_map_lookup_elem(&counters, &key);
	if (v)
		*v += n;
}

static __always_inline void count(enum counter c)
{
	count_add(c, 1);
}

/* Counts an RTT sample of source (enum rtt_source). */
static __always_inline void count_sample(__u8 source)
{
	if (source < RTT_SOURCES)
		count(COUNTER_SAMPLES_TCP_TS + source);
}

#endif /* RTTSCOPE_COUNTERS_H */
