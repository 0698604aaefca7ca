/* SPDX-License-Identifier: GPL-2.0 */
/* Per-flow state: one entry per connection, one half per direction. */
#ifndef RTTSCOPE_FLOW_H
#define RTTSCOPE_FLOW_H

#include "tuple.h"

/* Aggregated mode's count of a side's packets that took the fast path
 * (fastpath.h): IPv4 TCP segments with timestamps, all of one kind (the
 * length of their link-layer header and their ECN codepoint, kept in
 * pkts), so that these two counts are all the prefix and global records
 * need of them (agg_fold.h). */
struct agg_fold {
	__u64 pkts; /* AGG_FOLD_READY, the kind, the count */
	__u64 l3_bytes; /* IP header + payload */
};

/* In agg_fold.pkts: a packet of this side found or created the entries of
 * both its prefixes in the interval this pair counts for, as every
 * tracked packet does on the general path (agg_count_tracked). Only then
 * does the fast path count in the pair: a prefix's untracked traffic then
 * meets its entry exactly when it would without the fold. The fold's walk
 * zeroes the pair, this bit too, after each of its intervals. */
#define AGG_FOLD_READY (1ULL << 63)

/* Below AGG_FOLD_READY, the kind of the pair's packets: the first packet
 * the pair counts sets it, and only packets of that kind count there
 * after it (fastpath.h); others, a CE mark in an ECT(0) flow say, count
 * in the prefix slots. A flow on a VLAN (18 bytes of header) or with ECN
 * sends its packets of one kind as much as a plain Ethernet flow does. */
#define AGG_FOLD_ECN_SHIFT  54 /* 2 bits: tos & 3 */
#define AGG_FOLD_L2_SHIFT   56 /* 7 bits: link-layer header bytes */
#define AGG_FOLD_L2_MAX	    127
#define AGG_FOLD_COUNT_MASK ((1ULL << AGG_FOLD_ECN_SHIFT) - 1)

static __always_inline __u64 agg_fold_kind(__u32 l2_len, __u8 tos)
{
	return (__u64)l2_len << AGG_FOLD_L2_SHIFT |
	       (__u64)(tos & 3) << AGG_FOLD_ECN_SHIFT;
}

/* Aggregated mode's part of a flow direction (flow_dir_state.u). */
struct flow_dir_agg {
	/* Per end of this side's packets (0: source, 1: destination), the
	 * prefix slot it last counted in (agg_slot.filled). A packet still
	 * in flight on another CPU when its flow is freed and the slot
	 * taken by another flow can leave its reference to the newcomer,
	 * whose packets on that CPU then count for the old flow's prefix
	 * until the slot is emptied at the interval's end: a window of
	 * nanoseconds, not closed, like the other per-flow races
	 * (handle_packet). */
	__u64 ref[2];
	/* The fast path's packets of this side not yet in a prefix record,
	 * by the parity of agg_epoch they were counted in: after each
	 * epoch flip user space has the old parity's folded into the
	 * prefixes (agg_fold.h, rttscope_agg_fold); a flow that goes
	 * flushes both (agg_flush_flow). */
	struct agg_fold fold[2];
};

/* State of one direction: the packets this side sends, the timestamps taken
 * on them, and the RTTs their replies gave. A packet writes only the half of
 * its sender (what one side receives is what the other sends), so the two
 * directions, often handled on two CPUs, do not take each other's cache
 * lines away on every packet. The fields written per packet come first,
 * those written per sample after them, those written once per direction
 * last.
 *
 * A direction follows ePPing's life cycle (conn_state): it becomes active
 * (WAITOPEN) with its first packet worth timestamping, opens when the other
 * side answers, and closes with its FIN or either side's RST. Only an
 * active direction is timestamped and matched, and its packet counters
 * (ePPing's sent_/rec_ packets and bytes) run from its activation: the
 * totals below run from the flow's creation, and the base_* fields keep
 * what they were at activation, so no packet writes the other side's half. */
struct flow_dir_state {
	/* Tracked packets this side sent since the flow began: bits 0-47
	 * (dir_pkts). Bits 48-63 are the fast path's packets among them
	 * not yet added to COUNTER_FAST_PATH (fastpath.h, fast_count): a
	 * count kept in the word every packet of this side writes anyway,
	 * so that it costs no cache line of its own. */
	__u64 sent_pkts;
	__u64 sent_bytes; /* their payload bytes (after the transport header) */
	__u64 last_seen; /* time of this side's last packet */
	__u64 last_timestamp; /* time of the last timestamp attempt */
	__u32 last_id; /* newest identifier seen in this direction */
	__u8 ts_attempted; /* a timestamp was attempted since activation */
	__u8 conn_state; /* enum conn_state */
	__u8 local_dst; /* enum local_dst: its packets are for this host */
	__u8 open_reason; /* enum flow_event_reason of the activation */
	__u64 min_rtt;
	__u64 srtt;
	__u32 outstanding; /* timestamps not yet matched (approximate) */
	__u8 last_source; /* enum rtt_source of last_id */
	/* The ring of pending[]: bits 0-1 the slots in use (0-2), bit 2 the
	 * slot the next timestamp goes to (the older one when both are). */
	__u8 ts_ring;
	__u8 reserved[2];
	/* Newest TSecr this side's replies echoed (0: none yet). */
	__u32 echoed;
	/* The last two TCP timestamps (RTT_SOURCE_TCP_TS) taken in this
	 * direction, for the ACKs' filter (reply_may_match). Written, with
	 * ts_ring, by this side's timestamped packets only. */
	__u32 pending[2];
	/* The QUIC spin source's candidate edge (id_quic_spin.h): its time
	 * after the direction's last accepted edge, in ns. Here rather than
	 * in struct quic_spin_dir, whose 16 bytes are full: the spare word
	 * costs no memory. */
	__u32 spin_cand;
	/* Per mode: bpf2go wants every field named. */
	union {
		/* RTT events: this side's totals at activation and the other
		 * side's. */
		struct {
			__u64 sent_pkts, sent_bytes;
			__u64 rec_pkts, rec_bytes;
		} base;
		/* Aggregated mode, which sends no RTT events. */
		struct flow_dir_agg agg;
	} u;
};

/* The packet count in flow_dir_state.sent_pkts and the fast path's
 * unflushed count above it. 2^48 packets are 325 days of one direction at
 * ten million packets a second. */
#define SENT_PKTS_BITS 48
#define SENT_PKTS_MASK ((1ULL << SENT_PKTS_BITS) - 1)

static __always_inline __u64 dir_pkts(const struct flow_dir_state *d)
{
	return d->sent_pkts & SENT_PKTS_MASK;
}

/* The fast path's packets of d's side not yet in COUNTER_FAST_PATH. */
static __always_inline __u64 dir_fast_unflushed(const struct flow_dir_state *d)
{
	return d->sent_pkts >> SENT_PKTS_BITS;
}

/* One timestamp of d's direction is gone (matched, dropped, expired or
 * evicted). The count is approximate, CPUs race on it: never below zero,
 * where a wrap would keep reply_may_match() from skipping any lookup. */
static __always_inline void outstanding_dec(struct flow_dir_state *d)
{
	if (d->outstanding)
		__sync_fetch_and_add(&d->outstanding, -1);
}

#define TS_RING_USED 3
#define TS_RING_NEXT 4

/* Remembers a TCP timestamp taken in d's direction in pending[]. */
static __always_inline void ts_ring_add(struct flow_dir_state *d, __u32 id)
{
	__u8 r = d->ts_ring, used = r & TS_RING_USED;

	d->pending[(r & TS_RING_NEXT) ? 1 : 0] = id;
	d->ts_ring =
		((r ^ TS_RING_NEXT) & TS_RING_NEXT) | (used < 2 ? used + 1 : 2);
}

enum conn_state {
	CONN_EMPTY = 0, /* nothing worth timestamping sent yet */
	CONN_WAITOPEN = 1, /* active, not answered yet */
	CONN_OPEN = 2, /* active and answered: an opening event was sent */
	CONN_CLOSED = 3, /* FIN or RST seen: never active again */
};

static __always_inline bool dir_active(const struct flow_dir_state *d)
{
	return d->conn_state == CONN_WAITOPEN || d->conn_state == CONN_OPEN;
}

enum local_dst {
	LOCAL_DST_UNKNOWN = 0, /* not asked yet */
	LOCAL_DST_NO = 1,
	LOCAL_DST_YES = 2,
};

/* Per-direction state of the TCP sources that work on sequence numbers
 * (id_tcp_seq.h): the highest end sequence the side sent, and the one range
 * of it being timed. Written by that side's new data (max_end) and by the
 * ACK that ends the timing (timed), so not on most packets. */
struct tcp_seq_dir {
	__u32 max_end; /* highest end sequence sent, when has_max */
	__u32 timed_end; /* end of the range being timed, when timed */
	__u8 has_max;
	__u8 timed;
	__u8 timed_source; /* RTT_SOURCE_TCP_SEQ or RTT_SOURCE_TCP_SYN */
	__u8 reserved;
};

/* Per-direction state of the QUIC spin bit source (id_quic_spin.h). */
struct quic_spin_dir {
	__u64 last_edge; /* time of the last accepted edge, 0: none yet */
	__u32 est; /* running RTT estimate (ns, 1/8 gain), 0: none yet */
	__u16 win_pkts; /* short header packets in the current window */
	__u8 win_edges; /* accepted edges in the current window */
	__u8 flags; /* enum quic_spin_flags */
};

enum quic_spin_flags {
	QUIC_SPIN_VALUE = 1, /* the last spin value seen */
	QUIC_SPIN_SEEN = 2, /* a spin value was seen */
	QUIC_SPIN_VALID = 4, /* a window passed: samples are reported */
	QUIC_SPIN_RANDOM = 8, /* the bit looks random: no samples */
	QUIC_SPIN_CAND = 16, /* a packet flipped the bit: a candidate edge */
	QUIC_SPIN_REVERTED = 32, /* and the next one flipped it back */
};

struct flow_state {
	struct flow_dir_state dir[2]; /* [0]: sent by key.saddr */
	__u8 opener; /* index of the side that opened it */
	__u8 reserved[7];
	/* State of the sources that keep some per flow direction, after the
	 * rest: the common path does not touch it. One flow is TCP or UDP,
	 * so they share the space. */
	union {
		struct tcp_seq_dir seq[2];
		struct quic_spin_dir spin[2];
	};
};

/* Time of the flow's last packet, either direction. */
static __always_inline __u64 flow_last_seen(const struct flow_state *fs)
{
	__u64 a = fs->dir[0].last_seen, b = fs->dir[1].last_seen;

	return a > b ? a : b;
}

#define SIDE_MASK 1
/* Both endpoints are the same (e.g. ping 127.0.0.1): both directions then
 * map to one half of the flow state. */
#define SIDE_SELF 2

/* Puts a packet's tuple in canonical order and says which half of the flow
 * state the packet's sender is (SIDE_MASK), and whether the flow talks to
 * itself (SIDE_SELF). */
static __always_inline __u32 canonical_tuple(const struct network_tuple *t,
					     struct network_tuple *key)
{
	if (endpoint_lt(&t->daddr, &t->saddr)) {
		reverse_tuple(t, key);
		return 1;
	}
	*key = *t;
	key->reserved = 0;
	return endpoint_lt(&t->saddr, &t->daddr) ? 0 : SIDE_SELF;
}

/* TCP's SRTT estimator: srtt += (rtt - srtt) / 8. */
static __always_inline __u64 update_srtt(__u64 srtt, __u64 rtt)
{
	if (!srtt)
		return rtt;
	return srtt - (srtt >> 3) + (rtt >> 3);
}

#endif /* RTTSCOPE_FLOW_H */
