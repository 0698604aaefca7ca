/* SPDX-License-Identifier: GPL-2.0 */
/* RTT sources: TCP sequence and acknowledgement numbers, for segments
 * without the timestamp option (RTT_SOURCE_TCP_SEQ), and the handshake
 * (RTT_SOURCE_TCP_SYN: SYN -> SYN-ACK, SYN-ACK -> ACK), with or without it.
 *
 * A segment's identifier is its end sequence (seq + payload, SYN and FIN
 * counting one): the first ACK whose cumulative acknowledgement reaches it
 * answers it. Sequence numbers wrap, so every comparison is serial-number
 * arithmetic (RFC 1982) on the difference.
 *
 * Unlike TSecr, an ACK does not name the segment it answers: it covers all
 * the data before it. Each side therefore times one range at a time (as
 * BSD TCP times one segment per round trip), remembered in its half of the
 * flow state (struct tcp_seq_dir), and an ACK of the other side that
 * reaches that range's end is the reply: the lookup in the timestamp map
 * stays an exact one, under the key {tuple, end sequence, source}. A
 * delayed or cumulative ACK that also covers later segments still gives the
 * time since the timed range was first sent: what TCP's own RTT estimator
 * (RFC 6298) measures.
 *
 * Karn's rule: a segment that carries sequence numbers already sent is a
 * retransmission (or reordered before the observer). If the range being
 * timed is not yet acknowledged at that point and the retransmission
 * starts before its end, the ACK that finally covers it is ambiguous (it
 * may answer either copy) or post-loss (it waited for the hole before it to
 * be filled): the timing is dropped. The next range is timed only when it
 * is new data, sent after the retransmission, so no sample is taken until
 * new data is acknowledged. Duplicate ACKs and ACKs that only add SACK
 * blocks never reach a range that is being timed: timed data is always
 * beyond every ACK sent before it, so only an ACK that advances does.
 *
 * Segments aggregated by GRO (or not yet split by TSO) are one range: the
 * IP length covers the whole. A BIG TCP packet (IPv4 total length 0 or an
 * IPv6 jumbogram) gives no length and is not timed. */
#ifndef RTTSCOPE_ID_TCP_SEQ_H
#define RTTSCOPE_ID_TCP_SEQ_H

#include "packet.h"
#include "config.h"
#include "counters.h"
#include "flow.h"
#include "maps.h"

/* a after b, modulo 2^32. */
static __always_inline bool seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

/* Whether the flow hook below has work: the sequence source (auto or seq
 * mode) or the handshake is on. A load-time constant. */
static __always_inline bool tcp_seq_used(void)
{
	return (cfg_track_tcp && cfg_tcp_mode != TCP_MODE_TS) ||
	       cfg_track_tcp_handshake;
}

/* A segment's ACK. Alone (seq == end: no range of its own) for a segment
 * that carries the timestamp option: the handshake's last ACK echoes a
 * SYN-ACK timed by sequence. */
static __always_inline void parse_tcp_ack(struct tcphdr *tcph,
					  struct packet_info *p)
{
	p->seg.ack = bpf_ntohl(tcph->ack_seq);
	p->seg.ack_valid = tcph->ack;
	p->seg.kind = SRC_INFO_TCP_SEG;
}

/* Fills the sequence space of a segment and its identifier. A SYN is timed
 * as the handshake (with --tcp-handshake or --include-syn), other segments
 * that occupy sequence space as data. tcp_seq_on_flow() decides, with the
 * flow's state, whether the identifier is really timed. */
static __always_inline int parse_tcp_seq(struct tcphdr *tcph,
					 struct packet_info *p)
{
	__u32 len = p->payload;
	__u8 source;

	parse_tcp_ack(tcph, p);
	p->seg.seq = bpf_ntohl(tcph->seq);
	/* A RST's data (a diagnostic, RFC 9293 3.5.3) is not sequence
	 * space anyone acknowledges. */
	if (tcph->rst)
		len = 0;
	else
		len += tcph->syn + tcph->fin;
	p->seg.end = p->seg.seq + len;

	if (tcph->syn) {
		source = RTT_SOURCE_TCP_SYN;
		p->pid_valid = cfg_track_tcp_handshake || cfg_include_syn;
	} else {
		source = RTT_SOURCE_TCP_SEQ;
		p->pid_valid =
			cfg_track_tcp && cfg_tcp_mode != TCP_MODE_TS && len;
	}
	p->pid.identifier = p->seg.end;
	p->pid.flow.reserved = source;
	return 0;
}

/* Drops the timing of s's range (Karn's rule). p is a packet of the same
 * direction; its own identifier is not timed, so its key is reused. */
static __always_inline void tcp_seq_drop_timed(struct packet_info *p,
					       struct tcp_seq_dir *s,
					       struct flow_dir_state *snd)
{
	s->timed = 0;
	p->pid.identifier = s->timed_end;
	p->pid.flow.reserved = s->timed_source;
	if (ts_forget(&p->pid, snd))
		count(COUNTER_TCP_SEQ_AMBIGUOUS);
}

/* Runs once the flow is known, before timestamping and matching: turns the
 * segment's ACK into the reply to the range the other side times, and
 * decides whether this segment's range is timed. s is the sender's half,
 * o the other's (the same one for a flow with itself). */
static __always_inline void tcp_seq_on_flow(struct packet_info *p,
					    struct flow_state *fs,
					    struct flow_dir_state *snd,
					    __u32 side, __u32 oside)
{
	struct tcp_seq_dir *s = &fs->seq[side & 1], *o = &fs->seq[oside & 1];
	bool retransmitted;

	/* Whoever clears timed first takes the reply: a later ACK of the
	 * same range finds nothing to cover. */
	if (p->seg.ack_valid && o->timed &&
	    !seq_after(o->timed_end, p->seg.ack)) {
		o->timed = 0;
		p->reply_id = o->timed_end;
		p->reply_source = o->timed_source;
		p->reply_valid = true;
	}
	if (p->seg.end == p->seg.seq)
		return; /* no sequence space: a pure ACK, a RST */

	retransmitted = s->has_max && seq_after(s->max_end, p->seg.seq);
	if (!s->has_max || seq_after(p->seg.end, s->max_end)) {
		s->max_end = p->seg.end;
		s->has_max = 1;
	}
	if (retransmitted) {
		p->pid_valid = false;
		count(COUNTER_TCP_SEQ_RETRANSMISSIONS);
		if (s->timed && seq_after(s->timed_end, p->seg.seq))
			tcp_seq_drop_timed(p, s, snd);
		return;
	}
	if (!p->pid_valid)
		return;
	if (s->timed) {
		p->pid_valid = false; /* one range at a time */
		return;
	}
	s->timed = 1;
	s->timed_end = p->seg.end;
	s->timed_source = p->pid.flow.reserved;
}

#endif /* RTTSCOPE_ID_TCP_SEQ_H */
