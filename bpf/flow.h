/* SPDX-License-Identifier: GPL-2.0 */
/* Per-flow state: one entry per connection, one half per direction. */
#ifndef RTTSCOPE_FLOW_H
#define RTTSCOPE_FLOW_H

#include "tuple.h"

/* State of one direction: the packets this side sends, the timestamps taken
 * on them, and the RTTs their replies gave. A packet writes only the half of
 * its sender (what one side receives is what the other sends), so the two
 * directions, often handled on two CPUs, do not take each other's cache
 * lines away on every packet. The fields written per packet come first,
 * those written per sample after them. */
struct flow_dir_state {
	__u64 sent_pkts;
	__u64 sent_bytes;
	__u64 last_seen; /* time of this side's last packet */
	__u64 last_timestamp; /* time of the last timestamp attempt */
	__u32 last_id; /* newest identifier seen in this direction */
	__u8 has_last_id;
	__u8 fin_seen;
	__u8 local_dst; /* enum local_dst: its packets are for this host */
	__u8 reserved;
	__u64 min_rtt;
	__u64 srtt;
	/* The last two identifiers timestamped in this direction, for the
	 * replies' filter (reply_may_match): slot ts_next & 1 is the older
	 * when ts_taken is 2. Written by this side's packets only. */
	__u32 pending[2];
	__u8 ts_taken; /* slots of pending[] in use (0-2) */
	__u8 ts_next; /* slot the next timestamp goes to */
	__u8 has_echoed;
	__u8 reserved2;
	/* Newest identifier this side's replies echoed (TCP TSecr). */
	__u32 echoed;
};

enum local_dst {
	LOCAL_DST_UNKNOWN = 0, /* not asked yet */
	LOCAL_DST_NO = 1,
	LOCAL_DST_YES = 2,
};

struct flow_state {
	struct flow_dir_state dir[2]; /* [0]: sent by key.saddr */
	__u8 opener; /* index of the side that opened it */
	__u8 closing_sent; /* a closing event was reported */
	__u8 reserved[6];
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
