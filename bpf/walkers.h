/* SPDX-License-Identifier: GPL-2.0 */
/* Global (separately verified) functions for the parts of parsing whose
 * paths would otherwise multiply: the IPv6 extension header walk and the
 * TCP option scan. A global function is verified once on its own, and its
 * caller continues with a single state whatever path the function took.
 * Each exists once per context type, since globals can take a context but
 * not a packet pointer. */
#ifndef RTTSCOPE_WALKERS_H
#define RTTSCOPE_WALKERS_H

#include "common.h"

static __always_inline bool is_ipv6_ext(__u8 nexthdr)
{
	return nexthdr == 0 || nexthdr == 43 || nexthdr == 44 ||
	       nexthdr == 51 || nexthdr == 60;
}

/* Walks IPv6 extension headers (hop-by-hop, routing, fragment, destination
 * options, AH) from byte offset off, reading them with a load helper so the
 * offset stays an imprecise scalar and the verifier prunes the loop instead
 * of following every combination of header types. Returns the offset of the
 * L4 header and sets *nexthdr, or -1 (truncated, later fragment, too many). */
#define DEFINE_IPV6_EXT_WALKER(name, ctx_type, load)                              \
	__noinline int name(ctx_type *ctx, __u32 off, __u8 *nexthdr)              \
	{                                                                         \
		__u8 hdr[4];                                                      \
		__u8 nh;                                                          \
		int i;                                                            \
                                                                                  \
		if (!nexthdr)                                                     \
			return -1;                                                \
		nh = *nexthdr;                                                    \
		for (i = 0; i < MAX_IPV6_EXT_HDRS; i++) {                         \
			if (!is_ipv6_ext(nh))                                     \
				break;                                            \
			if (load(ctx, off, hdr, sizeof(hdr)) < 0)                 \
				return -1;                                        \
			if (nh == 44) {                                           \
				/* Only the first fragment has the L4 header. */  \
				if (((hdr[2] << 8) | hdr[3]) & 0xfff8)            \
					return -1;                                \
				off += 8;                                         \
			} else if (nh == 51) {                                    \
				off += (hdr[1] + 2) * 4;                          \
			} else {                                                  \
				off += (hdr[1] + 1) * 8;                          \
			}                                                         \
			nh = hdr[0];                                              \
		}                                                                 \
		/* Still an extension header: the chain is longer than walked. */ \
		if (is_ipv6_ext(nh))                                              \
			return -1;                                                \
		*nexthdr = nh;                                                    \
		return off;                                                       \
	}

DEFINE_IPV6_EXT_WALKER(ipv6_ext_walk_skb, struct __sk_buff, bpf_skb_load_bytes)
DEFINE_IPV6_EXT_WALKER(ipv6_ext_walk_xdp, struct xdp_md, bpf_xdp_load_bytes)

#define TCPOPT_EOL	  0
#define TCPOPT_NOP	  1
#define TCPOPT_TIMESTAMP  8
#define TCPOLEN_TIMESTAMP 10
/* Options walked before giving up: Linux and other stacks put the timestamp
 * within the first three or four options. */
#define MAX_TCP_OPT_ITER 10

struct tcp_ts_opt {
	__u32 tsval;
	__u32 tsecr;
};

/* Finds the timestamp option of the TCP header at tcph. Returns 0 and fills
 * out (host order) when present. Every step is bounded by the header length
 * and by data_end. */
static __always_inline int scan_tcp_ts(struct tcphdr *tcph, void *data_end,
				       struct tcp_ts_opt *out)
{
	void *opt_end;
	__u8 *pos = (__u8 *)(tcph + 1);
	__u8 kind, size;
	int i;

	if ((void *)(tcph + 1) > data_end)
		return -1;
	opt_end = (void *)tcph + tcph->doff * 4;

#pragma unroll
	for (i = 0; i < MAX_TCP_OPT_ITER; i++) {
		if ((void *)(pos + 1) > opt_end || (void *)(pos + 1) > data_end)
			return -1;
		kind = *pos;
		if (kind == TCPOPT_EOL)
			return -1;
		if (kind == TCPOPT_NOP) {
			pos++;
			continue;
		}
		if ((void *)(pos + 2) > opt_end || (void *)(pos + 2) > data_end)
			return -1;
		size = pos[1];
		if (size < 2)
			return -1;
		if (kind == TCPOPT_TIMESTAMP && size == TCPOLEN_TIMESTAMP) {
			if ((void *)(pos + TCPOLEN_TIMESTAMP) > opt_end ||
			    (void *)(pos + TCPOLEN_TIMESTAMP) > data_end)
				return -1;
			out->tsval = bpf_ntohl(*(__be32 *)(pos + 2));
			out->tsecr = bpf_ntohl(*(__be32 *)(pos + 6));
			return 0;
		}
		pos += size;
	}
	return -1;
}

#define DEFINE_TCP_TS_SCANNER(name, ctx_type)                                  \
	__noinline int name(ctx_type *ctx, __u32 tcp_off,                      \
			    struct tcp_ts_opt *out)                            \
	{                                                                      \
		void *data = (void *)(long)ctx->data;                          \
		void *data_end = (void *)(long)ctx->data_end;                  \
                                                                               \
		if (!out || tcp_off > MAX_L4_OFFSET)                           \
			return -1;                                             \
		/* clang may drop the check above as far as the verifier can	\
	 * see; an explicit mask keeps the offset visibly bounded. */ \
		asm volatile("%0 &= 0x1fff" : "+r"(tcp_off));                  \
		return scan_tcp_ts(data + tcp_off, data_end, out);             \
	}

DEFINE_TCP_TS_SCANNER(tcp_ts_skb, struct __sk_buff)
DEFINE_TCP_TS_SCANNER(tcp_ts_xdp, struct xdp_md)

#endif /* RTTSCOPE_WALKERS_H */
