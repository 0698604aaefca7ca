/* SPDX-License-Identifier: GPL-2.0 */
/* Shared includes and constants that vmlinux.h does not carry (macros). */
#ifndef RTTSCOPE_COMMON_H
#define RTTSCOPE_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_HLEN_BYTES 14
#define ETH_P_IP       0x0800
#define ETH_P_IPV6     0x86DD
#define ETH_P_8021Q    0x8100
#define ETH_P_8021AD   0x88A8

#define AF_INET	 2
#define AF_INET6 10

#define IPPROTO_ICMP   1
#define IPPROTO_TCP    6
#define IPPROTO_UDP    17
#define IPPROTO_ICMPV6 58

#define ICMP_ECHOREPLY	    0
#define ICMP_ECHO	    8
#define ICMPV6_ECHO_REQUEST 128
#define ICMPV6_ECHO_REPLY   129

/* tc/TCX verdict that passes the packet on to the next program: used so an
 * observer never ends the chain for programs attached after it. Same value
 * as TC_ACT_UNSPEC for the legacy clsact attach. */
#define TC_NEXT -1

#define NS_PER_MS  1000000ULL
#define NS_PER_SEC 1000000000ULL

#define MAX_VLAN_TAGS	  2
#define MAX_IPV6_EXT_HDRS 8
/* Largest L4 header offset accepted; keeps verifier packet ranges valid
 * (offset + header size must stay below 64 KiB). */
#define MAX_L4_OFFSET 4096

/* errno values the map helpers return, negated. Compare them as int:
 * before 6.4 the verifier turns map helper calls into direct calls of map
 * ops that return int, so the upper 32 bits of R0 are zero (-E2BIG arrives
 * as 0xfffffff9, and a 64-bit compare with -7 never matches). */
#define E2BIG_ERR 7

/* One load of a global that other CPUs or user space write, not merged
 * with or moved past other accesses by the compiler. */
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

/* Puts a type that no map or global function uses into the object's BTF, so
 * that bpf2go can generate its Go twin (-type in internal/probe/gen.go): a
 * static pointer, never read, 8 bytes of .bss that Go does not see. */
#define BTF_EXPORT(type, tag) \
	static type *btf_export_##tag __attribute__((used))

#endif /* RTTSCOPE_COMMON_H */
