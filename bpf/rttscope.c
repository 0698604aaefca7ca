// SPDX-License-Identifier: GPL-2.0
/* rttscope: passive per-flow RTT. The tc/TCX and XDP programs timestamp
 * packets carrying a new identifier (TCP TSval, ICMP echo sequence) and match
 * replies that echo it (TCP TSecr, echo reply sequence). The cleanup
 * programs (cleanup.h) expire stale flows and timestamps, driven by user
 * space. User space loads every program except the tc ones as optional: a
 * kernel that refuses one gets a fallback, not a refusal to run. */
#include "common.h"
#include "config.h"
#include "counters.h"
#include "maps.h"
#include "flowtable.h"
#include "parse.h"
#include "id_tcp_ts.h"
#include "id_icmp_echo.h"
#include "id_udp.h"
#include "agg.h"
#include "summary.h"
#include "evict.h"

char LICENSE[] SEC("license") = "GPL";

/* Parses a packet down to its RTT identifiers, from its L3 header at l3
 * (parse_l2's EtherType proto). Returns -1 when the packet is not one
 * rttscope tracks. */
static __always_inline int parse_packet(struct parsing_context *pctx,
					__u16 proto, void *l3,
					struct packet_info *p)
{
	void *pos = l3;
	int l4proto;

	if (proto == ETH_P_IP)
		l4proto = parse_ipv4(pctx, &pos, p);
	else if (proto == ETH_P_IPV6)
		l4proto = parse_ipv6(pctx, &pos, p);
	else
		return -1;
	if (l4proto < 0)
		return -1;

	p->l4_offset = pos - l3;
	p->l2_len = l3 - pctx->data;
	p->pid.flow.proto = l4proto;
	p->l3_valid = true;

	if (l4proto == IPPROTO_TCP &&
	    (cfg_track_tcp || cfg_track_tcp_handshake || cfg_track_dns))
		return parse_tcp_identifier(pctx, pos, p);
	if (l4proto == IPPROTO_UDP && (cfg_track_dns || cfg_track_quic))
		return parse_udp_identifier(pctx, pos, p);
	if (l4proto == IPPROTO_ICMP && cfg_track_icmp &&
	    p->pid.flow.ipv == AF_INET)
		return parse_icmp_identifier(pctx, pos, p);
	if (l4proto == IPPROTO_ICMPV6 && cfg_track_icmp &&
	    p->pid.flow.ipv == AF_INET6)
		return parse_icmp6_identifier(pctx, pos, p);
	return -1;
}

/* A packet arriving for this host itself: its reply would measure the local
 * application, not the network. With forwarding off on the interface every
 * arriving packet is for this host. */
static __always_inline bool is_local_destination(void *ctx,
						 struct packet_info *p)
{
	struct bpf_fib_lookup fib = {};
	int ret;

	fib.ifindex = p->ifindex;
	fib.l4_protocol = p->pid.flow.proto;
	fib.sport = p->pid.flow.saddr.port;
	fib.dport = p->pid.flow.daddr.port;
	if (p->pid.flow.ipv == AF_INET) {
		fib.family = AF_INET;
		fib.tos = p->ip_tos;
		fib.ipv4_src = p->pid.flow.saddr.ip.in6_u.u6_addr32[3];
		fib.ipv4_dst = p->pid.flow.daddr.ip.in6_u.u6_addr32[3];
	} else {
		fib.family = AF_INET6;
		__builtin_memcpy(fib.ipv6_src, &p->pid.flow.saddr.ip, 16);
		__builtin_memcpy(fib.ipv6_dst, &p->pid.flow.daddr.ip, 16);
	}
	ret = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	return ret == BPF_FIB_LKUP_RET_NOT_FWDED ||
	       ret == BPF_FIB_LKUP_RET_FWD_DISABLED;
}

/* Whether the packets of the sender's direction are for this host. Asked
 * once per flow direction: routing gives every packet of a direction the
 * same answer, and a FIB lookup is a walk of the routing tables. */
static __always_inline bool is_local_direction(void *ctx, struct packet_info *p,
					       struct flow_dir_state *snd)
{
	if (snd->local_dst == LOCAL_DST_UNKNOWN)
		snd->local_dst = is_local_destination(ctx, p) ? LOCAL_DST_YES :
								LOCAL_DST_NO;
	return snd->local_dst == LOCAL_DST_YES;
}

/* The flags of an event's bpf_ringbuf_submit. A wake-up of the reader is
 * an irq_work, which costs the program microseconds (in a VM, an
 * interrupt): with cfg_event_wakeup_bytes the reader, which polls, is only
 * woken when the ring fills up. */
static __always_inline __u64 event_wakeup(void)
{
	if (!cfg_event_wakeup_bytes)
		return 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >=
			       cfg_event_wakeup_bytes ?
		       BPF_RB_FORCE_WAKEUP :
		       BPF_RB_NO_WAKEUP;
}

/* Reports a change of a direction's state, named as ePPing names it (see
 * struct flow_event): from the side that answers it, so the packet's own
 * tuple for its receiver's direction, reversed for its sender's (written
 * into the event: no tuple on the stack). Caused by the event flow's
 * destination, but for the closing of the receiver's direction (a RST).
 * Global: verified once, and its stack is not the data path's (see
 * replay_last). */
__noinline int send_flow_event(struct packet_info *p, bool of_sender,
			       __u64 time, __u8 type, __u8 reason)
{
	struct flow_event *e;

	if (!p || cfg_aggregate || cfg_steps < STEP_EVENTS)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(COUNTER_RINGBUF_FULL);
		return 0;
	}
	e->event_type = EVENT_TYPE_FLOW;
	e->ifindex = p->ifindex;
	e->timestamp = time;
	e->seen = packet_time(p);
	if (of_sender)
		reverse_tuple(&p->pid.flow, &e->flow);
	else
		e->flow = p->pid.flow;
	e->flow.reserved = 0;
	e->flow_event_type = type;
	e->reason = reason;
	e->source = type == FLOW_EVENT_CLOSING && !of_sender ?
			    EVENT_SOURCE_SRC :
			    EVENT_SOURCE_DEST;
	e->reserved = 0;
	bpf_ringbuf_submit(e, event_wakeup());
	count(COUNTER_FLOW_EVENTS);
	return 0;
}

/* A DNS sample with the question's name (--dns-names, id_dns.h). */
__noinline int send_dns_named_event(struct packet_info *p,
				    struct flow_dir_state *orig,
				    struct flow_dir_state *rec, __u64 rtt);

/* orig sent the timestamped packet, rec (the reply's sender) received it.
 * The packet counters are ePPing's: since orig became active. */
static __always_inline void fill_rtt_event(struct rtt_event *e,
					   struct packet_info *p,
					   struct flow_dir_state *orig,
					   struct flow_dir_state *rec,
					   __u64 rtt)
{
	e->event_type = EVENT_TYPE_RTT;
	e->ifindex = p->ifindex;
	e->timestamp = p->time;
	e->flow = p->pid.flow;
	e->flow.reserved = 0;
	e->match_on_egress = p->is_egress;
	e->source = p->reply_source;
	e->reserved = 0;
	e->rtt = rtt;
	e->min_rtt = orig->min_rtt;
	e->srtt = orig->srtt;
	e->sent_pkts = dir_pkts(orig) - orig->u.base.sent_pkts;
	e->sent_bytes = orig->sent_bytes - orig->u.base.sent_bytes;
	e->rec_pkts = dir_pkts(rec) - orig->u.base.rec_pkts;
	e->rec_bytes = rec->sent_bytes - orig->u.base.rec_bytes;
	e->reserved2 = 0;
	if (cfg_track_dns && p->dns.kind == SRC_INFO_DNS) {
		e->dns_qtype = p->dns.qtype;
		e->dns_rcode = p->dns.rcode;
		e->dns_truncated = p->dns.truncated;
	} else {
		e->dns_qtype = 0;
		e->dns_rcode = 0;
		e->dns_truncated = 0;
	}
}

/* orig sent the timestamped packet, rec (the reply's sender) received it.
 * Only record_sample() calls it, past its cfg_steps check. */
static __always_inline void send_rtt_event(struct packet_info *p,
					   struct flow_dir_state *orig,
					   struct flow_dir_state *rec,
					   __u64 rtt)
{
	struct rtt_event *e;

	if (cfg_dns_names && p->dns.kind == SRC_INFO_DNS && p->dns.name_len) {
		send_dns_named_event(p, orig, rec, rtt);
		return;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(COUNTER_RINGBUF_FULL);
		return;
	}
	fill_rtt_event(e, p, orig, rec, rtt);
	bpf_ringbuf_submit(e, event_wakeup());
	count(COUNTER_RTT_EVENTS);
}

/* Global: verified once, its stack apart from the data path's. */
__noinline int send_dns_named_event(struct packet_info *p,
				    struct flow_dir_state *orig,
				    struct flow_dir_state *rec, __u64 rtt)
{
	struct rtt_named_event *e;
	struct dns_name *n;
	__u32 zero = 0;

	if (!p || !orig || !rec)
		return 0;
	n = bpf_map_lookup_elem(&dns_names, &zero);
	if (!n)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(COUNTER_RINGBUF_FULL);
		return 0;
	}
	fill_rtt_event(&e->rtt, p, orig, rec, rtt);
	e->rtt.event_type = EVENT_TYPE_RTT_NAMED;
	e->name_len = p->dns.name_len;
	__builtin_memset(e->reserved, 0, sizeof(e->reserved));
	__builtin_memcpy(e->name, n->name, sizeof(e->name));
	bpf_ringbuf_submit(e, event_wakeup());
	count(COUNTER_RTT_EVENTS);
	return 0;
}

/* Looks up the flow of a packet, creating it when the packet may open one.
 * Only packets worth timestamping open flows, so pure ACKs and stray replies
 * of unknown flows leave no state behind. */
static __always_inline struct flow_slot *
get_flow(struct packet_info *p, struct network_tuple *key, __u32 side)
{
	struct flow_slot *s;
	bool created;

	s = flow_lookup(key);
	if (s)
		return s;
	if (!p->pid_valid || p->event_type == FLOW_EVENT_CLOSING)
		return NULL;
	s = flow_create(key, packet_time(p), &created);
	if (!s || !created)
		return s; /* no room, or another CPU created it first */

	/* Only the creator writes these, right after publishing the flow;
	 * other CPUs only read opener, for summaries. */
	s->state.opener = side;
	s->state.dir[side].last_seen = p->time;
	count(COUNTER_FLOWS_CREATED);
	summary_open(key, p->time);
	return s;
}

/* The sender's direction becomes active with its first packet worth
 * timestamping (ePPing's rule): its counters start here. peer is the other
 * half (the same one for a flow to itself). */
static __always_inline void activate_dir(struct packet_info *p,
					 struct flow_dir_state *d,
					 const struct flow_dir_state *peer)
{
	d->conn_state = CONN_WAITOPEN;
	d->last_timestamp = packet_time(p);
	d->last_id = p->pid.identifier;
	d->last_source = p->pid.flow.reserved;
	d->ts_attempted = 0;
	d->open_reason = p->event_type == FLOW_EVENT_OPENING ?
				 p->event_reason :
				 EVENT_REASON_FIRST_OBS_PCKT;
	if (!cfg_aggregate) { /* the space holds u.agg */
		d->u.base.sent_pkts = dir_pkts(d);
		d->u.base.sent_bytes = d->sent_bytes;
		d->u.base.rec_pkts = dir_pkts(peer);
		d->u.base.rec_bytes = peer->sent_bytes;
	}
}

/* A packet from the other side answers a waiting direction: it opens. The
 * event carries the time of the direction's last timestamp attempt (its
 * activation if none), as ePPing's does. An RST opens nothing. */
static __always_inline void answer_dir(struct packet_info *p,
				       struct flow_dir_state *orig)
{
	if (orig->conn_state != CONN_WAITOPEN ||
	    p->event_reason == EVENT_REASON_RST)
		return;
	orig->conn_state = CONN_OPEN;
	send_flow_event(p, false, orig->last_timestamp, FLOW_EVENT_OPENING,
			orig->open_reason);
}

static __always_inline bool is_rate_limited(__u64 now, struct flow_dir_state *d)
{
	__u64 rtt;

	if (now < d->last_timestamp)
		return true;
	if (cfg_rtt_rate_milli) {
		rtt = cfg_rtt_rate_use_srtt ? d->srtt : d->min_rtt;
		if (rtt)
			return now - d->last_timestamp <
			       rtt * cfg_rtt_rate_milli / 1000;
	}
	return now - d->last_timestamp < cfg_rate_limit_ns;
}

/* Whether identifier id (of source) is newer than the direction's last one.
 * TCP timestamps and sequence numbers only grow (RFC 7323, 5.2; RFC 1982:
 * serial number arithmetic): an older TSval is a reordered or retransmitted
 * packet. An identifier of another source (the handshake before
 * timestamps, DNS over TCP) is of another space: new. */
static __always_inline bool is_new_id(__u32 id, __u8 source,
				      const struct flow_dir_state *d)
{
	__u32 diff = id - d->last_id;

	if (source != d->last_source)
		return true;
	if (source == RTT_SOURCE_TCP_TS || source == RTT_SOURCE_TCP_SEQ)
		return diff > 0 && diff < (1U << 31);
	return diff != 0;
}

/* A TCP flow first seen after its handshake may have sent its first TSval
 * already (ePPing's rule): the reply would give an inflated sample, so
 * the direction waits for the next one. Not for the sequence source: its
 * retransmissions are told apart (id_tcp_seq.h). */
static __always_inline bool wait_first_edge(const struct packet_info *p)
{
	return !cfg_sample_first_tsval && p->pid.flow.proto == IPPROTO_TCP &&
	       p->pid.flow.reserved == RTT_SOURCE_TCP_TS &&
	       p->event_type != FLOW_EVENT_OPENING;
}

static __always_inline void timestamp_packet(void *ctx, struct packet_info *p,
					     struct flow_dir_state *snd)
{
	int ret; /* see E2BIG_ERR */
	int i;

	if (!p->pid_valid || !dir_active(snd))
		return;
	/* Only the first packet carrying an identifier is timestamped: the
	 * reply to later ones would echo the same value. */
	if ((snd->ts_attempted || wait_first_edge(p)) &&
	    !is_new_id(p->pid.identifier, p->pid.flow.reserved, snd))
		return;
	snd->last_id = p->pid.identifier;
	snd->last_source = p->pid.flow.reserved;

	if (snd->ts_attempted && is_rate_limited(packet_time(p), snd))
		return;
	/* After the rate limit, which turns most candidates away (either
	 * order skips the same packets). */
	if (cfg_local_filter && cfg_steps >= STEP_LOCAL && !p->is_egress &&
	    is_local_direction(ctx, p, snd))
		return;
	/* Counts as an attempt even when the map is full, so heavy flows do
	 * not crowd sparse ones out of freed slots. */
	snd->ts_attempted = 1;
	snd->last_timestamp = packet_time(p);

	ret = bpf_map_update_elem(&ts_map, &p->pid, &p->time, BPF_NOEXIST);
	for (i = 0; i < 2 && ret == -E2BIG_ERR && evict_ts(p->time); i++)
		ret = bpf_map_update_elem(&ts_map, &p->pid, &p->time,
					  BPF_NOEXIST);
	if (ret == 0) {
		__sync_fetch_and_add(&snd->outstanding, 1);
		if (p->pid.flow.reserved == RTT_SOURCE_TCP_TS)
			ts_ring_add(snd, p->pid.identifier);
		count(COUNTER_TS_CREATED);
		remember_ts(&p->pid);
	} else if (ret == -E2BIG_ERR) {
		count(COUNTER_TS_MAP_FULL);
	}
}

/* Whether a reply echoing id (of source) can find a timestamp of orig's
 * side: only an identifier that was timestamped can. Every source: not when the
 * direction has none outstanding. TCP timestamps: most ACKs echo a TSval
 * that was not timestamped (in a bulk transfer nearly every ACK echoes
 * one, and one TSval per rate-limit interval is timestamped), and with
 * GSO/GRO some timestamped TSvals are never echoed, so the outstanding
 * count stays above zero; sparing those ACKs the timestamp map lookup
 * halves an ACK's cost. rep is the replying side's half; *newest_echo
 * is set when id is a TCP timestamp newer than any rep echoed before, for
 * the caller to keep in rep->echoed. Reads only.
 *
 * The last two TSvals timestamped always qualify. An older one can only
 * still be waiting when more than two are in flight (RTT above two
 * rate-limit intervals); since a receiver's TSecr only grows, such a
 * reply echoes a value newer than any echo before it. So a TSval older
 * than both pending ones qualifies only when it is newer than the newest
 * echo seen so far; a reordered ACK echoing an older, skipped TSval gives
 * no sample (documented in docs/performance.md). */
static __always_inline bool echo_may_match(__u32 id, __u8 source,
					   const struct flow_dir_state *orig,
					   const struct flow_dir_state *rep,
					   bool *newest_echo)
{
	__u8 ring = orig->ts_ring;
	__u32 oldest;

	if (!orig->outstanding)
		return false;
	if (source != RTT_SOURCE_TCP_TS)
		return true;
	if (!(ring & TS_RING_USED))
		return false;
	/* (s32) differences: TSvals wrap around. An echo of 0 counts as
	 * none: the next one is then taken as newest, one lookup more. */
	*newest_echo = !rep->echoed || (__s32)(id - rep->echoed) > 0;
	if (id == orig->pending[0] || id == orig->pending[1])
		return true;
	if ((ring & TS_RING_USED) < 2)
		return false;
	oldest = orig->pending[(ring & TS_RING_NEXT) ? 1 : 0];
	return *newest_echo && (__s32)(id - oldest) < 0;
}

/* echo_may_match() for p, which also keeps the newest echo in rep: the
 * decision alone is the fast path's (fastpath.h), which may still hand the
 * packet to this path. */
static __always_inline bool reply_may_match(struct packet_info *p,
					    struct flow_dir_state *orig,
					    struct flow_dir_state *rep)
{
	bool newest_echo = false, ret;

	ret = echo_may_match(p->reply_id, p->reply_source, orig, rep,
			     &newest_echo);
	if (newest_echo)
		rep->echoed = p->reply_id;
	return ret;
}

/* Reports one RTT sample of source p->reply_source, completed by p: of
 * orig's packets (orig_side), rec being the other side. */
static __always_inline void record_sample(struct packet_info *p,
					  struct network_tuple *key,
					  struct flow_dir_state *orig,
					  struct flow_dir_state *rec,
					  __u32 orig_side, __u64 rtt)
{
	count_sample(p->reply_source);
	if (!orig->min_rtt || rtt < orig->min_rtt)
		orig->min_rtt = rtt;
	orig->srtt = update_srtt(orig->srtt, rtt);
	if (cfg_steps < STEP_EVENTS)
		return;
	summary_add(key, orig_side, rtt, p->reply_source);
	if (cfg_aggregate)
		agg_add_rtt(p, rtt);
	else
		send_rtt_event(p, orig, rec, rtt);
}

/* record_sample() for the QUIC spin bit: sample p->quic.sample of side's
 * packets (orig). Global, so that its stack (a copy of the key,
 * which 6.1 wants on the stack for map lookups) is not the data path's:
 * older verifiers limit the whole call chain of the batched replay to 512
 * bytes. */
__noinline int record_quic_sample(struct packet_info *p,
				  struct network_tuple *key,
				  struct flow_dir_state *orig,
				  struct flow_dir_state *rec, __u32 side)
{
	struct network_tuple k;

	if (!p || !key || !orig || !rec)
		return 0;
	k = *key;
	record_sample(p, &k, orig, rec, side, p->quic.sample);
	return 0;
}

/* Whether a reply to orig's packets is matched. ePPing's sources (TCP
 * timestamps, ICMP echo) follow its rule: only while orig is active. The
 * others also after orig's FIN closed it: TCP still acknowledges a
 * half-closed direction's data and the FIN itself, which occupies
 * sequence space (the sequence source times it). */
static __always_inline bool may_match(const struct packet_info *p,
				      const struct flow_dir_state *orig)
{
	if (p->reply_source == RTT_SOURCE_TCP_TS ||
	    p->reply_source == RTT_SOURCE_ICMP)
		return dir_active(orig);
	return orig->conn_state != CONN_EMPTY;
}

static __always_inline void match_packet(struct packet_info *p,
					 struct network_tuple *key,
					 struct flow_dir_state *orig,
					 struct flow_dir_state *snd,
					 __u32 orig_side)
{
	struct packet_id rid = {};
	__u64 *ts, sent;

	if (!p->reply_valid)
		return;
	/* ePPing's rule for the direction's state first; then the ACK filter,
	 * which also checks that some timestamp is outstanding. */
	if (!may_match(p, orig) || !reply_may_match(p, orig, snd)) {
		dns_unmatched(p);
		return;
	}

	reverse_tuple(&p->pid.flow, &rid.flow);
	rid.flow.reserved = p->reply_source;
	rid.identifier = p->reply_id;
	ts = bpf_map_lookup_elem(&ts_map, &rid);
	if (!ts) {
		dns_unmatched(p);
		return;
	}
	sent = *ts;
	packet_time(p);
	/* Each identifier is matched at most once. */
	if (!ts_forget(&rid, orig))
		return;
	if (p->time < sent)
		return;
	record_sample(p, key, orig, snd, orig_side, p->time - sent);
}

/* Whether d, closed by its FIN, still waits for ACKs of timed data (or of
 * the FIN itself) that may_match() lets through: not for ePPing's sources,
 * whose replies a closed direction no longer takes. */
static __always_inline bool awaits_acks(const struct flow_dir_state *d)
{
	return d->conn_state == CONN_CLOSED && d->outstanding &&
	       d->last_source != RTT_SOURCE_TCP_TS &&
	       d->last_source != RTT_SOURCE_ICMP;
}

/* A FIN closes the sender's direction, an RST both; each direction that
 * had opened reports its closing, named as its samples are. The flow goes
 * once neither direction is active (ePPing's rule), after a FIN only once
 * no closed direction awaits ACKs: a reply to a closed direction checks
 * again. */
static __always_inline void close_flow(struct packet_info *p,
				       struct network_tuple *key,
				       struct flow_slot *slot,
				       struct flow_dir_state *snd,
				       struct flow_dir_state *orig)
{
	struct flow_state *fs = &slot->state;
	struct flow_ref ref;
	__u8 reason = p->event_reason;

	if (p->event_type == FLOW_EVENT_CLOSING) {
		if (snd->conn_state == CONN_OPEN)
			send_flow_event(p, true, packet_time(p),
					FLOW_EVENT_CLOSING, reason);
		snd->conn_state = CONN_CLOSED;
		if (reason == EVENT_REASON_RST) {
			if (orig->conn_state == CONN_OPEN)
				send_flow_event(p, false, packet_time(p),
						FLOW_EVENT_CLOSING, reason);
			orig->conn_state = CONN_CLOSED;
		}
	} else if (!p->reply_valid || orig->conn_state != CONN_CLOSED) {
		return;
	} else {
		reason = EVENT_REASON_FIN; /* the close it waited for */
	}
	if (dir_active(snd) || dir_active(orig))
		return;
	if (reason != EVENT_REASON_RST &&
	    (awaits_acks(snd) || awaits_acks(orig)))
		return;
	/* By the key's tag: if the slot changed hands since the lookup, the
	 * swap fails and the other flow stays. */
	flow_locate(key, &ref);
	if (!flow_take(slot, ref.tag))
		return;
	summary_emit(key, fs, packet_time(p), reason);
	flow_free(slot);
	count(COUNTER_FLOWS_DELETED);
}

/* In auto mode a segment without the timestamp option takes the sequence
 * source; in a flow measured by timestamps that can only be a RST (RFC
 * 7323, 3.2), which ePPing's rule does not track: it neither counts nor
 * closes there, as in ePPing. */
static __always_inline bool is_ts_flow_rst(const struct packet_info *p,
					   const struct flow_state *fs)
{
	int i;

	if (!cfg_track_tcp || cfg_tcp_mode != TCP_MODE_AUTO ||
	    p->event_reason != EVENT_REASON_RST || p->tcp_ts)
		return false;
	for (i = 0; i < 2; i++) {
		if (fs->dir[i].conn_state != CONN_EMPTY &&
		    fs->dir[i].last_source == RTT_SOURCE_TCP_TS)
			return true;
	}
	return false;
}

/* The whole frame's length: skb->len may exceed the linear data; XDP
 * sees its first buffer (the replay's frame alone, once trimmed). Read
 * here rather than kept in the parsing context: see replay_last. */
static __always_inline __u32 frame_len(void *ctx, struct parsing_context *pctx)
{
	if (pctx->is_xdp)
		return pctx->data_end - pctx->data;
	return ((struct __sk_buff *)ctx)->len;
}

#include "fastpath.h"

/* The general path: every packet the fast path did not take, from its
 * L3 header at l3 (parse_l2's EtherType proto). */
static __always_inline void handle_general(void *ctx,
					   struct parsing_context *pctx,
					   bool is_egress, __u64 now,
					   __u16 proto, void *l3)
{
	struct packet_info p = {};
	struct network_tuple key TUPLE_ALIGNED;
	struct flow_dir_state *snd, *orig;
	struct flow_slot *slot;
	struct flow_state *fs;
	__u32 side, self;
	int ret;

	count(COUNTER_PACKETS);
	p.time = now;
	p.is_egress = is_egress;
	p.ifindex = pctx->ifindex;
	ret = parse_packet(pctx, proto, l3, &p);
	/* Tracked packets are counted once their flow is known. */
	if (cfg_aggregate && cfg_steps >= STEP_EVENTS && ret < 0)
		agg_count(&p, frame_len(ctx, pctx));
	if (ret < 0 || cfg_steps < STEP_FLOW)
		return;

	side = canonical_tuple(&p.pid.flow, &key);
	self = side & SIDE_SELF;
	side &= SIDE_MASK;
	slot = get_flow(&p, &key, side);
	if (cfg_aggregate && cfg_steps >= STEP_EVENTS)
		agg_count_tracked(&p, frame_len(ctx, pctx),
				  slot ? &slot->state.dir[side].u.agg : NULL);
	if (!slot) {
		if (cfg_track_dns)
			dns_without_flow(&p);
		return;
	}
	fs = &slot->state;
	if (is_ts_flow_rst(&p, fs))
		return;

	/* Races between CPUs on the same flow can lose a counter update or
	 * an srtt step; the timestamp map itself stays exact. */
	snd = &fs->dir[side];
	orig = self ? snd : &fs->dir[side ^ 1];
	if (snd->conn_state == CONN_EMPTY && p.pid_valid)
		activate_dir(&p, snd, orig);
	snd->sent_pkts++;
	snd->sent_bytes += p.payload;
	if (cfg_steps >= STEP_TIMESTAMP) {
		if (tcp_seq_used() && p.seg.kind == SRC_INFO_TCP_SEG)
			tcp_seq_on_flow(&p, fs, snd, side,
					self ? side : side ^ 1);
		if (cfg_track_dns && p.dns.kind == SRC_INFO_DNS)
			dns_on_flow(&p, snd);
		if (cfg_track_quic && p.quic.kind == SRC_INFO_QUIC &&
		    quic_spin_on_flow(&p, &fs->spin[side], &snd->spin_cand))
			record_quic_sample(&p, &key, snd, orig, side);
		timestamp_packet(ctx, &p, snd);
		answer_dir(&p, orig);
		match_packet(&p, &key, orig, snd, self ? side : side ^ 1);
	}
	/* Live, only packets that needed the clock refresh it: each new
	 * identifier does, so an active flow's last_seen lags by at most one
	 * tick of its timestamp clock, nothing next to the flow timeouts. */
	if (p.time)
		snd->last_seen = p.time;
	if (cfg_steps >= STEP_TIMESTAMP)
		close_flow(&p, &key, slot, snd, orig);
}

/* One packet: a fast path (fastpath.h: the common TCP segment, or an
 * untracked IPv4 or IPv6 packet) when fast and it takes it, else the general
 * path. The batched replay runs without them (fast false): its call chain
 * is at 6.1's 512-byte stack limit (replay_last), and the fast path's
 * spills would take it over; the live programs and the one-packet replay
 * have them. */
static __always_inline void handle_packet(void *ctx,
					  struct parsing_context *pctx,
					  bool is_egress, __u64 now, bool fast)
{
	void *l3 = pctx->data;
	__u16 proto;

	proto = parse_l2(pctx, &l3);
	if (fast && fast_paths_on()) {
		if (proto == ETH_P_IP &&
		    ((tcp_fast_path_on() && fast_path(pctx, l3, now)) ||
		     fast_untracked_v4(pctx, l3)))
			return;
		if (proto == ETH_P_IPV6 && fast_untracked_v6(pctx, l3))
			return;
	}
	handle_general(ctx, pctx, is_egress, now, proto, l3);
}

static __always_inline bool is_l3_iface(__u32 ifindex)
{
	return bpf_map_lookup_elem(&l3_ifaces, &ifindex) != NULL;
}

static __always_inline void handle_tc(struct __sk_buff *skb, bool is_egress)
{
	struct parsing_context pctx = {
		.ctx = skb,
		.data = (void *)(long)skb->data,
		.data_end = (void *)(long)skb->data_end,
		.ifindex = skb->ifindex,
		.l3_proto = bpf_ntohs(skb->protocol),
	};
	__u64 now = 0; /* live: read when needed (packet_time) */

	if (cfg_have_l3_ifaces)
		pctx.l3_only = is_l3_iface(skb->ifindex);
	if (cfg_replay) {
		/* BPF_PROG_TEST_RUN hands the capture time in tstamp. */
		now = skb->tstamp;
		replay_now = now;
	}
	handle_packet(skb, &pctx, is_egress, now, true);
}

SEC("tc")
int rttscope_tc_egress(struct __sk_buff *skb)
{
	handle_tc(skb, true);
	return TC_NEXT;
}

SEC("tc")
int rttscope_tc_ingress(struct __sk_buff *skb)
{
	handle_tc(skb, false);
	return TC_NEXT;
}

SEC("xdp")
int rttscope_xdp_ingress(struct xdp_md *ctx)
{
	struct parsing_context pctx = {
		.ctx = ctx,
		.is_xdp = true,
		.data = (void *)(long)ctx->data,
		.data_end = (void *)(long)ctx->data_end,
		.ifindex = ctx->ingress_ifindex,
	};
	__u8 *first = pctx.data;

	__u8 version;

	if (cfg_have_l3_ifaces && is_l3_iface(ctx->ingress_ifindex)) {
		/* No EtherType without L2: take the IP version nibble. */
		pctx.l3_only = true;
		if ((void *)(first + 1) > pctx.data_end)
			return XDP_PASS;
		version = *first >> 4;
		pctx.l3_proto = version == 4 ? ETH_P_IP :
				version == 6 ? ETH_P_IPV6 :
					       0;
	}
	/* Live the clock is read when needed (packet_time); the BPF unit
	 * tests also run this program with the replay objects, where it
	 * keeps taking its time from the clock. */
	handle_packet(ctx, &pctx, false, cfg_replay ? bpf_ktime_get_ns() : 0,
		      true);
	return XDP_PASS;
}

/* Replay entry: BPF_PROG_TEST_RUN of an XDP program costs less per call
 * than of a tc program (no skb to build), which is most of replay's time.
 * The capture time and the direction of the packet come in the XDP
 * metadata area in front of the frame; parsing and logic are the live
 * ones. */
struct replay_meta {
	__u64 tstamp;
	__u32 egress;
	__u32 reserved;
};

SEC("xdp")
int rttscope_xdp_replay(struct xdp_md *ctx)
{
	struct parsing_context pctx = {
		.ctx = ctx,
		.is_xdp = true,
		.data = (void *)(long)ctx->data,
		.data_end = (void *)(long)ctx->data_end,
	};
	struct replay_meta *m = (void *)(long)ctx->data_meta;

	if (!cfg_replay || (void *)(m + 1) > pctx.data)
		return XDP_PASS;
	replay_now = m->tstamp;
	handle_packet(ctx, &pctx, m->egress != 0, m->tstamp, true);
	return XDP_PASS;
}

/* Batched replay: many packets per BPF_PROG_TEST_RUN call, which spreads
 * the call's fixed cost. The buffer holds REPLAY_PAD bytes of padding, then
 * records of [frame][replay_trailer], the packet to run first LAST. Each
 * call of replay_last() trims the buffer with bpf_xdp_adjust_tail/head so
 * that the packet's frame is exactly the XDP packet, runs it, and removes
 * it: the programs see the same bounds as for a packet on its own. */
/* REPLAY_PAD keeps adjust_tail above ETH_HLEN; REPLAY_MAX_BUF bounds
 * offsets for the verifier (user space sends at most 3072 bytes). */
#define REPLAY_PAD	 16
#define REPLAY_BATCH_MAX 64
#define REPLAY_MAX_BUF	 8192

struct replay_trailer {
	__u64 tstamp;
	__u16 len; /* frame bytes before the trailer */
	__u8 egress;
	__u8 reserved[5];
};

/* Runs and removes the last record. Returns 0 when it ran one, 1 when only
 * the padding is left, -1 for a malformed buffer. A global function: the
 * verifier checks it once, not once per loop iteration. */
__noinline int replay_last(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct parsing_context pctx = {.ctx = ctx, .is_xdp = true};
	struct replay_trailer *tr;
	__u32 size = end - data, off, len;
	__u64 tstamp;
	bool egress;

	if (size <= REPLAY_PAD + sizeof(*tr))
		return 1;
	off = size - sizeof(*tr);
	if (off > REPLAY_MAX_BUF)
		return -1;
	tr = data + off;
	if ((void *)(tr + 1) > end)
		return -1;
	/* Scalars, not a stack copy of the trailer: this frame, with
	 * handle_packet's, and the deepest global function it calls must fit
	 * older verifiers' 512-byte limit for the whole call chain (6.1). */
	tstamp = tr->tstamp;
	len = tr->len;
	egress = tr->egress != 0;
	if (len < ETH_HLEN_BYTES || len > off - REPLAY_PAD)
		return -1;
	off -= len; /* start of the frame */
	if (bpf_xdp_adjust_tail(ctx, -(int)sizeof(*tr)) ||
	    bpf_xdp_adjust_head(ctx, off))
		return -1;

	pctx.data = (void *)(long)ctx->data;
	pctx.data_end = (void *)(long)ctx->data_end;
	replay_now = tstamp;
	handle_packet(ctx, &pctx, egress, tstamp, false);

	if (bpf_xdp_adjust_head(ctx, -(int)off) ||
	    bpf_xdp_adjust_tail(ctx, -(int)len))
		return -1;
	return 0;
}

/* Returns XDP_PASS when every record ran, XDP_ABORTED when the buffer was
 * malformed (user space treats that as an error). */
SEC("xdp")
int rttscope_xdp_replay_batch(struct xdp_md *ctx)
{
	int i, ret;

	if (!cfg_replay)
		return XDP_PASS;
	for (i = 0; i < REPLAY_BATCH_MAX; i++) {
		ret = replay_last(ctx);
		if (ret < 0)
			return XDP_ABORTED;
		if (ret > 0)
			break;
	}
	return XDP_PASS;
}

#include "agg_fold.h"
#include "cleanup.h"
