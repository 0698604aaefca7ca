/* SPDX-License-Identifier: GPL-2.0 */
/* Load-time configuration. User space sets these constants before loading,
 * so disabled features are pruned by the verifier and cost nothing. */
#ifndef RTTSCOPE_CONFIG_H
#define RTTSCOPE_CONFIG_H

#include "common.h"

/* Fixed per-flow-direction rate limit between timestamps (ns). */
volatile const __u64 cfg_rate_limit_ns = 100 * NS_PER_MS;
/* RTT-proportional rate limit: factor * RTT, in thousandths; 0 = off. */
volatile const __u64 cfg_rtt_rate_milli = 0;
/* Base the RTT-proportional limit on the smoothed RTT instead of the min. */
volatile const bool cfg_rtt_rate_use_srtt = false;
volatile const bool cfg_track_tcp = true;
volatile const bool cfg_track_icmp = false;
/* Where TCP data samples come from (id_tcp_ts.h, id_tcp_seq.h). */
enum tcp_mode {
	/* Timestamps in segments that carry the option, sequence and
	 * acknowledgement numbers in those that do not: per direction in
	 * effect, since a connection that negotiated timestamps sends them
	 * on every segment but RSTs (RFC 7323, 3.2). */
	TCP_MODE_AUTO = 0,
	TCP_MODE_TS = 1, /* timestamps only (ePPing) */
	TCP_MODE_SEQ = 2, /* sequence numbers only, timestamps ignored */
};
volatile const __u32 cfg_tcp_mode = TCP_MODE_AUTO;
/* Handshake samples (SYN -> SYN-ACK, SYN-ACK -> ACK); SYNs open flows. */
volatile const bool cfg_track_tcp_handshake = false;
/* DNS over UDP and TCP (id_dns.h), to and from these server ports (host
 * order; 0: unused slot). */
volatile const bool cfg_track_dns = false;
#define DNS_PORTS 4
volatile const __u16 cfg_dns_ports[DNS_PORTS] = {53, 0, 0, 0};
/* Report the question's name with DNS samples (--dns-names; off: the name
 * is never read, data minimisation). */
volatile const bool cfg_dns_names = false;
/* QUIC spin bit (id_quic_spin.h), UDP to and from these ports. */
volatile const bool cfg_track_quic = false;
#define QUIC_PORTS 4
volatile const __u16 cfg_quic_ports[QUIC_PORTS] = {443, 0, 0, 0};

/* Whether port (network order) is one of the n slots of a port list above
 * (cfg_dns_ports, cfg_quic_ports). */
static __always_inline bool port_listed(const volatile __u16 *ports, int n,
					__be16 port)
{
	__u16 p = bpf_ntohs(port);
	int i;

#pragma unroll
	for (i = 0; i < n; i++) {
		if (ports[i] && ports[i] == p)
			return true;
	}
	return false;
}

/* Timestamp SYNs and let them open flows (may fill state under SYN floods). */
volatile const bool cfg_include_syn = false;
/* Also timestamp the TSval a TCP flow is first seen with (ePPing waits for
 * the next one: an unseen earlier packet may have carried it). */
volatile const bool cfg_sample_first_tsval = false;
/* Skip timestamping ingress packets addressed to this host (their replies
 * measure local application delay). Off with --include-local and in replay. */
volatile const bool cfg_local_filter = true;
/* Replay mode: "now" is the packet's tstamp (capture time) and iterators use
 * the time of the last packet instead of the kernel clock. */
volatile const bool cfg_replay = false;
/* Some attached interfaces have no Ethernet header (see l3_ifaces map). */
volatile const bool cfg_have_l3_ifaces = false;
/* Cleanup timeouts (ns). */
volatile const __u64 cfg_tcp_flow_timeout_ns = 300 * NS_PER_SEC;
volatile const __u64 cfg_other_flow_timeout_ns = 30 * NS_PER_SEC;
volatile const __u64 cfg_ts_timeout_ns = 10 * NS_PER_SEC;
/* The flow table (flowtable.h): its number of buckets (flow_map holds
 * FLOW_WAYS slots each), and the seed of its hash, random at each live
 * load, fixed in replay so that its output does not change from run to
 * run. */
volatile const __u32 cfg_flow_buckets = 16384;
volatile const __u64 cfg_flow_seed = 0;
/* Aggregated mode: RTT samples and traffic go into per-prefix histograms and
 * counters (agg.h) instead of per-sample events; no flow events either. */
volatile const bool cfg_aggregate = false;
/* Prefix lengths of the aggregation keys. */
volatile const __u32 cfg_agg_prefix_v4 = 24;
volatile const __u32 cfg_agg_prefix_v6 = 48;
/* Key RTTs on the destination of the reply (the host that sent the
 * timestamped packet) instead of its source; traffic likewise on the local
 * side instead of the remote one. */
volatile const bool cfg_agg_reverse = false;
/* Aggregated mode: the fast path counts its segments in their flow, and
 * user space has them folded into the prefixes at each interval's end
 * (agg_fold.h). Off where the kernel lacks bpf_for_each_map_elem, which
 * the fold's walk needs: the fast path then counts in the prefix slots. */
volatile const bool cfg_agg_fold = false;
/* Keep per-flow RTT summaries and report them (summary.h). */
volatile const bool cfg_flow_summary = false;

/* Ring buffer wake-ups (event_wakeup in rttscope.c): 0, every event wakes
 * the reader; otherwise only an event that finds at least this many bytes
 * waiting, and user space polls. */
volatile const __u32 cfg_event_wakeup_bytes = 0;

/* The fast path (fastpath.h) for the common TCP segment; off, every
 * packet takes the general path, which gives the same results (tests and
 * benchmarks compare the two). */
volatile const bool cfg_fast_path = true;

/* Steps of the data path, in the order they add cost. Benchmarks only
 * (rttscope bench --only steps): cfg_steps runs the data path up to and
 * including that step and prunes the rest, to measure what each step costs;
 * the default, STEP_ALL, is the whole program. */
enum step {
	STEP_PARSE = 1, /* parse down to the identifiers */
	STEP_FLOW = 2, /* + flow lookup or creation, flow counters */
	STEP_TIMESTAMP = 3, /* + timestamp insert and match */
	STEP_LOCAL = 4, /* + local-destination check */
	STEP_EVENTS = 5, /* + events (or aggregation, summaries) */
	STEP_COUNTERS = 6, /* + the counters map */
	STEP_ALL = STEP_COUNTERS,
};
volatile const __u32 cfg_steps = STEP_ALL;

#endif /* RTTSCOPE_CONFIG_H */
