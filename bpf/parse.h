/* SPDX-License-Identifier: GPL-2.0 */
/* L2 and L3 parsing with bounded loops. Every read is checked against
 * data_end; a truncated or malformed header makes the parser give up
 * quietly (the packet is passed on untouched and yields no sample). */
#ifndef RTTSCOPE_PARSE_H
#define RTTSCOPE_PARSE_H

#include "packet.h"
#include "walkers.h"

struct vlan_tag {
	__be16 tci;
	__be16 encap_proto;
};

/* Parses Ethernet and up to two VLAN tags (802.1Q, 802.1ad). On success
 * *pos points at the L3 header and the EtherType is returned; 0 otherwise. */
static __always_inline __u16 parse_l2(struct parsing_context *pctx, void **pos)
{
	struct ethhdr *eth = *pos;
	struct vlan_tag *vh;
	__u16 proto;
	int i;

	if (pctx->l3_only)
		return pctx->l3_proto;

	if ((void *)(eth + 1) > pctx->data_end)
		return 0;
	proto = bpf_ntohs(eth->h_proto);
	*pos = eth + 1;

#pragma unroll
	for (i = 0; i < MAX_VLAN_TAGS; i++) {
		if (proto != ETH_P_8021Q && proto != ETH_P_8021AD)
			break;
		vh = *pos;
		if ((void *)(vh + 1) > pctx->data_end)
			return 0;
		proto = bpf_ntohs(vh->encap_proto);
		*pos = vh + 1;
	}
	return proto;
}

static __always_inline void map_ipv4(struct in6_addr *dst, __be32 addr)
{
	dst->in6_u.u6_addr32[0] = 0;
	dst->in6_u.u6_addr32[1] = 0;
	dst->in6_u.u6_addr32[2] = bpf_htonl(0xffff);
	dst->in6_u.u6_addr32[3] = addr;
}

/* Parses IPv4 (with options). Returns the L4 protocol, or -1 when there is
 * no L4 header to look at (truncated, bad IHL, not the first fragment). */
static __always_inline int parse_ipv4(struct parsing_context *pctx, void **pos,
				      struct packet_info *p)
{
	struct iphdr *iph = *pos;
	__u32 hdrlen;

	if ((void *)(iph + 1) > pctx->data_end)
		return -1;
	/* The IP layer drops these; the peer never answers them. */
	if (iph->version != 4)
		return -1;
	hdrlen = iph->ihl * 4;
	if (hdrlen < sizeof(*iph))
		return -1;
	/* Later fragments carry no transport header. */
	if (iph->frag_off & bpf_htons(0x1fff))
		return -1;
	if (*pos + hdrlen > pctx->data_end)
		return -1;

	p->pid.flow.ipv = AF_INET;
	map_ipv4(&p->pid.flow.saddr.ip, iph->saddr);
	map_ipv4(&p->pid.flow.daddr.ip, iph->daddr);
	p->l3_len = bpf_ntohs(iph->tot_len);
	p->ip_tos = iph->tos;
	*pos += hdrlen;
	return iph->protocol;
}

/* The traffic class (DSCP and ECN, as IPv4's TOS byte): bits 4-11 of the
 * header's first 16. */
static __always_inline __u8 ipv6_tclass(const struct ipv6hdr *ip6h)
{
	return (bpf_ntohs(*(const __be16 *)ip6h) >> 4) & 0xff;
}

/* Parses IPv6 and finds the L4 header. Returns the L4 protocol or -1. */
static __always_inline int parse_ipv6(struct parsing_context *pctx, void **pos,
				      struct packet_info *p)
{
	struct ipv6hdr *ip6h = *pos;
	__u8 nexthdr;
	int off;

	if ((void *)(ip6h + 1) > pctx->data_end)
		return -1;
	if (ip6h->version != 6)
		return -1;

	p->pid.flow.ipv = AF_INET6;
	p->pid.flow.saddr.ip = ip6h->saddr;
	p->pid.flow.daddr.ip = ip6h->daddr;
	p->l3_len = bpf_ntohs(ip6h->payload_len) + sizeof(*ip6h);
	p->ip_tos = ipv6_tclass(ip6h);
	nexthdr = ip6h->nexthdr;
	*pos = ip6h + 1;
	if (!is_ipv6_ext(nexthdr))
		return nexthdr;

	off = (void *)(ip6h + 1) - pctx->data;
	if (pctx->is_xdp)
		off = ipv6_ext_walk_xdp(pctx->ctx, off, &nexthdr);
	else
		off = ipv6_ext_walk_skb(pctx->ctx, off, &nexthdr);
	if (off < 0 || off > MAX_L4_OFFSET)
		return -1;
	*pos = pctx->data + off;
	return nexthdr;
}

#endif /* RTTSCOPE_PARSE_H */
