/* SPDX-License-Identifier: GPL-2.0 */
/* Types, maps and counters of the PDM programs (pdm.c). bpf2go exports the
 * types marked BTF_EXPORT or used by maps to internal/probe (Pdm*), and
 * internal/pdm decodes the records with them. */
#ifndef RTTSCOPE_PDM_H
#define RTTSCOPE_PDM_H

#include "common.h"

#define IPPROTO_HOPOPTS	 0
#define IPPROTO_ROUTING	 43
#define IPPROTO_FRAGMENT 44
#define IPPROTO_ESP	 50
#define IPPROTO_AH	 51
#define IPPROTO_DSTOPTS	 60

#define PDM_OPT_TYPE 0x0f
#define PDM_OPT_LEN  10 /* option data bytes */
#define PDM_HDR_LEN  16 /* DO header: NH, len, PDM (12 bytes), PadN (2) */

#define TC_ACT_SHOT 2

/* Extension headers walked on ingress before giving up, and option TLVs
 * scanned per Destination Options header. */
#define PDM_MAX_EXT_HDRS 4
#define PDM_MAX_OPTS	 8
#define PDM_MAX_EXT_LEN	 512 /* bytes: larger headers are not scanned */

enum pdm_counter {
	PDM_C_EGRESS, /* packets the egress program looked at */
	PDM_C_INGRESS,
	PDM_C_INSERTED, /* PDM headers inserted */
	PDM_C_SKIP_NOT_IPV6, /* not IPv6 or not Ethernet-framed */
	PDM_C_SKIP_PROTO, /* not TCP, UDP or ICMPv6 echo */
	PDM_C_SKIP_EXT_HDR, /* already carries extension headers */
	PDM_C_SKIP_MTU, /* would exceed the interface MTU */
	PDM_C_SKIP_GSO, /* GSO packet: its segments would share one PSN */
	PDM_C_ADJUST_FAILED, /* bpf_skb_adjust_room or a store refused */
	PDM_C_PDM_SEEN, /* PDM options parsed (ingress; egress in passive) */
	PDM_C_MALFORMED, /* bad option length or TLV past the header */
	PDM_C_FRAGMENT, /* fragments: passed, never parsed or changed */
	PDM_C_STATE_CREATED,
	PDM_C_STATE_RESET, /* entries older than the lifetime started over */
	PDM_C_MAP_FULL, /* state refused: the map is full */
	PDM_C_EVENTS,
	PDM_C_RINGBUF_FULL,
	PDM_C_NR,
};
BTF_EXPORT(enum pdm_counter, pdm_counter);

/* A 5-tuple from this host's side: local is the source of egress packets
 * and the destination of ingress ones, so both directions share a key.
 * ICMPv6 echo uses the identifier for both ports. */
struct pdm_key {
	__u8 local[16];
	__u8 remote[16];
	__u16 lport; /* host byte order */
	__u16 rport;
	__u8 proto;
	__u8 pad[3];
};

struct pdm_state {
	__u64 touched; /* last packet, either direction (for aging) */
	__u64 last_sent; /* send time of the last PDM packet sent */
	__u64 last_recv; /* receive time of the last packet received */
	__u64 dtls; /* at that receive: last_recv - last_sent, 0 = none */
	__u16 psn_next; /* PSNTP of the next packet sent */
	__u16 psn_recv; /* PSNTP of the last PDM received */
	__u8 have_sent;
	__u8 have_recv;
	__u8 have_psn_recv;
	/* Passive pairing: the last PDM seen leaving (own_*) and arriving
	 * (peer_*), so that a packet whose PSNLR names it gives a network RTT
	 * = its DTLS minus that packet's DTLR. */
	__u8 own_scale;
	__u16 own_psn;
	__u16 own_dtlr;
	__u8 own_valid;
	__u8 peer_valid;
	__u8 peer_scale;
	__u8 pad;
	__u16 peer_psn;
	__u16 peer_dtlr;
	__u16 pad2;
};

#define PDM_EV_EGRESS	  0x01 /* seen leaving (passive mode) */
#define PDM_EV_ROUND_TRIP 0x02 /* round_trip is set */
#define PDM_EV_PAIRED	  0x04 /* pair_* is the DTLR of the packet PSNLR names */

/* One PDM option seen, as sent to user space. Addresses and ports as on
 * the wire's packet (src = sender), ports in host byte order. */
struct pdm_event {
	__u64 timestamp; /* CLOCK_MONOTONIC ns (test runs: skb->tstamp) */
	__u64 round_trip; /* ns, this host's send of PSNLR to this arrival */
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
	__u32 ifindex;
	__u8 proto;
	__u8 flags; /* PDM_EV_* */
	__u8 scale_dtlr;
	__u8 scale_dtls;
	__u16 psntp;
	__u16 psnlr;
	__u16 dtlr;
	__u16 dtls;
	__u8 pair_scale;
	__u8 pad;
	__u16 pair_dtlr;
};
BTF_EXPORT(struct pdm_event, pdm_event);

/* Load-time settings, set by internal/pdm before loading. */
struct pdm_config {
	__u64 lifetime_ns; /* state idle this long starts over */
	__u8 passive; /* decode only, never insert */
	__u8 tstamp_clock; /* tests: time = skb->tstamp */
	__u8 pad[6];
};

volatile const struct pdm_config pdm_cfg = {
	.lifetime_ns = 60 * NS_PER_SEC,
};

/* Plain hash, not LRU: a flood of new 5-tuples must not evict the state of
 * the measured ones. When it is full, new 5-tuples are refused (counted)
 * until user space deletes entries idle longer than the lifetime. Sized
 * with --pdm-map-size. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct pdm_key);
	__type(value, struct pdm_state);
	__uint(max_entries, 65536);
} pdm_flows SEC(".maps");

/* 1 MiB: 13,107 records, 10 ms of 1.3 million a second (user space polls
 * it every 10 ms: the programs wake nobody up). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} pdm_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, PDM_C_NR);
} pdm_counters SEC(".maps");

static __always_inline void pdm_count(enum pdm_counter c)
{
	__u32 key = c;
	__u64 *v;

	v = bpf_map_lookup_elem(&pdm_counters, &key);
	if (v)
		*v += 1;
}

#endif /* RTTSCOPE_PDM_H */
