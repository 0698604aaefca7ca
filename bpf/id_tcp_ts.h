/* SPDX-License-Identifier: GPL-2.0 */
/* RTT source: TCP timestamps (RFC 7323). A packet's TSval is its identifier;
 * an ACK's TSecr names the TSval it answers. */
#ifndef RTTSCOPE_ID_TCP_TS_H
#define RTTSCOPE_ID_TCP_TS_H

#include "packet.h"
#include "config.h"
#include "walkers.h"
#include "id_tcp_seq.h"
#include "id_dns.h"

/* The layout Linux and most other stacks send (RFC 7323, appendix A): the
 * timestamp option first, after two NOPs. Read in place, it spares the
 * option walk (tcp_ts_skb/xdp) on nearly every packet. Returns -1 for any
 * other layout. */
static __always_inline int tcp_ts_first(struct tcphdr *tcph, __u32 hdrlen,
					void *data_end, struct tcp_ts_opt *out)
{
	__be32 *opt = (__be32 *)(tcph + 1);

	if (hdrlen < sizeof(*tcph) + 12 || (void *)(opt + 3) > data_end)
		return -1;
	if (opt[0] != bpf_htonl(TCPOPT_NOP << 24 | TCPOPT_NOP << 16 |
				TCPOPT_TIMESTAMP << 8 | TCPOLEN_TIMESTAMP))
		return -1;
	out->tsval = bpf_ntohl(opt[1]);
	out->tsecr = bpf_ntohl(opt[2]);
	return 0;
}

/* Fills the identifiers and flow events of a TCP packet. Returns -1 when the
 * packet has nothing to offer (no timestamp option, malformed header). */
static __always_inline int parse_tcp_identifier(struct parsing_context *pctx,
						void *l4, struct packet_info *p)
{
	struct tcphdr *tcph = l4;
	struct tcp_ts_opt ts;
	__u32 hdrlen, off;
	bool has_payload;
	int ret;

	if ((void *)(tcph + 1) > pctx->data_end)
		return -1;
	hdrlen = tcph->doff * 4;
	if (hdrlen < sizeof(*tcph))
		return -1;

	p->pid.flow.saddr.port = tcph->source;
	p->pid.flow.daddr.port = tcph->dest;

	if (tcph->rst) {
		p->event_type = FLOW_EVENT_CLOSING;
		p->event_reason = EVENT_REASON_RST;
	} else if (tcph->fin) {
		p->event_type = FLOW_EVENT_CLOSING;
		p->event_reason = EVENT_REASON_FIN;
	} else if (tcph->syn) {
		p->event_type = FLOW_EVENT_OPENING;
		p->event_reason =
			tcph->ack ? EVENT_REASON_SYN_ACK : EVENT_REASON_SYN;
	}

	/* DNS over TCP (id_dns.h): a segment carrying a message takes the
	 * DNS identifiers instead of the TCP ones. */
	if (cfg_track_dns && !parse_dns_tcp(pctx, tcph, hdrlen, p))
		return 0;
	if (!cfg_track_tcp && !cfg_track_tcp_handshake)
		return 0; /* DNS only: flow state, no identifiers */

	/* Sequence numbers instead (id_tcp_seq.h): always in seq mode, for
	 * the handshake's SYNs, and in auto mode without the option. */
	if ((cfg_track_tcp && cfg_tcp_mode == TCP_MODE_SEQ) ||
	    (tcph->syn && cfg_track_tcp_handshake))
		return parse_tcp_seq(tcph, hdrlen, p);

	ret = tcp_ts_first(tcph, hdrlen, pctx->data_end, &ts);
	if (ret < 0) {
		off = l4 - pctx->data;
		if (pctx->is_xdp)
			ret = tcp_ts_xdp(pctx->ctx, off, &ts);
		else
			ret = tcp_ts_skb(pctx->ctx, off, &ts);
	}
	if (ret < 0 && tcp_seq_used())
		return parse_tcp_seq(tcph, hdrlen, p);
	if (ret < 0)
		return 0; /* still counts for flow state, no identifiers */
	/* The handshake's last ACK answers a SYN-ACK timed by sequence. */
	if (cfg_track_tcp_handshake)
		parse_tcp_ack(tcph, p);
	if (!cfg_track_tcp)
		return 0; /* handshake samples only */

	/* A pure ACK elicits no reply of its own: timestamping it would give
	 * samples inflated by the peer's next send. */
	has_payload = p->l3_len > p->l4_offset + hdrlen;
	p->pid.identifier = ts.tsval;
	p->pid_valid =
		has_payload || tcph->fin || (tcph->syn && cfg_include_syn);
	if (tcph->syn && !cfg_include_syn)
		p->pid_valid = false;

	/* TSecr is only meaningful with the ACK flag. */
	p->reply_id = ts.tsecr;
	p->reply_valid = tcph->ack;
	return 0;
}

#endif /* RTTSCOPE_ID_TCP_TS_H */
