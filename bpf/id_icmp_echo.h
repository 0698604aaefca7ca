/* SPDX-License-Identifier: GPL-2.0 */
/* RTT source: ICMP and ICMPv6 echo. The echo sequence number is the
 * identifier; the echo identifier stands in for both ports. */
#ifndef RTTSCOPE_ID_ICMP_ECHO_H
#define RTTSCOPE_ID_ICMP_ECHO_H

#include "packet.h"

struct echo_hdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be16 id;
	__be16 seq;
};

static __always_inline int parse_echo(struct parsing_context *pctx, void *l4,
				      struct packet_info *p, __u8 request,
				      __u8 reply)
{
	struct echo_hdr *eh = l4;

	if ((void *)(eh + 1) > pctx->data_end)
		return -1;
	if (eh->code != 0 || (eh->type != request && eh->type != reply))
		return -1;
	if (set_payload(p, sizeof(*eh)))
		return -1;

	p->pid.flow.saddr.port = eh->id;
	p->pid.flow.daddr.port = eh->id;
	p->pid.flow.reserved = RTT_SOURCE_ICMP;
	p->reply_source = RTT_SOURCE_ICMP;
	if (eh->type == request) {
		p->pid.identifier = bpf_ntohs(eh->seq);
		p->pid_valid = true;
	} else {
		p->reply_id = bpf_ntohs(eh->seq);
		p->reply_valid = true;
	}
	return 0;
}

static __always_inline int parse_icmp_identifier(struct parsing_context *pctx,
						 void *l4,
						 struct packet_info *p)
{
	return parse_echo(pctx, l4, p, ICMP_ECHO, ICMP_ECHOREPLY);
}

static __always_inline int parse_icmp6_identifier(struct parsing_context *pctx,
						  void *l4,
						  struct packet_info *p)
{
	return parse_echo(pctx, l4, p, ICMPV6_ECHO_REQUEST, ICMPV6_ECHO_REPLY);
}

#endif /* RTTSCOPE_ID_ICMP_ECHO_H */
