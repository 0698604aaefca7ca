/* SPDX-License-Identifier: GPL-2.0 */
/* Per-flow state: one entry per connection, one half per direction. */
#ifndef RTTSCOPE_FLOW_H
#define RTTSCOPE_FLOW_H

#include "tuple.h"

/* State of one direction: the packets this side sends, the timestamps taken
 * on them, and the RTTs their replies gave. */
struct flow_dir_state {
	__u64 last_timestamp; /* time of the last timestamp attempt */
	__u64 min_rtt;
	__u64 srtt;
	__u64 sent_pkts;
	__u64 sent_bytes;
	__u64 rec_pkts;
	__u64 rec_bytes;
	__u32 last_id; /* newest identifier seen in this direction */
	__u32 outstanding; /* timestamps not yet matched (approximate) */
	__u8 has_last_id;
	__u8 fin_seen;
	__u8 reserved[6];
};

struct flow_state {
	struct flow_dir_state dir[2]; /* [0]: sent by key.saddr */
	__u64 last_seen;
	__u8 opener; /* index of the side that opened it */
	__u8 closing_sent; /* a closing event was reported */
	__u8 reserved[6];
};

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
