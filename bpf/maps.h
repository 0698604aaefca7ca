/* SPDX-License-Identifier: GPL-2.0 */
/* Maps. Sizes here are defaults: the loader sets max_entries from flags. */
#ifndef RTTSCOPE_MAPS_H
#define RTTSCOPE_MAPS_H

#include "flow.h"
#include "events.h"
#include "counters.h"

/* Send time of each outstanding packet identifier. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct packet_id);
	__type(value, __u64);
	__uint(max_entries, 131072);
} ts_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

/* Interfaces without an Ethernet header (tun, PPP): ifindex -> 1. Only
 * consulted when cfg_have_l3_ifaces is set. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u8);
	__uint(max_entries, 64);
} l3_ifaces SEC(".maps");

/* Deletes the timestamp pid taken in d's direction. Returns whether this
 * call deleted it: whoever does owns it (its sample or its dropping), even
 * with both hooks on different CPUs. */
static __always_inline bool ts_forget(struct packet_id *pid,
				      struct flow_dir_state *d)
{
	if (bpf_map_delete_elem(&ts_map, pid) != 0)
		return false;
	outstanding_dec(d);
	count(COUNTER_TS_DELETED);
	return true;
}

/* Replay mode: capture time of the newest packet, the iterators' "now". */
__u64 replay_now = 0;

#endif /* RTTSCOPE_MAPS_H */
