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
 *  - a flip is only a candidate edge until a later packet confirms it, so
 *    that one stray packet of the previous period, which a reordering
 *    queue may deliver long after the edge, flips the bit back and forth
 *    without giving a sample. The next packet carries the candidate's
 *    value: confirmed. It flips back within 1/4 of the running RTT
 *    estimate: one of the two was a stray, and the packet after them says
 *    which (the candidate's value again: the flip back was; the old value:
 *    the candidate was). It flips back later: a flow sending one packet
 *    per period, whose every packet is an edge; the candidate is
 *    confirmed and this packet is the next candidate (such a flow's last
 *    edge waits for a packet that never comes). The sample carries the
 *    time of its edge, not of the confirming packet. Flips rejected so
 *    count in quic_spin_rejected. In a replay, a packet stamped before
 *    the last edge (a capture may keep a delayed packet's first time) is
 *    ignored;
 *  - a confirmed edge closer to the previous accepted one than 1/8 of the
 *    estimate is rejected too, and the direction keeps the value of the
 *    accepted edge. Several stray packets in a row can still pass as an
 *    edge (docs/sources.md);
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
#define QUIC_STRAY_SHIFT  2 /* a flip back within estimate / 4: a stray */
#define QUIC_SPIN_FAR	  0xffffffffU /* candidate offset beyond 32 bits */
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

/* An edge at time edge is confirmed (see quic_spin_on_flow): it becomes the
 * direction's accepted edge unless it comes too soon after the last one.
 * Returns whether it gives a sample, left in p->quic.sample. */
static __always_inline bool
quic_spin_accept(struct packet_info *p, struct quic_spin_dir *s, __u64 edge)
{
	__u64 interval;
	__u32 est, sample;

	if (!s->last_edge) {
		s->flags ^= QUIC_SPIN_VALUE;
		s->last_edge = edge;
		return 0;
	}
	interval = edge - s->last_edge;
	est = s->est;
	if (est && interval < est >> QUIC_REJECT_SHIFT) {
		count(COUNTER_QUIC_SPIN_REJECTED);
		return 0;
	}
	s->flags ^= QUIC_SPIN_VALUE;
	s->last_edge = edge;
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

/* Whether a sample was given; if so, it is stamped with its edge's time. */
static __always_inline bool quic_spin_sample(struct packet_info *p,
					     bool sampled, __u64 edge)
{
	if (sampled)
		p->time = edge;
	return sampled;
}

/* The time of the candidate edge: *cand nanoseconds after the last
 * accepted edge, QUIC_SPIN_FAR when that did not fit 32 bits. */
static __always_inline __u32 quic_spin_offset(const struct quic_spin_dir *s,
					      __u64 now)
{
	__u64 off = now - s->last_edge;

	return off >= QUIC_SPIN_FAR ? QUIC_SPIN_FAR : off;
}

/* Runs on every packet of the flow; returns whether a confirmed edge of
 * this direction gives a sample, left in p->quic.sample. The sample is its
 * edge's: p->time becomes the edge packet's time, one packet back (the
 * flow's last_seen then lags by that packet; nothing else of a QUIC packet
 * reads the time afterwards). s is the sender's half, *cand its candidate
 * edge. Not inlined: its locals would grow the packet path's stack frame,
 * and the batched replay's call chain is at 6.1's 512-byte limit. */
static __noinline bool quic_spin_on_flow(struct packet_info *p,
					 struct quic_spin_dir *s, __u32 *cand)
{
	__u8 pending, value;
	__u64 now, edge;
	bool sampled;

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
	pending = s->flags & (QUIC_SPIN_CAND | QUIC_SPIN_REVERTED);
	if (!pending && (s->flags & QUIC_SPIN_VALUE) == value)
		return 0; /* the steady state: no clock read */

	now = packet_time(p);
	if (now < s->last_edge)
		return 0; /* replay: stamped before the edge, says nothing */
	if (!s->last_edge) /* the first edge only starts the measurement */
		return quic_spin_accept(p, s, now);
	if (!pending) {
		s->flags |= QUIC_SPIN_CAND;
		*cand = quic_spin_offset(s, now);
		return 0;
	}
	edge = s->last_edge + *cand;
	if (*cand != QUIC_SPIN_FAR && now < edge)
		return 0; /* replay: stamped before the candidate */
	if ((s->flags & QUIC_SPIN_VALUE) != value) {
		/* The candidate's value again: confirmed (if it was flipped
		 * back in between, that packet was the stray one). */
		if (pending & QUIC_SPIN_REVERTED)
			count(COUNTER_QUIC_SPIN_REJECTED);
		s->flags &= ~(QUIC_SPIN_CAND | QUIC_SPIN_REVERTED);
		if (*cand == QUIC_SPIN_FAR) {
			/* Idle for seconds: no sample, start over. */
			s->flags ^= QUIC_SPIN_VALUE;
			s->last_edge = now;
			return 0;
		}
		return quic_spin_sample(p, quic_spin_accept(p, s, edge), edge);
	}
	if (pending & QUIC_SPIN_REVERTED) {
		/* Two packets with the old value after the candidate: the
		 * candidate was a stray packet of the previous period. */
		s->flags &= ~(QUIC_SPIN_CAND | QUIC_SPIN_REVERTED);
		count(COUNTER_QUIC_SPIN_REJECTED);
		return 0;
	}
	if (*cand == QUIC_SPIN_FAR) {
		/* Flipped back after seconds of silence: start over here. */
		s->flags &= ~QUIC_SPIN_CAND;
		s->last_edge = now;
		return 0;
	}
	/* Flipped back right after the candidate. Soon after it (within
	 * est / 4): one packet of the pair was a stray, the next packet
	 * tells which. Later: a flow sending one packet per period, whose
	 * every packet is an edge; the candidate was real, and if it is
	 * accepted this packet is the next candidate. */
	if (now - edge < s->est >> QUIC_STRAY_SHIFT) {
		s->flags |= QUIC_SPIN_REVERTED;
		return 0;
	}
	sampled = quic_spin_accept(p, s, edge);
	if ((s->flags & QUIC_SPIN_VALUE) != value)
		*cand = quic_spin_offset(s, now);
	else
		s->flags &= ~QUIC_SPIN_CAND;
	return quic_spin_sample(p, sampled, edge);
}

#endif /* RTTSCOPE_ID_QUIC_SPIN_H */
