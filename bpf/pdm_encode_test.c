// SPDX-License-Identifier: GPL-2.0
/* Test harness for the PDM delta encoder (pdm_encode.h), run through
 * BPF_PROG_TEST_RUN only: the packet's first 8 bytes are a delta in ns
 * (host byte order), bytes 8..11 receive the scale (one byte, then a zero
 * byte) and the 16-bit value (host byte order). Never attached. */
#include "common.h"
#include "pdm_encode.h"

char LICENSE[] SEC("license") = "GPL";

SEC("tc")
int pdm_encode_test(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	__u8 scale = 0;
	__u16 value;
	__u64 ns;

	if (data + 12 > data_end)
		return TC_NEXT;
	ns = *(__u64 *)data;
	value = pdm_encode(ns, &scale);
	*(__u8 *)(data + 8) = scale;
	*(__u8 *)(data + 9) = 0;
	*(__u16 *)(data + 10) = value;
	return TC_NEXT;
}
