/* SPDX-License-Identifier: GPL-2.0 */
/* RTT source: DNS over UDP and TCP (RTT_SOURCE_DNS). A query's transaction
 * id is its identifier, in the direction client -> server port; a response
 * (QR set) from the server port answers it. The key is {tuple, id}: a
 * client's queries from different ports never meet, and the id is only
 * compared within one 5-tuple, as the resolver itself does. Over TCP the
 * message follows a two-byte length (RFC 1035 4.2.2); only a message at the
 * start of a segment is seen (one per segment, as clients send them).
 *
 * The response's rcode, the TC bit and the question's type are reported
 * with the sample; the name is not read (data minimisation). A second
 * query with an id still outstanding on the same tuple is a retransmission
 * or a duplicate id: its response could answer either, so the timing is
 * dropped (as Karn's rule for TCP) and counted; a response that answers no
 * outstanding query (lost query, late duplicate, or one sent before
 * rttscope started) is counted and gives nothing. */
#ifndef RTTSCOPE_ID_DNS_H
#define RTTSCOPE_ID_DNS_H

#include "packet.h"
#include "config.h"
#include "counters.h"
#include "maps.h"

#define DNS_FLAG_QR	  0x8000
#define DNS_FLAG_TC	  0x0200
#define DNS_RCODE_MASK	  0x000f
#define DNS_MAX_LABELS	  32 /* labels of a question name walked */
#define DNS_MAX_LABEL_LEN 63

struct dns_hdr {
	__be16 id;
	__be16 flags;
	__be16 qdcount;
	__be16 ancount;
	__be16 nscount;
	__be16 arcount;
};

static __always_inline bool is_dns_port(__be16 port)
{
	return port_listed(cfg_dns_ports, DNS_PORTS, port);
}

/* Returns the type of the first question of the message whose question
 * section starts at byte off (bits 0-15; 0 when the name is longer than
 * walked, truncated or malformed) and the length of its name on the wire
 * (bits 16-24). Labels are read with a load helper so the offset stays an
 * imprecise scalar and the loop states prune. Global: verified once. */
#define DEFINE_DNS_QTYPE(name, ctx_type, load)                          \
	__noinline int name(ctx_type *ctx, __u32 off)                   \
	{                                                               \
		__u32 start = off;                                      \
		__be16 qtype;                                           \
		__u8 len;                                               \
		int i;                                                  \
                                                                        \
		for (i = 0; i < DNS_MAX_LABELS; i++) {                  \
			if (load(ctx, off, &len, 1) < 0)                \
				return 0;                               \
			if (len == 0) {                                 \
				off += 1;                               \
				break;                                  \
			}                                               \
			/* A compression pointer ends the name. */      \
			if ((len & 0xc0) == 0xc0) {                     \
				off += 2;                               \
				break;                                  \
			}                                               \
			if (len > DNS_MAX_LABEL_LEN)                    \
				return 0;                               \
			off += len + 1;                                 \
		}                                                       \
		if (i == DNS_MAX_LABELS || off - start >= DNS_NAME_MAX) \
			return 0;                                       \
		if (load(ctx, off, &qtype, sizeof(qtype)) < 0)          \
			return 0;                                       \
		return (off - start) << 16 | bpf_ntohs(qtype);          \
	}

/* The name of the question of the response being handled (per CPU: valid
 * during one program run), for the RTT event (--dns-names). */
struct dns_name {
	__u8 name[DNS_NAME_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct dns_name);
	__uint(max_entries, 1);
} dns_names SEC(".maps");

/* Copies len bytes of name at byte off into dns_names. Global: verified
 * once, and its stack is not the data path's (older verifiers limit the
 * whole call chain of the batched replay to 512 bytes). */
#define DEFINE_DNS_COPY_NAME(fn, ctx_type, load)                         \
	__noinline int fn(ctx_type *ctx, __u32 off, __u32 len)           \
	{                                                                \
		struct dns_name *n;                                      \
		__u32 zero = 0;                                          \
                                                                         \
		if (len == 0 || len >= DNS_NAME_MAX)                     \
			return -1;                                       \
		n = bpf_map_lookup_elem(&dns_names, &zero);              \
		if (!n)                                                  \
			return -1;                                       \
		/* 1..DNS_NAME_MAX in a form older verifiers (6.1)     \
		 * see: a masked value plus one. */ \
		len = ((len - 1) & (DNS_NAME_MAX - 1)) + 1;              \
		return load(ctx, off, n->name, len);                     \
	}

DEFINE_DNS_QTYPE(dns_qtype_skb, struct __sk_buff, bpf_skb_load_bytes)
DEFINE_DNS_QTYPE(dns_qtype_xdp, struct xdp_md, bpf_xdp_load_bytes)
DEFINE_DNS_COPY_NAME(dns_copy_name_skb, struct __sk_buff, bpf_skb_load_bytes)
DEFINE_DNS_COPY_NAME(dns_copy_name_xdp, struct xdp_md, bpf_xdp_load_bytes)

/* Reads the question at byte off: its type, and with --dns-names its
 * name (into dns_names). */
static __always_inline void dns_question(struct parsing_context *pctx,
					 __u32 off, struct packet_info *p)
{
	__u32 len;
	int ret;

	if (pctx->is_xdp)
		ret = dns_qtype_xdp(pctx->ctx, off);
	else
		ret = dns_qtype_skb(pctx->ctx, off);
	p->dns.qtype = ret & 0xffff;
	len = (ret >> 16) & (DNS_NAME_MAX - 1);
	if (!cfg_dns_names || !len)
		return;
	if (pctx->is_xdp)
		ret = dns_copy_name_xdp(pctx->ctx, off, len);
	else
		ret = dns_copy_name_skb(pctx->ctx, off, len);
	if (ret == 0)
		p->dns.name_len = len;
}

/* Reads a DNS message at byte off of the packet. to_server and
 * from_server say whether the packet goes to or comes from a DNS port.
 * Returns -1 when it is not a query to or a response from a server. */
static __always_inline int parse_dns_msg(struct parsing_context *pctx,
					 __u32 off, bool to_server,
					 bool from_server,
					 struct packet_info *p)
{
	struct dns_hdr h;
	__u16 flags;
	int ret;

	if (pctx->is_xdp)
		ret = bpf_xdp_load_bytes(pctx->ctx, off, &h, sizeof(h));
	else
		ret = bpf_skb_load_bytes(pctx->ctx, off, &h, sizeof(h));
	if (ret < 0)
		return -1;
	flags = bpf_ntohs(h.flags);
	if (!(flags & DNS_FLAG_QR) && to_server) {
		p->pid.identifier = bpf_ntohs(h.id);
		p->pid.flow.reserved = RTT_SOURCE_DNS;
		p->pid_valid = true;
	} else if ((flags & DNS_FLAG_QR) && from_server) {
		p->reply_id = bpf_ntohs(h.id);
		p->reply_source = RTT_SOURCE_DNS;
		p->reply_valid = true;
		p->dns.rcode = flags & DNS_RCODE_MASK;
		p->dns.truncated = !!(flags & DNS_FLAG_TC);
		if (h.qdcount)
			dns_question(pctx, off + sizeof(h), p);
	} else {
		return -1;
	}
	p->dns.kind = SRC_INFO_DNS;
	return 0;
}

/* UDP: a message to or from a DNS port. Returns 1 when the datagram is
 * not DNS. */
static __always_inline int parse_dns_udp(struct parsing_context *pctx,
					 struct udphdr *udph,
					 struct packet_info *p)
{
	bool to_server = is_dns_port(udph->dest);
	bool from_server = is_dns_port(udph->source);

	if (!to_server && !from_server)
		return 1;
	return parse_dns_msg(pctx, (void *)(udph + 1) - pctx->data, to_server,
			     from_server, p);
}

/* TCP: a message after the length prefix, in a segment to or from a DNS
 * port with payload. Returns -1 when the segment carries none: the TCP
 * sources then take it. */
static __always_inline int parse_dns_tcp(struct parsing_context *pctx,
					 struct tcphdr *tcph, __u32 hdrlen,
					 struct packet_info *p)
{
	bool to_server = is_dns_port(tcph->dest);
	bool from_server = is_dns_port(tcph->source);
	__u32 off;

	if (!to_server && !from_server)
		return -1;
	/* Length prefix and header at least. */
	if (p->payload < 2 + sizeof(struct dns_hdr))
		return -1;
	off = (void *)tcph - pctx->data + hdrlen + 2;
	return parse_dns_msg(pctx, off, to_server, from_server, p);
}

/* After the flow lookup: a query whose id is already outstanding on this
 * tuple drops that timing (retransmission or duplicate id). (A response
 * that answers nothing is counted where the lookup misses: match_packet,
 * or dns_without_flow.) */
static __always_inline void dns_on_flow(struct packet_info *p,
					struct flow_dir_state *snd)
{
	if (!p->pid_valid || p->pid.flow.reserved != RTT_SOURCE_DNS)
		return;
	if (ts_forget(&p->pid, snd)) {
		count(COUNTER_DNS_DUPLICATE_QUERIES);
		p->pid_valid = false;
	}
}

/* A DNS response whose query is not outstanding: counted. */
static __always_inline void dns_unmatched(struct packet_info *p)
{
	if (cfg_track_dns && p->reply_source == RTT_SOURCE_DNS)
		count(COUNTER_DNS_UNMATCHED_RESPONSES);
}

/* A packet of no known flow: a DNS response there answers nothing. */
static __always_inline void dns_without_flow(struct packet_info *p)
{
	if (p->reply_valid)
		dns_unmatched(p);
}

#endif /* RTTSCOPE_ID_DNS_H */
