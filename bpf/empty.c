// SPDX-License-Identifier: GPL-2.0
/* Baseline for benchmarks: the cost of running any tc program at all. */
#include "common.h"

char LICENSE[] SEC("license") = "GPL";

SEC("tc")
int empty_tc(struct __sk_buff *skb)
{
	return TC_NEXT;
}
