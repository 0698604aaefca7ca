/* SPDX-License-Identifier: GPL-2.0 */
/* What the parser learns about a packet. Each RTT source (id_*.h) fills the
 * identifier fields for its protocol; the core in rttscope.c does the rest. */
#ifndef RTTSCOPE_PACKET_H
#define RTTSCOPE_PACKET_H

#include "config.h"
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
};

/* What a source learnt beyond its identifiers, for its flow hook or its
 * sample: one of the structs of the union in struct packet_info, named by
 * its last byte (kind), which is at the same place in each. */
enum src_info_kind {
	SRC_INFO_NONE = 0,
	SRC_INFO_TCP_SEG = 1, /* struct tcp_seg (id_tcp_seq.h) */
	SRC_INFO_DNS = 2, /* struct dns_info (id_dns.h) */
	SRC_INFO_QUIC = 3, /* struct quic_info (id_quic_spin.h) */
};

/* The sequence space of a TCP segment. */
struct tcp_seg {
	__u32 seq; /* first sequence number */
	__u32 end; /* seq + payload, SYN and FIN counting one each */
	__u32 ack; /* cumulative ACK, when ack_valid */
	__u8 ack_valid; /* the ACK flag is set */
	__u8 reserved[2];
	__u8 kind; /* SRC_INFO_TCP_SEG */
};

/* A DNS response's details, reported with its sample. */
struct dns_info {
	__u16 qtype; /* type of the first question, 0 if unread */
	__u8 rcode;
	__u8 truncated; /* TC bit */
	__u16 name_len; /* --dns-names: bytes of the name copied (dns_names) */
	__u8 reserved[9];
	__u8 kind; /* SRC_INFO_DNS */
};

/* A QUIC packet: its header form and spin bit, and the sample its edge
 * gives (the flow hook's result, kept here rather than on the stack). */
struct quic_info {
	__u64 sample;
	__u8 short_hdr; /* a 1-RTT packet: spin is valid */
	__u8 spin;
	__u8 reserved[5];
	__u8 kind; /* SRC_INFO_QUIC */
};

_Static_assert(__builtin_offsetof(struct tcp_seg, kind) ==
			       __builtin_offsetof(struct dns_info, kind) &&
		       __builtin_offsetof(struct tcp_seg, kind) ==
			       __builtin_offsetof(struct quic_info, kind),
	       "the kind byte of the source infos");

/* Kept at 96 bytes (the flags are bits, the small lengths narrow): it
 * lives on handle_packet's stack, and the batched replay's call chain is at
 * 6.1's 512-byte limit (replay_last). */
struct packet_info {
	__u64 time;
	__u32 l3_len; /* IP header + payload, the byte counters' unit */
	__u32 payload; /* bytes after the transport header: the flow counters' unit */
	__u16 l4_offset; /* bytes from the IP header to the L4 header */
	__u8 l2_len; /* link-layer header bytes (Ethernet, VLAN tags) */
	bool is_egress : 1;
	bool l3_valid : 1; /* addresses, l3_len, ip_tos and proto are set */
	bool pid_valid : 1; /* pid.identifier should be timestamped */
	bool reply_valid : 1; /* reply_id answers an earlier identifier */
	/* A TCP segment ePPing tracks: the timestamp option, and not a SYN
	 * unless --include-SYN (its TCP_TS traffic class). */
	bool tcp_ts : 1;
	__u32 ifindex;
	__u8 event_type; /* enum flow_event_type caused by this packet */
	__u8 event_reason; /* enum flow_event_reason */
	__u8 ip_tos;
	/* enum rtt_source of reply_id; that of pid.identifier is in
	 * pid.flow.reserved, so each source has its own identifier space
	 * in the timestamp map. Both 0 (TCP timestamps) unless set. */
	__u8 reply_source;
	__u32 reply_id;
	struct packet_id pid; /* tuple of this packet + its identifier */
	union {
		struct tcp_seg seg;
		struct dns_info dns;
		struct quic_info quic;
	};
};

_Static_assert(sizeof(struct packet_info) == 96, "packet_info size");

/* Sets the payload after a transport header of hdrlen bytes. Returns -1
 * when the IP length does not cover the header (truncated, or a BIG TCP
 * packet's IPv4 total length 0). */
static __always_inline int set_payload(struct packet_info *p, __u32 hdrlen)
{
	if (p->l3_len < p->l4_offset + hdrlen)
		return -1;
	p->payload = p->l3_len - p->l4_offset - hdrlen;
	return 0;
}

/* The packet's time. Live, the clock is read on first use only: most
 * packets (no new identifier, no reply to a timestamp) never need it, and a
 * clock read is a good part of a packet's cost, more so in a VM. Replay
 * hands every packet its capture time up front. */
static __always_inline __u64 packet_time(struct packet_info *p)
{
	if (!cfg_replay && !p->time)
		p->time = bpf_ktime_get_ns();
	return p->time;
}

#endif /* RTTSCOPE_PACKET_H */
