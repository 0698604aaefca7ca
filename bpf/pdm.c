// SPDX-License-Identifier: GPL-2.0
/* rttscope pdm: RFC 8250 Performance and Diagnostic Metrics for IPv6. The
 * egress program inserts a 16-byte Destination Options header carrying the
 * PDM option into TCP, UDP and ICMPv6 echo packets; the ingress program
 * parses PDM options, records the reception time and PSN per 5-tuple and
 * reports what the peer measured. With pdm_cfg.passive both programs only
 * decode what they see. Both always pass the packet on (TC_NEXT): a packet
 * the egress program cannot extend leaves unchanged and counted. */
#include "common.h"
#include "pdm.h"
#include "pdm_encode.h"

char LICENSE[] SEC("license") = "GPL";

#define L3_OFF	     ETH_HLEN_BYTES
#define L4_OFF	     (L3_OFF + sizeof(struct ipv6hdr))
#define IPV6_MIN_MTU 1280

/* The PDM option as on the wire (network byte order). */
struct pdm_opt {
	__u8 type;
	__u8 len;
	__u8 scale_dtlr;
	__u8 scale_dtls;
	__be16 psntp;
	__be16 psnlr;
	__be16 dtlr;
	__be16 dtls;
};

/* The Destination Options header the egress program inserts. */
struct pdm_dohdr {
	__u8 nexthdr;
	__u8 hdrlen; /* 8-byte units after the first 8: 1 */
	struct pdm_opt opt;
	__u8 padn_type; /* PadN with no data: the header ends on 16 bytes */
	__u8 padn_len;
};

_Static_assert(sizeof(struct pdm_dohdr) == PDM_HDR_LEN, "PDM DO header");

/* skb->data and skb->data_end, each loaded straight from the context:
 * written in C, clang may compute ctx + offset once and load through the
 * modified pointer, which the verifier refuses ("dereference of modified
 * ctx ptr"). */
static __always_inline void *skb_data(struct __sk_buff *skb)
{
	void *p;

	asm volatile("%0 = *(u32 *)(%1 + %2)"
		     : "=r"(p)
		     : "r"(skb),
		       "i"(__builtin_offsetof(struct __sk_buff, data)));
	return p;
}

static __always_inline void *skb_data_end(struct __sk_buff *skb)
{
	void *p;

	asm volatile("%0 = *(u32 *)(%1 + %2)"
		     : "=r"(p)
		     : "r"(skb),
		       "i"(__builtin_offsetof(struct __sk_buff, data_end)));
	return p;
}

static __always_inline __u64 pdm_now(struct __sk_buff *skb)
{
	if (pdm_cfg.tstamp_clock)
		return skb->tstamp;
	return bpf_ktime_get_ns();
}

static __always_inline bool is_ext_hdr(__u8 nh)
{
	switch (nh) {
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_FRAGMENT:
	case IPPROTO_ESP:
	case IPPROTO_AH:
	case IPPROTO_DSTOPTS:
	case 135: /* Mobility */
	case 139: /* HIP */
	case 140: /* Shim6 */
	case 253: /* experiments */
	case 254:
		return true;
	}
	return false;
}

/* Fills the ports of key from the upper-layer header at off (ICMPv6: echo
 * identifier as both ports). -1 for packets PDM does not cover: other
 * protocols, and ICMPv6 other than echo (Neighbor Discovery must keep its
 * exact form). */
static __always_inline int l4_ports(struct __sk_buff *skb, __u32 off, __u8 nh,
				    __u16 *sport, __u16 *dport)
{
	void *data = skb_data(skb);
	void *data_end = skb_data_end(skb);
	__u8 buf[8], *b = buf;

	if (nh != IPPROTO_TCP && nh != IPPROTO_UDP && nh != IPPROTO_ICMPV6)
		return -1;
	/* Direct access when the header is in the linear part (the usual
	 * case: a helper call costs more than the rest). */
	if (off <= MAX_L4_OFFSET && data + off + 8 <= data_end)
		b = data + off;
	else if (bpf_skb_load_bytes(skb, off, buf, sizeof(buf)) < 0)
		return -1;
	if (nh == IPPROTO_ICMPV6) {
		if (b[0] != ICMPV6_ECHO_REQUEST && b[0] != ICMPV6_ECHO_REPLY)
			return -1;
		*sport = *dport = (b[4] << 8) | b[5];
		return 0;
	}
	*sport = (b[0] << 8) | b[1];
	*dport = (b[2] << 8) | b[3];
	return 0;
}

struct pdm_parsed {
	struct pdm_opt opt;
	__u32 l4_off;
	__u8 l4_proto;
	bool found;
	bool malformed;
};

/* Scans the options of the Destination Options header at off (hlen bytes)
 * for PDM. Every TLV is checked against the header's end. */
static __always_inline void scan_dstopts(struct __sk_buff *skb, __u32 off,
					 __u32 hlen, struct pdm_parsed *pp)
{
	__u32 o = off + 2, end = off + hlen;
	__u8 tl[2];
	int i;

	for (i = 0; i < PDM_MAX_OPTS; i++) {
		if (o >= end)
			return;
		if (bpf_skb_load_bytes(skb, o, tl, 1) < 0)
			return;
		if (tl[0] == 0) { /* Pad1 */
			o++;
			continue;
		}
		if (o + 2 > end || bpf_skb_load_bytes(skb, o, tl, 2) < 0) {
			pp->malformed = true;
			return;
		}
		if (o + 2 + tl[1] > end) {
			pp->malformed = true;
			return;
		}
		if (tl[0] == PDM_OPT_TYPE && !pp->found) {
			if (tl[1] != PDM_OPT_LEN) {
				pp->malformed = true;
				return;
			}
			if (bpf_skb_load_bytes(skb, o, &pp->opt,
					       sizeof(pp->opt)) < 0)
				return;
			pp->found = true;
		}
		o += 2 + tl[1];
	}
}

/* Walks the extension headers after the IPv6 header, looking for PDM in
 * Destination Options headers, down to the upper-layer header. -1 when
 * there is no upper-layer header to key the packet by: fragments (never
 * parsed further), ESP, AH, chains too long. */
static __always_inline int pdm_parse(struct __sk_buff *skb, __u8 nh,
				     struct pdm_parsed *pp)
{
	void *data = skb_data(skb);
	void *data_end = skb_data_end(skb);
	__u8 *d = data + L4_OFF;
	__u32 off = L4_OFF, hlen;
	__u8 hdr[2];
	int i;

	/* Fast path, the layout pdm_tc_egress writes: a 16-byte DO header
	 * right after the IPv6 header holding PDM then PadN(0). Read in
	 * place; anything else takes the general walk below. */
	if (nh == IPPROTO_DSTOPTS && (void *)(d + PDM_HDR_LEN) <= data_end &&
	    d[1] == 1 && d[2] == PDM_OPT_TYPE && d[3] == PDM_OPT_LEN &&
	    d[14] == 1 && d[15] == 0) {
		__builtin_memcpy(&pp->opt, d + 2, sizeof(pp->opt));
		pp->found = true;
		nh = d[0];
		off += PDM_HDR_LEN;
	}

	for (i = 0; i < PDM_MAX_EXT_HDRS; i++) {
		if (!is_ext_hdr(nh))
			break;
		if (nh != IPPROTO_HOPOPTS && nh != IPPROTO_ROUTING &&
		    nh != IPPROTO_DSTOPTS) {
			if (nh == IPPROTO_FRAGMENT)
				pdm_count(PDM_C_FRAGMENT);
			return -1;
		}
		if (bpf_skb_load_bytes(skb, off, hdr, sizeof(hdr)) < 0)
			return -1;
		hlen = (hdr[1] + 1) * 8;
		if (nh == IPPROTO_DSTOPTS && hlen <= PDM_MAX_EXT_LEN)
			scan_dstopts(skb, off, hlen, pp);
		off += hlen;
		nh = hdr[0];
	}
	if (is_ext_hdr(nh))
		return -1;
	pp->l4_off = off;
	pp->l4_proto = nh;
	return 0;
}

/* Reads the IPv6 header of an Ethernet frame. NULL for anything else. */
static __always_inline struct ipv6hdr *ipv6_header(struct __sk_buff *skb)
{
	void *data = skb_data(skb);
	void *data_end = skb_data_end(skb);
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = data + L3_OFF;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return NULL;
	if ((void *)(ip6 + 1) > data_end) {
		if (bpf_skb_pull_data(skb, L4_OFF) < 0)
			return NULL;
		data = skb_data(skb);
		data_end = skb_data_end(skb);
		eth = data;
		ip6 = data + L3_OFF;
		if ((void *)(ip6 + 1) > data_end)
			return NULL;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IPV6) || ip6->version != 6)
		return NULL;
	return ip6;
}

static __always_inline void make_key(struct pdm_key *k, struct ipv6hdr *ip6,
				     bool egress, __u8 proto, __u16 sport,
				     __u16 dport)
{
	__builtin_memset(k, 0, sizeof(*k));
	if (egress) {
		__builtin_memcpy(k->local, &ip6->saddr, 16);
		__builtin_memcpy(k->remote, &ip6->daddr, 16);
		k->lport = sport;
		k->rport = dport;
	} else {
		__builtin_memcpy(k->local, &ip6->daddr, 16);
		__builtin_memcpy(k->remote, &ip6->saddr, 16);
		k->lport = dport;
		k->rport = sport;
	}
	k->proto = proto;
}

/* The state of key, created when create is set, started over when idle
 * longer than the lifetime. NULL when there is none (or no room). */
static __always_inline struct pdm_state *get_state(struct pdm_key *key,
						   __u64 now, bool create)
{
	struct pdm_state *st, fresh = {};
	long ret;

	st = bpf_map_lookup_elem(&pdm_flows, key);
	if (st) {
		if (now - st->touched <= pdm_cfg.lifetime_ns)
			return st;
		pdm_count(PDM_C_STATE_RESET);
		fresh.psn_next = bpf_get_prandom_u32();
		fresh.touched = now;
		*st = fresh;
		return st;
	}
	if (!create)
		return NULL;
	fresh.psn_next = bpf_get_prandom_u32();
	fresh.touched = now;
	ret = bpf_map_update_elem(&pdm_flows, key, &fresh, BPF_NOEXIST);
	if ((int)ret == -E2BIG_ERR) {
		pdm_count(PDM_C_MAP_FULL);
		return NULL;
	}
	if ((int)ret == 0)
		pdm_count(PDM_C_STATE_CREATED);
	return bpf_map_lookup_elem(&pdm_flows, key);
}

static __always_inline void send_event(struct __sk_buff *skb,
				       struct ipv6hdr *ip6, struct pdm_key *k,
				       bool egress, struct pdm_opt *opt,
				       __u64 now, __u64 round_trip, __u8 flags,
				       __u8 pair_scale, __u16 pair_dtlr)
{
	struct pdm_event *e;

	e = bpf_ringbuf_reserve(&pdm_events, sizeof(*e), 0);
	if (!e) {
		pdm_count(PDM_C_RINGBUF_FULL);
		return;
	}
	e->timestamp = now;
	e->round_trip = round_trip;
	if (egress) {
		__builtin_memcpy(e->saddr, k->local, 16);
		__builtin_memcpy(e->daddr, k->remote, 16);
		e->sport = k->lport;
		e->dport = k->rport;
	} else {
		__builtin_memcpy(e->saddr, k->remote, 16);
		__builtin_memcpy(e->daddr, k->local, 16);
		e->sport = k->rport;
		e->dport = k->lport;
	}
	e->ifindex = skb->ifindex;
	e->proto = k->proto;
	e->flags = flags | (egress ? PDM_EV_EGRESS : 0);
	e->scale_dtlr = opt->scale_dtlr;
	e->scale_dtls = opt->scale_dtls;
	e->psntp = bpf_ntohs(opt->psntp);
	e->psnlr = bpf_ntohs(opt->psnlr);
	e->dtlr = bpf_ntohs(opt->dtlr);
	e->dtls = bpf_ntohs(opt->dtls);
	e->pair_scale = pair_scale;
	e->pad = 0;
	e->pair_dtlr = pair_dtlr;
	/* No wakeup: user space polls the ring every 10 ms (internal/pdm,
	 * pollEvery), which a wakeup per record costs several µs of. */
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	pdm_count(PDM_C_EVENTS);
}

/* Decodes the PDM of a packet in either direction. Active ingress: records
 * the reception (for the DTLR and DTLS this host sends next) and, when the
 * peer's PSNLR names the last packet sent, this host's round trip. Passive
 * (either direction): pairs the packet with the last PDM seen the other
 * way. */
static __always_inline void observe(struct __sk_buff *skb, struct ipv6hdr *ip6,
				    bool egress)
{
	struct pdm_parsed pp = {};
	struct pdm_state *st;
	struct pdm_key key;
	__u16 sport = 0, dport = 0, psnlr = 0, psntp = 0;
	__u64 now, rt = 0;
	__u8 flags = 0, pair_scale = 0;
	__u16 pair_dtlr = 0;

	if (pdm_parse(skb, ip6->nexthdr, &pp) < 0)
		goto out;
	if (l4_ports(skb, pp.l4_off, pp.l4_proto, &sport, &dport) < 0)
		goto out;
	make_key(&key, ip6, egress, pp.l4_proto, sport, dport);
	now = pdm_now(skb);
	st = get_state(&key, now, pp.found);
	if (!st)
		goto out;
	st->touched = now;
	if (pp.found) {
		pdm_count(PDM_C_PDM_SEEN);
		psntp = bpf_ntohs(pp.opt.psntp);
		psnlr = bpf_ntohs(pp.opt.psnlr);
	}
	if (pdm_cfg.passive) {
		if (!pp.found)
			goto out;
		if (egress) {
			if (st->peer_valid && st->peer_psn == psnlr) {
				flags |= PDM_EV_PAIRED;
				pair_scale = st->peer_scale;
				pair_dtlr = st->peer_dtlr;
			}
			st->own_psn = psntp;
			st->own_scale = pp.opt.scale_dtlr;
			st->own_dtlr = bpf_ntohs(pp.opt.dtlr);
			st->own_valid = 1;
		} else {
			if (st->own_valid && st->own_psn == psnlr) {
				flags |= PDM_EV_PAIRED;
				pair_scale = st->own_scale;
				pair_dtlr = st->own_dtlr;
			}
			st->peer_psn = psntp;
			st->peer_scale = pp.opt.scale_dtlr;
			st->peer_dtlr = bpf_ntohs(pp.opt.dtlr);
			st->peer_valid = 1;
		}
		send_event(skb, ip6, &key, egress, &pp.opt, now, 0, flags,
			   pair_scale, pair_dtlr);
		goto out;
	}
	/* Active ingress: this reception is the "last received". */
	st->dtls = st->have_sent ? now - st->last_sent : 0;
	st->last_recv = now;
	st->have_recv = 1;
	if (!pp.found)
		goto out;
	st->psn_recv = psntp;
	st->have_psn_recv = 1;
	if (st->have_sent && psnlr == (__u16)(st->psn_next - 1)) {
		rt = st->dtls;
		flags |= PDM_EV_ROUND_TRIP;
	}
	send_event(skb, ip6, &key, false, &pp.opt, now, rt, flags, 0, 0);
out:
	if (pp.malformed)
		pdm_count(PDM_C_MALFORMED);
}

SEC("tc")
int pdm_tc_ingress(struct __sk_buff *skb)
{
	struct ipv6hdr *ip6;

	pdm_count(PDM_C_INGRESS);
	ip6 = ipv6_header(skb);
	if (!ip6) {
		pdm_count(PDM_C_SKIP_NOT_IPV6);
		return TC_NEXT;
	}
	observe(skb, ip6, false);
	return TC_NEXT;
}

/* Hop-by-hop and routing headers the egress program moves to make room
 * for PDM after them, at most this many bytes. */
#define PDM_MAX_MOVE 256

/* Finds where the PDM header goes: after a hop-by-hop and a routing header
 * (RFC 8200's order: a destination options header for the final
 * destination comes after them). Returns their length (0 without them)
 * and sets *nh to the header that follows them and *nh_off to the offset
 * of the next-header byte naming it; -1 when they cannot be read. */
static __always_inline int ext_prefix(struct __sk_buff *skb, __u8 *nh,
				      __u32 *nh_off)
{
	void *data = skb_data(skb);
	void *data_end = skb_data_end(skb);
	__u32 len = 0;
	__u8 *h;

	*nh_off = L3_OFF + __builtin_offsetof(struct ipv6hdr, nexthdr);
	if (*nh == IPPROTO_HOPOPTS) {
		h = data + L4_OFF;
		if ((void *)(h + 2) > data_end)
			return -1;
		*nh_off = L4_OFF;
		len = (h[1] + 1) * 8;
		*nh = h[0];
	}
	if (*nh == IPPROTO_ROUTING) {
		h = data + L4_OFF + len; /* len <= 2048 */
		if ((void *)(h + 2) > data_end)
			return -1;
		*nh_off = L4_OFF + len;
		len += (h[1] + 1) * 8;
		*nh = h[0];
	}
	return len;
}

/* Inserts the PDM header before the upper-layer header of a packet with
 * no extension headers or with hop-by-hop and routing headers only. The
 * transport checksum stays valid: the IPv6 pseudo-header counts the
 * upper-layer length, not the payload length. */
static __always_inline int insert(struct __sk_buff *skb, struct ipv6hdr *ip6)
{
	struct pdm_dohdr h = {};
	struct pdm_state *st;
	struct pdm_key key;
	__u16 sport = 0, dport = 0, plen;
	__u8 nh = ip6->nexthdr, dstopts = IPPROTO_DSTOPTS;
	void *data, *data_end;
	__u32 mtu = 0, nh_off;
	__u8 moved[PDM_MAX_MOVE];
	int elen;
	__u64 now;

	elen = ext_prefix(skb, &nh, &nh_off);
	if (elen < 0 || elen > PDM_MAX_MOVE || is_ext_hdr(nh)) {
		if (nh == IPPROTO_FRAGMENT)
			pdm_count(PDM_C_FRAGMENT);
		else
			pdm_count(PDM_C_SKIP_EXT_HDR);
		return TC_NEXT;
	}
	if (l4_ports(skb, L4_OFF + elen, nh, &sport, &dport) < 0) {
		pdm_count(PDM_C_SKIP_PROTO);
		return TC_NEXT;
	}
	/* One GSO packet leaves as several segments sharing the inserted
	 * header, hence one PSN: not PDM's per-packet contract. */
	if (skb->gso_segs > 1 || skb->gso_size) {
		pdm_count(PDM_C_SKIP_GSO);
		return TC_NEXT;
	}
	/* IPv6 links have an MTU of at least 1280 (RFC 8200 section 5;
	 * Linux turns IPv6 off below it): smaller packets fit without
	 * asking. */
	if (skb->len - L3_OFF + PDM_HDR_LEN > IPV6_MIN_MTU &&
	    bpf_check_mtu(skb, 0, &mtu, PDM_HDR_LEN, 0) != 0) {
		pdm_count(PDM_C_SKIP_MTU);
		return TC_NEXT;
	}
	data = skb_data(skb);
	data_end = skb_data_end(skb);
	ip6 = data + L3_OFF;
	if ((void *)(ip6 + 1) > data_end)
		return TC_NEXT;
	plen = bpf_ntohs(ip6->payload_len);
	if (plen == 0) { /* a jumbogram: its length is in hop-by-hop */
		pdm_count(PDM_C_SKIP_EXT_HDR);
		return TC_NEXT;
	}
	make_key(&key, ip6, true, nh, sport, dport);
	now = pdm_now(skb);
	st = get_state(&key, now, true);
	if (!st)
		return TC_NEXT;

	h.nexthdr = nh;
	h.hdrlen = 1;
	h.opt.type = PDM_OPT_TYPE;
	h.opt.len = PDM_OPT_LEN;
	h.opt.psntp = bpf_htons(st->psn_next);
	if (st->have_psn_recv)
		h.opt.psnlr = bpf_htons(st->psn_recv);
	if (st->have_recv) {
		h.opt.dtlr = bpf_htons(
			pdm_encode(now - st->last_recv, &h.opt.scale_dtlr));
		h.opt.dtls = bpf_htons(pdm_encode(st->dtls, &h.opt.scale_dtls));
	}
	h.padn_type = 1;
	h.padn_len = 0;

	/* The room opens right after the IPv6 header. */
	if (bpf_skb_adjust_room(skb, PDM_HDR_LEN, BPF_ADJ_ROOM_NET, 0) < 0) {
		pdm_count(PDM_C_ADJUST_FAILED);
		return TC_NEXT;
	}
	/* From here on ip6 is stale: the packet moved. */
	plen = bpf_htons(plen + PDM_HDR_LEN);
	if (elen == 0) {
		data = skb_data(skb);
		data_end = skb_data_end(skb);
		ip6 = data + L3_OFF;
		if (data + L4_OFF + PDM_HDR_LEN <= data_end) {
			/* Linear (the usual case): write in place. */
			__builtin_memcpy(data + L4_OFF, &h, sizeof(h));
			ip6->payload_len = plen;
			ip6->nexthdr = dstopts;
			goto done;
		}
	} else {
		/* Hop-by-hop and routing headers go back in front of it,
		 * to the offsets they had. */
		barrier_var(elen);
		if (elen < 8 || elen > PDM_MAX_MOVE ||
		    bpf_skb_load_bytes(skb, L4_OFF + PDM_HDR_LEN, moved, elen) <
			    0 ||
		    bpf_skb_store_bytes(skb, L4_OFF, moved, elen, 0) < 0)
			goto undo;
	}
	if (elen == 0 && bpf_skb_store_bytes(skb, L4_OFF, &h, sizeof(h), 0) < 0)
		goto undo;
	/* Past the first store the packet is changed: a store failing now
	 * (none can: they write inside the range the first one wrote or
	 * read) would leave it broken, so it is dropped, and counted. */
	if ((elen &&
	     bpf_skb_store_bytes(skb, L4_OFF + elen, &h, sizeof(h), 0) < 0) ||
	    bpf_skb_store_bytes(skb, L3_OFF + 4, &plen, 2, 0) < 0 ||
	    bpf_skb_store_bytes(skb, nh_off, &dstopts, 1, 0) < 0) {
		pdm_count(PDM_C_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
done:
	st->psn_next++;
	st->last_sent = now;
	st->have_sent = 1;
	st->touched = now;
	pdm_count(PDM_C_INSERTED);
	return TC_NEXT;
undo:
	/* Nothing written yet: take the room back. */
	bpf_skb_adjust_room(skb, -PDM_HDR_LEN, BPF_ADJ_ROOM_NET, 0);
	pdm_count(PDM_C_ADJUST_FAILED);
	return TC_NEXT;
}

SEC("tc")
int pdm_tc_egress(struct __sk_buff *skb)
{
	struct ipv6hdr *ip6;

	pdm_count(PDM_C_EGRESS);
	ip6 = ipv6_header(skb);
	if (!ip6) {
		pdm_count(PDM_C_SKIP_NOT_IPV6);
		return TC_NEXT;
	}
	if (!pdm_cfg.passive)
		return insert(skb, ip6);
	observe(skb, ip6, true);
	return TC_NEXT;
}
