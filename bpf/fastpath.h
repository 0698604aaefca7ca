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
 * the prefix counters in aggregated mode, or its flow's count of them for
 * the prefixes: agg_fold.h). The general path still builds a
 * 96-byte packet_info, v4-mapped addresses, a canonical 44-byte tuple and
 * walks every step's checks for it; code and work that the program waits
 * for on every packet (docs/performance.md, Round 12).
 *
 * The contract: fast_path() decides from reads only whether the packet is
 * such a segment. If it is not, it writes nothing and returns false, and
 * the general path takes the packet from the start. If it is, it makes
 * exactly the general path's writes for it and returns true. Every
 * decision is the general path's own helper (is_new_id, is_rate_limited,
 * echo_may_match, dir_active) or, for the prefix slots, the general path's
 * slot index and key compare on words made in registers (agg_slot_of_v4);
 * the replay tests run a mix of
 * flows in eight configurations with the fast path on and off and compare
 * every record (internal/replay, TestFastPathSameOutput).
 *
 * A second, shorter fast path takes the IPv4 and IPv6 packets no RTT
 * source reads (fast_untracked_v4/_v6, at the end of this file; IPv6
 * without extension headers): the datagrams of a UDP flood, QUIC and DNS
 * when their sources are off, ICMP without -C, other protocols. The
 * general path builds the same packet_info for them only to count them
 * (and in aggregated mode, their prefixes).
 *
 * Included by rttscope.c after the general path's helpers. */
#ifndef RTTSCOPE_FASTPATH_H
#define RTTSCOPE_FASTPATH_H

/* The TCP header's flags byte and its bits (RFC 9293, 3.1). */
#define TCP_FLAGS_BYTE	 13
#define TCP_FLAG_BIT_FIN 0x01
#define TCP_FLAG_BIT_SYN 0x02
#define TCP_FLAG_BIT_RST 0x04
#define TCP_FLAG_BIT_ACK 0x10

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

/* A load-time constant: whether the fast paths may run at all (not with
 * loader.Config.GeneralPathOnly, and only in the whole program: the step
 * variants measure the general path). */
static __always_inline bool fast_paths_on(void)
{
	return cfg_fast_path && cfg_steps >= STEP_COUNTERS;
}

/* A load-time constant, with fast_paths_on(): the configurations whose TCP
 * segments take the general path's way through parse_tcp_identifier()
 * that fast_parse() assumes (timestamps, no handshake or DNS source
 * reading the segment). */
static __always_inline bool tcp_fast_path_on(void)
{
	return cfg_track_tcp && cfg_tcp_mode != TCP_MODE_SEQ &&
	       !cfg_track_tcp_handshake && !cfg_track_dns;
}

/* Parses an IPv4 TCP segment (its IP header at l3, after parse_l2) with
 * the usual timestamp option and none of SYN, FIN, RST; false for
 * anything else. The checks are parse_ipv4's and parse_tcp_identifier's
 * for such a segment. */
static __always_inline bool fast_parse(struct parsing_context *pctx, void *l3,
				       struct fast_seg *f)
{
	struct iphdr *iph = l3;
	struct tcp_ts_opt ts;
	struct tcphdr *tcph;
	__u32 iphlen, hdrlen;
	__u8 flags;

	if ((void *)(iph + 1) > pctx->data_end)
		return false;
	if (iph->version != 4 || iph->protocol != IPPROTO_TCP ||
	    (iph->frag_off & bpf_htons(0x1fff)))
		return false;
	iphlen = iph->ihl * 4;
	if (iphlen < sizeof(*iph))
		return false;
	tcph = l3 + iphlen;
	if ((void *)(tcph + 1) > pctx->data_end)
		return false;
	/* The flags byte read once (the bitfields would be three loads). */
	flags = ((__u8 *)tcph)[TCP_FLAGS_BYTE];
	if (flags & (TCP_FLAG_BIT_FIN | TCP_FLAG_BIT_SYN | TCP_FLAG_BIT_RST))
		return false;
	hdrlen = tcph->doff * 4;
	if (tcp_ts_first(tcph, hdrlen, pctx->data_end, &ts))
		return false;
	/* set_payload()'s check: also a BIG TCP packet's total length 0. */
	f->l3_len = bpf_ntohs(iph->tot_len);
	if (f->l3_len < iphlen + hdrlen)
		return false;
	f->payload = f->l3_len - iphlen - hdrlen;
	f->l2_len = l3 - pctx->data;
	f->saddr = iph->saddr;
	f->daddr = iph->daddr;
	f->tos = iph->tos;
	f->sport = tcph->source;
	f->dport = tcph->dest;
	f->tsval = ts.tsval;
	f->tsecr = ts.tsecr;
	f->ack = flags & TCP_FLAG_BIT_ACK;
	return true;
}

/* The words of the flow key (struct tuple_words) that canonical_tuple()
 * makes of the segment's tuple, built from its fields: each address
 * v4-mapped (::ffff:a.b.c.d, map_ipv4), ports and addresses as they lie
 * in the packet, proto IPPROTO_TCP, ipv AF_INET, the reserved fields 0.
 * Returns the sender's side; SIDE_SELF for a flow to itself, which the
 * fast path leaves to the general path. The v4-mapped addresses differ in
 * their last word only, so endpoint_lt() is that word, then the port. */
static __always_inline __u32 fast_key(const struct fast_seg *f,
				      struct tuple_words *tw)
{
	__u32 s = bpf_ntohl(f->saddr), d = bpf_ntohl(f->daddr);
	__u16 sp = bpf_ntohs(f->sport), dp = bpf_ntohs(f->dport);
	bool rev = d < s || (d == s && dp < sp);
	__u64 mapped = (__u32)bpf_htonl(0xffff); /* bytes 8-11 of an address */

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fast_key() builds the words of a little-endian target (bpfel)"
#endif
	_Static_assert(
		__builtin_offsetof(struct network_tuple, saddr.port) == 16 &&
			__builtin_offsetof(struct network_tuple, daddr.ip) ==
				20 &&
			__builtin_offsetof(struct network_tuple, daddr.port) ==
				36 &&
			__builtin_offsetof(struct network_tuple, proto) == 40 &&
			__builtin_offsetof(struct network_tuple, ipv) == 42,
		"the words fast_key() builds");
	if (s == d && sp == dp)
		return SIDE_SELF;
	/* bytes 0-7: saddr's zeros; 8-15: ::ffff and saddr's address;
	 * 16-23: its port, reserved, daddr's first zeros; 24-31: daddr's
	 * zeros and ::ffff; 32-39: its address and port; 40-43: proto,
	 * ipv, reserved. */
	tw->w[0] = 0;
	tw->w[1] = mapped | (__u64)(rev ? f->daddr : f->saddr) << 32;
	tw->w[2] = rev ? f->dport : f->sport;
	tw->w[3] = mapped << 32;
	tw->w[4] = (rev ? f->saddr : f->daddr) |
		   (__u64)(rev ? f->sport : f->dport) << 32;
	tw->last = IPPROTO_TCP | AF_INET << 16;
	return rev ? 1 : 0;
}

/* In aggregated mode, a tracked packet counts in this CPU's slots of its
 * source's and destination's prefixes when they hold them
 * (agg_count_tracked, agg_count_end); the fast path only when both do. It
 * finds them by the prefixes' keys (agg_slot_of_v4), not by the
 * references the general path keeps in the flow: those name one CPU's
 * slots. The addresses are read again from the header (iph, checked by
 * fast_parse): kept in registers across the flow lookup they were spilled,
 * 16 bytes more on the stack, and rttscope_xdp_replay's call chain passed
 * the 512 bytes Debian's 6.1 verifier allows. */
static __always_inline bool fast_agg_slots(const struct iphdr *iph,
					   struct agg_slot **src,
					   struct agg_slot **dst)
{
	__u32 epoch = READ_ONCE(agg_epoch);

	*src = agg_slot_of_v4(iph->saddr, epoch);
	*dst = agg_slot_of_v4(iph->daddr, epoch);
	return *src && *dst;
}

/* The fast path counts its packets in the sender direction's sent_pkts,
 * above the packet count (flow.h, dir_pkts), and adds them to
 * COUNTER_FAST_PATH FAST_COUNT_BATCH at a time, when the flow goes
 * (flow_flush_fast), or user space does for the flows still there when it
 * writes an exact stats record (loader, StatsExact). On sparse traffic
 * every line a packet touches is a miss, and the per-CPU counter's was the
 * one line of an ACK's way that is neither the packet nor its flow
 * (without it the steps lab's ingress took x0.88-0.91 of the time,
 * docs/performance.md, Round 15); sent_pkts is written by every packet
 * anyway. Two CPUs with packets of one direction at once race on the word
 * as they always did on sent_pkts. */
#define FAST_COUNT_BATCH 16

static __always_inline void fast_count(struct flow_dir_state *snd)
{
	__u64 v = snd->sent_pkts + 1 + (1ULL << SENT_PKTS_BITS);

	if (v >= (__u64)FAST_COUNT_BATCH << SENT_PKTS_BITS) {
		count_add(COUNTER_FAST_PATH, v >> SENT_PKTS_BITS);
		v &= SENT_PKTS_MASK;
	}
	snd->sent_pkts = v;
}

/* handle_packet()'s work for the common segment (see the top of this
 * file): true when it took the packet, false, with nothing written, when
 * the general path must. now is handle_packet's (0 live: the clock is read
 * when needed); l3 is the IPv4 header. */
static __always_inline bool fast_path(struct parsing_context *pctx, void *l3,
				      __u64 now)
{
	struct tuple_words key;
	struct agg_slot *src = NULL, *dst = NULL;
	struct flow_dir_state *snd, *orig;
	bool pid_valid, stamp = false, newest_echo = false, fold = false;
	struct flow_slot *slot;
	struct fast_seg f;
	struct agg_pkt a;
	__u64 time = now;
	__u32 side;

	if (!fast_parse(pctx, l3, &f))
		return false;
	side = fast_key(&f, &key);
	if (side == SIDE_SELF)
		return false;
	slot = flow_lookup_words(&key);
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
	/* Aggregated mode: counted in the flow (agg_fold.h) once a packet of
	 * this side has made sure of its prefixes' entries in this interval
	 * (AGG_FOLD_READY), if it is of the kind the pair counts; the epoch
	 * read here is the one the grace period after a flip waits for. Else
	 * in the prefix slots. */
	if (cfg_agg_fold && f.l2_len <= AGG_FOLD_L2_MAX) {
		struct agg_fold *c = &snd->u.agg.fold[READ_ONCE(agg_epoch) & 1];
		__u64 kind = AGG_FOLD_READY | agg_fold_kind(f.l2_len, f.tos);
		__u64 n = c->pkts;

		if (!(n & AGG_FOLD_READY))
			return false; /* agg_count_tracked() */
		/* The pair's kind, or none yet: the pair is empty. Counted
		 * here, not with the writes below: nothing below turns a
		 * folded packet away, and the two words kept live to there
		 * took 40 bytes more of the stack (6.1 allows 512). */
		if (n == AGG_FOLD_READY || (n & ~AGG_FOLD_COUNT_MASK) == kind) {
			c->pkts = (n | kind) + 1;
			c->l3_bytes += f.l3_len;
			fold = true;
		}
	}
	if (cfg_aggregate && !fold && !fast_agg_slots(l3, &src, &dst))
		return false; /* agg_count_end() fills or counts elsewhere */

	/* Taken: the general path's writes for this packet. */
	if (!fold && cfg_aggregate && src && dst) {
		agg_count_global_ip(IPPROTO_TCP, f.l2_len + f.l3_len, f.tos);
		agg_pkt_set(&a, IPPROTO_TCP, true, f.tos, f.l3_len,
			    f.l2_len + f.l3_len);
		count_traffic(&src->rx, &a);
		count_traffic(&dst->tx, &a);
	}
	fast_count(snd); /* sent_pkts++ */
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

/* Whether parse_packet() leaves an IPv4 packet of protocol proto, once
 * its IP header is read, to no RTT source (it returns -1 with l3_valid
 * set). TCP is left to the general path whatever the configuration. */
static __always_inline bool untracked_v4_proto(__u8 proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return false;
	case IPPROTO_UDP:
		return !cfg_track_dns && !cfg_track_quic;
	case IPPROTO_ICMP:
		return !cfg_track_icmp;
	}
	return true; /* ICMPv6 in IPv4 included: parse_packet() wants IPv6 */
}

/* The same for an IPv6 packet whose header names nexthdr. An extension
 * header is left to the general path, which walks the chain (and turns a
 * later fragment away). */
static __always_inline bool untracked_v6_proto(__u8 nexthdr)
{
	if (is_ipv6_ext(nexthdr))
		return false;
	switch (nexthdr) {
	case IPPROTO_TCP:
		return false;
	case IPPROTO_UDP:
		return !cfg_track_dns && !cfg_track_quic;
	case IPPROTO_ICMPV6:
		return !cfg_track_icmp;
	}
	return true; /* ICMP in IPv6 included: parse_packet() wants IPv4 */
}

/* The untracked fast path, under the same contract as fast_path(): true
 * when it took an IPv4 packet (l3, after parse_l2) that the general path
 * would only count, and made exactly its writes (the packets counter, and
 * in aggregated mode agg_count()'s); false, with nothing written, for
 * anything else. The header checks are parse_ipv4()'s: a later fragment
 * or a truncated header is the general path's (counted as not IP in
 * aggregated mode). The packet is counted in COUNTER_FAST_PATH, whose sum
 * with COUNTER_PACKETS is the stats record's packets. */
static __always_inline bool fast_untracked_v4(struct parsing_context *pctx,
					      void *l3)
{
	struct iphdr *iph = l3;
	__u32 hdrlen;

	if ((void *)(iph + 1) > pctx->data_end)
		return false;
	if (iph->version != 4 || (iph->frag_off & bpf_htons(0x1fff)))
		return false;
	hdrlen = iph->ihl * 4;
	if (hdrlen < sizeof(*iph) || l3 + hdrlen > pctx->data_end)
		return false;
	if (!untracked_v4_proto(iph->protocol))
		return false;
	count(COUNTER_FAST_PATH);
	if (cfg_aggregate)
		agg_count_untracked_v4(iph, l3 - pctx->data);
	return true;
}

/* fast_untracked_v4() for IPv6: a packet whose fixed header is complete
 * and whose next header is an untracked transport (untracked_v6_proto).
 * parse_ipv6() needs nothing more of it. */
static __always_inline bool fast_untracked_v6(struct parsing_context *pctx,
					      void *l3)
{
	struct ipv6hdr *ip6h = l3;

	if ((void *)(ip6h + 1) > pctx->data_end)
		return false;
	if (ip6h->version != 6 || !untracked_v6_proto(ip6h->nexthdr))
		return false;
	count(COUNTER_FAST_PATH);
	if (cfg_aggregate)
		agg_count_untracked_v6(ip6h, l3 - pctx->data);
	return true;
}

#endif /* RTTSCOPE_FASTPATH_H */
