// SPDX-License-Identifier: GPL-2.0
/* Programs of `rttscope bench hooks` (seed 003): one per BPF tracing
 * program type, all on the same hot path, the receive of every packet:
 * the net:netif_receive_skb tracepoint (fired in __netif_receive_skb_core)
 * and the kernel function __netif_receive_skb (its caller on the backlog
 * path that veth and loopback packets take). Two flavours each:
 *
 *   *_empty  returns at once: the cost of the hook mechanism itself;
 *   *_count  adds one to a per-CPU counter: the mechanism plus a map
 *            update (and a figure of how many events fired).
 */
#include "common.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline int count(void)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&hits, &key);

	if (n)
		*n += 1;
	return 0;
}

SEC("tracepoint/net/netif_receive_skb")
int tracepoint_empty(void *ctx)
{
	return 0;
}

SEC("tracepoint/net/netif_receive_skb")
int tracepoint_count(void *ctx)
{
	return count();
}

SEC("raw_tp/netif_receive_skb")
int raw_tp_empty(void *ctx)
{
	return 0;
}

SEC("raw_tp/netif_receive_skb")
int raw_tp_count(void *ctx)
{
	return count();
}

SEC("tp_btf/netif_receive_skb")
int tp_btf_empty(void *ctx)
{
	return 0;
}

SEC("tp_btf/netif_receive_skb")
int tp_btf_count(void *ctx)
{
	return count();
}

SEC("kprobe/__netif_receive_skb")
int kprobe_empty(void *ctx)
{
	return 0;
}

SEC("kprobe/__netif_receive_skb")
int kprobe_count(void *ctx)
{
	return count();
}

SEC("kprobe.multi/__netif_receive_skb")
int kprobe_multi_empty(void *ctx)
{
	return 0;
}

SEC("kprobe.multi/__netif_receive_skb")
int kprobe_multi_count(void *ctx)
{
	return count();
}

SEC("fentry/__netif_receive_skb")
int fentry_empty(void *ctx)
{
	return 0;
}

SEC("fentry/__netif_receive_skb")
int fentry_count(void *ctx)
{
	return count();
}
