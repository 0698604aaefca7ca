/* SPDX-License-Identifier: GPL-2.0 */
/* Records sent to user space through the ring buffer. The Go reader decodes
 * them by offset (internal/events/decode.go); bpf2go exports them to Go, and
 * TestLayout there checks the reader's offsets against the exports. */
#ifndef RTTSCOPE_EVENTS_H
#define RTTSCOPE_EVENTS_H

#include "tuple.h"

enum event_type {
	EVENT_TYPE_RTT = 1,
	EVENT_TYPE_FLOW = 2,
	EVENT_TYPE_FLOW_SUMMARY = 3, /* own ring buffer (summary.h) */
	EVENT_TYPE_RTT_NAMED = 4, /* rtt_named_event: DNS with --dns-names */
};

enum flow_event_type {
	FLOW_EVENT_NONE = 0,
	FLOW_EVENT_OPENING = 1,
	FLOW_EVENT_CLOSING = 2,
};

enum flow_event_reason {
	EVENT_REASON_NONE = 0,
	EVENT_REASON_SYN = 1,
	EVENT_REASON_SYN_ACK = 2,
	EVENT_REASON_FIRST_OBS_PCKT = 3,
	EVENT_REASON_FIN = 4,
	EVENT_REASON_RST = 5,
	EVENT_REASON_FLOW_TIMEOUT = 6,
};

/* What an RTT sample was measured with: the identifier space of a
 * timestamp (the ts_map key carries it in flow.reserved) and the "source"
 * of every output format. */
enum rtt_source {
	RTT_SOURCE_TCP_TS = 0, /* TCP timestamps: TSval -> TSecr */
	RTT_SOURCE_ICMP = 1, /* ICMP/ICMPv6 echo sequence */
	RTT_SOURCE_TCP_SEQ = 2, /* TCP data: end sequence -> covering ACK */
	RTT_SOURCE_TCP_SYN = 3, /* handshake: SYN -> SYN-ACK, SYN-ACK -> ACK */
	RTT_SOURCE_DNS = 4, /* DNS query -> response (tuple + id) */
	RTT_SOURCE_QUIC_SPIN = 5, /* QUIC spin bit edges */
	RTT_SOURCES = 6,
};

/* All times are ns: CLOCK_MONOTONIC when live, capture time (Unix ns) in
 * replay mode; user space converts. */
struct rtt_event {
	__u32 event_type;
	__u32 ifindex;
	__u64 timestamp;
	struct network_tuple flow; /* direction of the reply */
	__u8 match_on_egress;
	__u8 source; /* enum rtt_source */
	__u16 reserved;
	__u64 rtt;
	__u64 min_rtt;
	__u64 srtt;
	__u64 sent_pkts;
	__u64 sent_bytes;
	__u64 rec_pkts;
	__u64 rec_bytes;
	/* Source-specific details: the DNS response's question type, rcode
	 * and TC bit (RTT_SOURCE_DNS), zero otherwise. */
	__u16 dns_qtype;
	__u8 dns_rcode;
	__u8 dns_truncated;
	__u32 reserved2;
};

/* The largest DNS name on the wire (RFC 1035 3.1), length octets included. */
#define DNS_NAME_MAX 256

/* A DNS sample with its question's name in wire format (--dns-names). */
struct rtt_named_event {
	struct rtt_event rtt; /* event_type EVENT_TYPE_RTT_NAMED */
	__u16 name_len; /* bytes of name used */
	__u8 reserved[6];
	__u8 name[DNS_NAME_MAX];
};

struct flow_event {
	__u32 event_type;
	__u32 ifindex;
	__u64 timestamp;
	struct network_tuple flow; /* direction of the opening packet */
	__u8 flow_event_type;
	__u8 reason;
	__u8 triggered_by_src;
	__u8 reserved;
};

_Static_assert(sizeof(struct network_tuple) == 44, "network_tuple layout");
_Static_assert(sizeof(struct rtt_event) == 128, "rtt_event layout");
_Static_assert(sizeof(struct flow_event) == 64, "flow_event layout");
_Static_assert(sizeof(struct rtt_named_event) == 392, "rtt_named_event layout");

/* No map or global function names these types: exported for bpf2go. */
BTF_EXPORT(enum event_type, event_type);
BTF_EXPORT(enum flow_event_type, flow_event_type);
BTF_EXPORT(enum flow_event_reason, flow_event_reason);
BTF_EXPORT(enum rtt_source, rtt_source);
BTF_EXPORT(struct rtt_event, rtt_event);
BTF_EXPORT(struct flow_event, flow_event);
BTF_EXPORT(struct rtt_named_event, rtt_named_event);

#endif /* RTTSCOPE_EVENTS_H */
