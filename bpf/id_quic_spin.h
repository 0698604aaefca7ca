/* SPDX-License-Identifier: GPL-2.0 */
/* RTT source: the QUIC latency spin bit (RFC 9000 17.4, RFC 9312 3.8.2),
 * RTT_SOURCE_QUIC_SPIN. In 1-RTT (short header) packets the client sends
 * the inverse of the last spin value it received and the server reflects
 * the last one it received, so the bit flips once per end-to-end RTT in
 * each direction: the time between two flips ("edges") seen in one
 * direction is one round trip of the whole path, client to server and
 * back, wherever the observer is. The bit is not covered by header
 * protection. Long header packets (the handshake) carry no spin bit.
 *
 * There is no identifier to echo: each direction keeps its spin state in
 * its half of the flow (struct quic_spin_dir) and reports the interval
 * between accepted edges; the timestamp map is not used. Filters:
 *  - an edge closer to the previous accepted one than 1/8 of the running
 *    RTT estimate is rejected, and the direction keeps the value of the
 *    accepted edge: a packet of the previous period reordered after an
 *    edge flips the bit back, which is rejected, and the packets after it,
 *    which carry the accepted value again, are no edge at all;
 *  - endpoints that disable spinning send a constant bit (no edges, no
 *    samples) or a random one, chosen per packet (RFC 9000 recommends
 *    either): then about every second packet is an edge. Each direction
 *    is judged over windows of QUIC_SPIN_WINDOW accepted edges: a flow
 *    that spins sends either one packet per RTT (every packet an edge) or
 *    several (far fewer edges than packets), and a window with 1.25 to 3
 *    packets per edge marks the direction random: no samples from it any
 *    more. Samples are reported only once a first window passed. A flow
 *    that really sends two to three packets per RTT is taken for random
 *    (docs/sources.md). */
#ifndef RTTSCOPE_ID_QUIC_SPIN_H
#define RTTSCOPE_ID_QUIC_SPIN_H

#include "packet.h"
#include "config.h"
#include "counters.h"
#include "flow.h"

#define QUIC_SPIN_WINDOW  16 /* accepted edges per judgement */
#define QUIC_RANDOM_MIN	  20 /* packets per window that look random: */
#define QUIC_RANDOM_MAX	  48 /* 1.25 to 3 per edge */
#define QUIC_REJECT_SHIFT 3 /* edges closer than estimate / 8 */
#define QUIC_HDR_LONG	  0x80
#define QUIC_HDR_FIXED	  0x40
#define QUIC_HDR_SPIN	  0x20

static __always_inline bool is_quic_port(__be16 port)
{
	return port_listed(cfg_quic_ports, QUIC_PORTS, port);
}

/* A UDP datagram to or from a QUIC port: any QUIC packet may open the
 * flow; a short header one carries a spin bit. */
static __always_inline int parse_quic(struct parsing_context *pctx,
				      struct udphdr *udph,
				      struct packet_info *p)
{
	__u8 *first = (__u8 *)(udph + 1);

	if ((void *)(first + 1) > pctx->data_end)
		return -1;
	/* Only to let the first packet open the flow: the flow hook
	 * clears it, nothing is timestamped. */
	p->pid_valid = true;
	p->reply_source = RTT_SOURCE_QUIC_SPIN; /* the source of its samples */
	p->quic.kind = SRC_INFO_QUIC;
	if ((*first & (QUIC_HDR_LONG | QUIC_HDR_FIXED)) == QUIC_HDR_FIXED) {
		p->quic.short_hdr = 1;
		p->quic.spin = !!(*first & QUIC_HDR_SPIN);
	}
	return 0;
}

/* Runs on every packet of the flow; returns whether an edge of this
 * direction gives a sample, left in p->quic.sample. s is the sender's
 * half. */
static __always_inline bool quic_spin_on_flow(struct packet_info *p,
					      struct quic_spin_dir *s)
{
	__u64 now, interval;
	__u32 est, sample;
	__u8 value;

	p->pid_valid = false;
	if (!p->quic.short_hdr || (s->flags & QUIC_SPIN_RANDOM))
		return 0;
	if (s->win_pkts < 0xffff)
		s->win_pkts++;
	value = p->quic.spin ? QUIC_SPIN_VALUE : 0;
	if (!(s->flags & QUIC_SPIN_SEEN)) {
		s->flags |= QUIC_SPIN_SEEN | value;
		return 0;
	}
	if ((s->flags & QUIC_SPIN_VALUE) == value)
		return 0;
	/* An edge; the stored value follows it only once it is accepted. */

	now = packet_time(p); /* the clock is read at edges only */
	if (!s->last_edge || now < s->last_edge) {
		s->flags ^= QUIC_SPIN_VALUE;
		s->last_edge = now;
		return 0;
	}
	interval = now - s->last_edge;
	est = s->est;
	if (est && interval < est >> QUIC_REJECT_SHIFT) {
		count(COUNTER_QUIC_SPIN_REJECTED);
		return 0;
	}
	s->flags ^= QUIC_SPIN_VALUE;
	s->last_edge = now;
	sample = interval > 0xffffffffULL ? 0xffffffff : interval;
	s->est = est ? est - (est >> 3) + (sample >> 3) : sample;
	if (++s->win_edges >= QUIC_SPIN_WINDOW) {
		if (s->win_pkts >= QUIC_RANDOM_MIN &&
		    s->win_pkts <= QUIC_RANDOM_MAX) {
			s->flags |= QUIC_SPIN_RANDOM;
			count(COUNTER_QUIC_SPIN_RANDOM);
			return 0;
		}
		s->flags |= QUIC_SPIN_VALID;
		s->win_edges = 0;
		s->win_pkts = 0;
	}
	if (!(s->flags & QUIC_SPIN_VALID))
		return 0;
	p->quic.sample = interval;
	return 1;
}

#endif /* RTTSCOPE_ID_QUIC_SPIN_H */
