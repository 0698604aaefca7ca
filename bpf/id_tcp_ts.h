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

/* Whether a segment's timestamp option is read: by the timestamp source
 * and the handshake's last ACK, unless seq mode gives every segment to the
 * sequence source, and for ePPing's class of the packet in aggregated mode.
 * Not with DNS alone. A load-time constant. */
static __always_inline bool tcp_ts_wanted(void)
{
	if (cfg_aggregate)
		return true;
	if (cfg_track_tcp && cfg_tcp_mode == TCP_MODE_SEQ)
		return false;
	return cfg_track_tcp || cfg_track_tcp_handshake;
}

/* Fills the identifiers and flow events of a TCP packet. Returns -1 when the
 * packet is not tracked: no enabled source gives it identifiers, or its
 * header is malformed. As in ePPing, untracked packets are invisible to the
 * flow state: they open, close and count nothing. With the timestamp source
 * alone (ePPing's configuration) that is ePPing's rule: segments without
 * the option, and SYNs without --include-SYN. The sequence source (auto
 * and seq modes) and the handshake source track the segments they time or
 * take replies from, DNS over TCP the segments that carry a message. */
static __always_inline int parse_tcp_identifier(struct parsing_context *pctx,
						void *l4, struct packet_info *p)
{
	struct tcphdr *tcph = l4;
	struct tcp_ts_opt ts;
	__u32 hdrlen, off;
	int ret;

	if ((void *)(tcph + 1) > pctx->data_end)
		return -1;
	hdrlen = tcph->doff * 4;
	if (hdrlen < sizeof(*tcph) || set_payload(p, hdrlen))
		return -1;
	if (tcph->syn && !cfg_include_syn && !cfg_track_tcp_handshake)
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

	ret = -1;
	if (tcp_ts_wanted()) {
		ret = tcp_ts_first(tcph, hdrlen, pctx->data_end, &ts);
		if (ret < 0) {
			off = l4 - pctx->data;
			if (pctx->is_xdp)
				ret = tcp_ts_xdp(pctx->ctx, off, &ts);
			else
				ret = tcp_ts_skb(pctx->ctx, off, &ts);
		}
	}
	/* ePPing's class of the packet (aggregated rx_stats/tx_stats): the
	 * segments it tracks, whatever source measures them here. */
	p->tcp_ts = ret == 0 && (!tcph->syn || cfg_include_syn);

	/* DNS over TCP (id_dns.h): a segment carrying a message takes the
	 * DNS identifiers instead of the TCP ones. */
	if (cfg_track_dns && !parse_dns_tcp(pctx, tcph, hdrlen, p))
		return 0;
	if (!cfg_track_tcp && !cfg_track_tcp_handshake)
		return -1; /* DNS only: no identifiers in other segments */

	/* Sequence numbers instead (id_tcp_seq.h): always in seq mode, for
	 * the handshake's SYNs, and in auto mode without the option. */
	if ((cfg_track_tcp && cfg_tcp_mode == TCP_MODE_SEQ) ||
	    (tcph->syn && cfg_track_tcp_handshake) ||
	    (ret < 0 && tcp_seq_used()))
		return parse_tcp_seq(tcph, p);
	if (ret < 0)
		return -1;
	/* The handshake's last ACK answers a SYN-ACK timed by sequence. */
	if (cfg_track_tcp_handshake)
		parse_tcp_ack(tcph, p);
	if (!cfg_track_tcp)
		return 0; /* handshake samples only */

	/* Packets without payload (pure ACKs, bare FINs) elicit no reply of
	 * their own: timestamping them would give samples inflated by the
	 * peer's next send. */
	p->pid.identifier = ts.tsval;
	p->pid_valid = p->payload > 0 || tcph->syn;

	/* TSecr is only meaningful with the ACK flag. */
	p->reply_id = ts.tsecr;
	p->reply_valid = tcph->ack;
	return 0;
}

#endif /* RTTSCOPE_ID_TCP_TS_H */
