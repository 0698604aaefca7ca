/* SPDX-License-Identifier: GPL-2.0 */
/* What the parser learns about a packet. Each RTT source (id_*.h) fills the
 * identifier fields for its protocol; the core in rttscope.c does the rest. */
#ifndef RTTSCOPE_PACKET_H
#define RTTSCOPE_PACKET_H

#include "tuple.h"
#include "events.h"

struct parsing_context {
	void *ctx; /* struct __sk_buff or struct xdp_md */
	void *data;
	void *data_end;
	__u32 ifindex;
	__u16 l3_proto; /* EtherType when the frame has no L2 header */
	bool l3_only;
	bool is_xdp; /* constant per program: picks the walkers */
	__u32 pkt_len; /* the whole frame (skb->len: may exceed data_end) */
};

struct packet_info {
	__u64 time;
	__u32 l3_len; /* IP header + payload, the byte counters' unit */
	__u32 l4_offset; /* bytes from the IP header to the L4 header */
	__u32 payload; /* bytes after the transport header: the flow counters' unit */
	__u32 l2_len; /* link-layer header bytes (Ethernet, VLAN tags) */
	__u32 ifindex;
	bool is_egress;
	bool l3_valid; /* addresses, l3_len, ip_tos and proto are set */
	bool pid_valid; /* pid.identifier should be timestamped */
	bool reply_valid; /* reply_id answers an earlier identifier */
	/* The identifier may already have been sent before the flow was seen
	 * (TCP picked up mid-stream): timestamp only after it changes. */
	bool wait_first_edge;
	__u8 event_type; /* enum flow_event_type caused by this packet */
	__u8 event_reason; /* enum flow_event_reason */
	__u8 ip_tos;
	__u32 reply_id;
	struct packet_id pid; /* tuple of this packet + its identifier */
};

#endif /* RTTSCOPE_PACKET_H */
