// SPDX-License-Identifier: GPL-2.0
/* Router modes of `rttscope bench forwarding`: IPv4/IPv6 forwarding in BPF
 * instead of the kernel's IP stack. Both programs ask the kernel's FIB
 * (bpf_fib_lookup), decrement the TTL / hop limit and send the packet out
 * of the egress interface; anything the FIB does not forward (local
 * addresses, ARP/NDP, TTL about to expire, options we do not parse) goes
 * up the normal stack unchanged.
 *
 *   fwd_tc    tc ingress: bpf_redirect with the resolved MACs, or
 *             bpf_redirect_neigh when the neighbour is not resolved yet.
 *   fwd_xdp   XDP: MACs from the FIB, bpf_redirect_map into tx_ports (a
 *             DEVMAP_HASH keyed by ifindex). A veth only receives
 *             redirected frames when its peer has an XDP program too:
 *             xdp_pass is that program.
 */
#include "common.h"

char LICENSE[] SEC("license") = "GPL";

#define TC_ACT_OK	  0
#define TC_ACT_SHOT	  2
#define IPV6_FLOWINFO_MSK 0x0fffffff

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

/* Incremental checksum update of a TTL decrement (RFC 1624), as the
 * kernel's ip_decrease_ttl. */
static __always_inline void ipv4_decrease_ttl(struct iphdr *iph)
{
	__u32 check = iph->check;

	check += bpf_htons(0x0100);
	iph->check = (__u16)(check + (check >= 0xFFFF));
	iph->ttl--;
}

/* Fills fib from the IP header after the Ethernet header at data and
 * returns the L3 protocol (ETH_P_IP or ETH_P_IPV6), or 0 when the packet
 * is not one this forwarder handles (then it goes up the stack). */
static __always_inline int fib_params(void *data, void *data_end,
				      struct bpf_fib_lookup *fib, __u32 ifindex)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return 0;
	fib->ifindex = ifindex;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);

		if ((void *)(iph + 1) > data_end || iph->ttl <= 1)
			return 0;
		fib->family = AF_INET;
		fib->tos = iph->tos;
		fib->l4_protocol = iph->protocol;
		fib->tot_len = bpf_ntohs(iph->tot_len);
		fib->ipv4_src = iph->saddr;
		fib->ipv4_dst = iph->daddr;
		return ETH_P_IP;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = (void *)(eth + 1);

		if ((void *)(ip6h + 1) > data_end || ip6h->hop_limit <= 1)
			return 0;
		fib->family = AF_INET6;
		fib->flowinfo = *(__be32 *)ip6h & bpf_htonl(IPV6_FLOWINFO_MSK);
		fib->l4_protocol = ip6h->nexthdr;
		fib->tot_len = bpf_ntohs(ip6h->payload_len);
		__builtin_memcpy(fib->ipv6_src, &ip6h->saddr, 16);
		__builtin_memcpy(fib->ipv6_dst, &ip6h->daddr, 16);
		return ETH_P_IPV6;
	}
	return 0;
}

/* Decrements the TTL / hop limit. fib_params checked the header, but the
 * verifier needs the bound check again on this pointer. */
static __always_inline int decrease_ttl(void *data, void *data_end, int proto)
{
	struct ethhdr *eth = data;

	if (proto == ETH_P_IP) {
		struct iphdr *iph = (void *)(eth + 1);

		if ((void *)(iph + 1) > data_end)
			return -1;
		ipv4_decrease_ttl(iph);
		return 0;
	}
	struct ipv6hdr *ip6h = (void *)(eth + 1);

	if ((void *)(ip6h + 1) > data_end)
		return -1;
	ip6h->hop_limit--;
	return 0;
}

/* Writes the MAC addresses the FIB resolved (the Ethernet header was
 * checked by fib_params). */
static __always_inline void set_macs(void *data, void *data_end,
				     struct bpf_fib_lookup *fib)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return;
	__builtin_memcpy(eth->h_dest, fib->dmac, 6);
	__builtin_memcpy(eth->h_source, fib->smac, 6);
}

SEC("tc")
int fwd_tc(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct bpf_fib_lookup fib = {};
	int proto, rc;

	proto = fib_params(data, data_end, &fib, skb->ingress_ifindex);
	if (!proto)
		return TC_ACT_OK;
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return TC_ACT_OK;
	if (decrease_ttl(data, data_end, proto))
		return TC_ACT_OK;
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		/* The kernel resolves the neighbour and builds the Ethernet
		 * header. */
		return bpf_redirect_neigh(fib.ifindex, NULL, 0, 0);
	set_macs(data, data_end, &fib);
	return bpf_redirect(fib.ifindex, 0);
}

SEC("xdp")
int fwd_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct bpf_fib_lookup fib = {};
	int proto;

	proto = fib_params(data, data_end, &fib, ctx->ingress_ifindex);
	if (!proto)
		return XDP_PASS;
	/* XDP cannot resolve neighbours: anything but a complete answer
	 * (NO_NEIGH included) takes the kernel's path, which does. */
	if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) !=
	    BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;
	if (!bpf_map_lookup_elem(&tx_ports, &fib.ifindex))
		return XDP_PASS;
	if (decrease_ttl(data, data_end, proto))
		return XDP_PASS;
	set_macs(data, data_end, &fib);
	return bpf_redirect_map(&tx_ports, fib.ifindex, 0);
}

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
