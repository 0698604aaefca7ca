/* SPDX-License-Identifier: GPL-2.0 */
/* The fast path: the common TCP segment, handled in a fraction of the
 * general path's instructions, with the same results.
 *
 * Nearly every packet of a busy router's TCP traffic is a segment of an
 * IPv4 flow that already exists, with the timestamp option in the layout
 * Linux sends (tcp_ts_first), no SYN, FIN or RST, whose TSval was seen
 * already or is turned away by the rate limit, and whose TSecr echoes no
 * timestamp still pending. Such a packet changes nothing but the sender
 * direction's counters, its newest identifier and echo, its last_seen (and
 * the prefix counters in aggregated mode). The general path still builds a
 * 96-byte packet_info, v4-mapped addresses, a canonical 44-byte tuple and
 * walks every step's checks for it; code and work that the program waits
 * for on every packet (docs/performance.md, Round 12).
 *
 * The contract: fast_path() decides from reads only whether the packet is
 * such a segment. If it is not, it writes nothing (but the key, which the
 * general path builds anew) and returns false, and the general path takes
 * the packet from the start. If it is, it makes exactly the general path's
 * writes for it and returns true. Every decision is the general path's
 * own helper (is_new_id, is_rate_limited, echo_may_match, dir_active);
 * the replay tests run every scenario with the fast path on and off and
 * compare every record (internal/replay, TestFastPathSameOutput).
 *
 * Included by rttscope.c after the general path's helpers. */
#ifndef RTTSCOPE_FASTPATH_H
#define RTTSCOPE_FASTPATH_H

/* What the fast path reads of a segment. */
struct fast_seg {
	__be32 saddr, daddr;
	__be16 sport, dport;
	__u32 tsval, tsecr;
	__u32 l3_len; /* IP header + payload */
	__u32 payload; /* bytes after the TCP header */
	__u32 l2_len;
	__u8 tos;
	bool ack;
};

/* A load-time constant: the configurations whose TCP segments take the
 * general path's way through parse_tcp_identifier() that fast_parse()
 * assumes (timestamps, no handshake or DNS source reading the segment),
 * and the whole program (the step variants measure the general path). */
static __always_inline bool fast_path_on(void)
{
	return cfg_fast_path && cfg_steps >= STEP_COUNTERS && cfg_track_tcp &&
	       cfg_tcp_mode != TCP_MODE_SEQ && !cfg_track_tcp_handshake &&
	       !cfg_track_dns;
}

/* Parses an IPv4 TCP segment with the usual timestamp option and none of
 * SYN, FIN, RST; false for anything else. The checks are parse_ipv4's and
 * parse_tcp_identifier's for such a segment. */
static __always_inline bool fast_parse(struct parsing_context *pctx,
				       struct fast_seg *f)
{
	void *pos = pctx->data;
	struct tcp_ts_opt ts;
	struct tcphdr *tcph;
	struct iphdr *iph;
	__u32 iphlen, hdrlen;

	if (parse_l2(pctx, &pos) != ETH_P_IP)
		return false;
	iph = pos;
	if ((void *)(iph + 1) > pctx->data_end)
		return false;
	if (iph->version != 4 || iph->protocol != IPPROTO_TCP ||
	    (iph->frag_off & bpf_htons(0x1fff)))
		return false;
	iphlen = iph->ihl * 4;
	if (iphlen < sizeof(*iph))
		return false;
	tcph = pos + iphlen;
	if ((void *)(tcph + 1) > pctx->data_end)
		return false;
	if (tcph->syn || tcph->fin || tcph->rst)
		return false;
	hdrlen = tcph->doff * 4;
	if (tcp_ts_first(tcph, hdrlen, pctx->data_end, &ts))
		return false;
	/* set_payload()'s check: also a BIG TCP packet's total length 0. */
	f->l3_len = bpf_ntohs(iph->tot_len);
	if (f->l3_len < iphlen + hdrlen)
		return false;
	f->payload = f->l3_len - iphlen - hdrlen;
	f->l2_len = pos - pctx->data;
	f->saddr = iph->saddr;
	f->daddr = iph->daddr;
	f->tos = iph->tos;
	f->sport = tcph->source;
	f->dport = tcph->dest;
	f->tsval = ts.tsval;
	f->tsecr = ts.tsecr;
	f->ack = tcph->ack;
	return true;
}

static __always_inline void fast_endpoint(struct flow_address *e, __be32 addr,
					  __be16 port)
{
	map_ipv4(&e->ip, addr);
	e->port = port;
	e->reserved = 0;
}

/* Writes the flow key canonical_tuple() makes of the segment's tuple and
 * returns the sender's side; SIDE_SELF for a flow to itself, which the
 * fast path leaves to the general path. The v4-mapped addresses differ in
 * their last word only, so endpoint_lt() is that word, then the port. */
static __always_inline __u32 fast_key(const struct fast_seg *f,
				      struct network_tuple *key)
{
	__u32 s = bpf_ntohl(f->saddr), d = bpf_ntohl(f->daddr);
	__u16 sp = bpf_ntohs(f->sport), dp = bpf_ntohs(f->dport);
	bool rev = d < s || (d == s && dp < sp);

	if (s == d && sp == dp)
		return SIDE_SELF;
	fast_endpoint(&key->saddr, rev ? f->daddr : f->saddr,
		      rev ? f->dport : f->sport);
	fast_endpoint(&key->daddr, rev ? f->saddr : f->daddr,
		      rev ? f->sport : f->dport);
	key->proto = IPPROTO_TCP;
	key->ipv = AF_INET;
	key->reserved = 0;
	return rev ? 1 : 0;
}

/* In aggregated mode, a tracked packet counts in the prefix slots its
 * direction names (agg_count_tracked); the fast path only when both
 * still do. */
static __always_inline bool fast_agg_slots(const struct flow_dir_state *snd,
					   struct agg_slot **src,
					   struct agg_slot **dst)
{
	__u32 epoch = READ_ONCE(agg_epoch);

	*src = agg_ref_slot(snd->u.agg_ref[0], epoch);
	*dst = agg_ref_slot(snd->u.agg_ref[1], epoch);
	return *src && *dst;
}

/* handle_packet()'s work for the common segment (see the top of this
 * file): true when it took the packet, false, with nothing written, when
 * the general path must. now is handle_packet's (0 live: the clock is read
 * when needed). */
static __always_inline bool fast_path(struct parsing_context *pctx, __u64 now,
				      struct network_tuple *key)
{
	struct agg_slot *src = NULL, *dst = NULL;
	struct flow_dir_state *snd, *orig;
	bool pid_valid, stamp = false, newest_echo = false;
	struct flow_slot *slot;
	struct fast_seg f;
	struct agg_pkt a;
	__u64 time = now;
	__u32 side;

	if (!fast_parse(pctx, &f))
		return false;
	side = fast_key(&f, key);
	if (side == SIDE_SELF)
		return false;
	slot = flow_lookup(key);
	if (!slot)
		return false; /* get_flow() may create it */
	snd = &slot->state.dir[side];
	orig = &slot->state.dir[side ^ 1];

	/* timestamp_packet(), where it ends without a timestamp; only
	 * segments with payload carry an identifier (pid_valid). */
	pid_valid = f.payload > 0;
	if (snd->conn_state == CONN_EMPTY && pid_valid)
		return false; /* activate_dir() */
	if (pid_valid && dir_active(snd)) {
		/* !cfg_sample_first_tsval: wait_first_edge() of a segment
		 * without SYN. */
		if (is_new_id(f.tsval, RTT_SOURCE_TCP_TS, snd) ||
		    !(snd->ts_attempted || !cfg_sample_first_tsval)) {
			if (!snd->ts_attempted)
				return false; /* the first timestamp */
			if (!cfg_replay && !time)
				time = bpf_ktime_get_ns();
			if (!is_rate_limited(time, snd))
				return false; /* a timestamp */
			stamp = true;
		}
	}
	/* answer_dir(): a waiting direction opens. */
	if (orig->conn_state == CONN_WAITOPEN)
		return false;
	if (f.ack) {
		/* match_packet() past may_match() and its ACK filter. */
		if (dir_active(orig) &&
		    echo_may_match(f.tsecr, RTT_SOURCE_TCP_TS, orig, snd,
				   &newest_echo))
			return false;
		/* close_flow(): an ACK to a closed direction. */
		if (orig->conn_state == CONN_CLOSED)
			return false;
	}
	if (cfg_aggregate && !fast_agg_slots(snd, &src, &dst))
		return false; /* agg_count_slow() */

	/* Taken: the general path's writes for this packet. */
	count(COUNTER_FAST_PATH);
	if (cfg_aggregate && src && dst) {
		agg_count_global_ip(IPPROTO_TCP, f.l2_len + f.l3_len, f.tos);
		agg_pkt_set(&a, IPPROTO_TCP, true, f.tos, f.l3_len,
			    f.l2_len + f.l3_len);
		count_traffic(&src->rx, &a);
		count_traffic(&dst->tx, &a);
	}
	snd->sent_pkts++;
	snd->sent_bytes += f.payload;
	if (stamp) {
		snd->last_id = f.tsval;
		snd->last_source = RTT_SOURCE_TCP_TS;
	}
	if (newest_echo)
		snd->echoed = f.tsecr;
	if (time)
		snd->last_seen = time;
	return true;
}

#endif /* RTTSCOPE_FASTPATH_H */
