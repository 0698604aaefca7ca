/* SPDX-License-Identifier: GPL-2.0 */
/* The UDP sources, by port: DNS (id_dns.h) and QUIC (id_quic_spin.h). */
#ifndef RTTSCOPE_ID_UDP_H
#define RTTSCOPE_ID_UDP_H

#include "packet.h"
#include "config.h"
#include "id_dns.h"
#include "id_quic_spin.h"

static __always_inline int parse_udp_identifier(struct parsing_context *pctx,
						void *l4, struct packet_info *p)
{
	struct udphdr *udph = l4;
	int ret;

	if ((void *)(udph + 1) > pctx->data_end ||
	    set_payload(p, sizeof(*udph)))
		return -1;
	p->pid.flow.saddr.port = udph->source;
	p->pid.flow.daddr.port = udph->dest;
	if (cfg_track_dns) {
		ret = parse_dns_udp(pctx, udph, p);
		if (ret <= 0)
			return ret;
	}
	if (cfg_track_quic &&
	    (is_quic_port(udph->dest) || is_quic_port(udph->source)))
		return parse_quic(pctx, udph, p);
	return -1;
}

#endif /* RTTSCOPE_ID_UDP_H */
