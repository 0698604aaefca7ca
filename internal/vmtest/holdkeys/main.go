// Command holdkeys keeps the kernel's networking static keys switched on
// for as long as it runs. scripts/vmtest.sh starts it in every qemu guest
// before the tests and never stops it.
//
// Why: the kernel guards its optional receive-path work (TCX programs,
// generic XDP, packet timestamps) with static keys, branches that are
// live-patched in kernel text when the first user arrives or the last one
// leaves. The tests attach and detach such users
// all the time. x86 patches with a temporary int3, which is safe on
// hardware; under multi-threaded TCG another vCPU can still run the stale
// int3 after the patch ended, and the kernel then dies with "Fatal
// exception in interrupt" (seen in CI on Debian 6.12: RIP on the
// tcx_needed_key branch of __netif_receive_skb_core). With one user held
// here from boot, no test ever flips those keys.
//
// It holds, each where the kernel has it:
//   - tcx_needed_key: a TCX program (returns TCX_NEXT) on an idle veth device;
//   - generic_xdp_needed_key: a generic-mode XDP program (XDP_PASS) there;
//   - netstamp_needed_key: a UDP socket with SO_TIMESTAMPNS.
//
// Not bpf_stats_enabled_key: TestStatsTelemetryDisabled needs the run-time
// accounting off, and only the few --bpf-stats tests flip it.
//
// The ingress and egress qdisc keys are held by a clsact qdisc that the
// guest's init puts on loopback. holdkeys prints one line naming what it
// holds (and what it could not, with the reason), then "ready", then
// sleeps until killed. Nothing it holds touches test traffic: the veth
// pair stays down, and the programs do nothing.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// device is the idle link the programs attach to, peer its other end
// (15 bytes at most each).
const (
	device = "vmtest-keys0"
	peer   = "vmtest-keys1"
)

// tcxNext is TCX_NEXT: hand the packet on as if no program ran.
const tcxNext = -1

func main() {
	var held, missing []string
	var closers []io.Closer
	hold := func(key string, c io.Closer, err error) {
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", key, err))
			return
		}
		held = append(held, key)
		closers = append(closers, c)
	}
	ifindex, err := idleDevice()
	if err != nil {
		fmt.Fprintf(os.Stderr, "holdkeys: %v\n", err)
		os.Exit(1)
	}
	// Everything held stays referenced from closers until the end: a
	// link that the garbage collector finalized would let its key go.
	tcx, err := attachTCX(ifindex)
	hold("tcx_needed_key", tcx, err)
	xdp, err := attachGenericXDP(ifindex)
	hold("generic_xdp_needed_key", xdp, err)
	sock, err := timestampingSocket()
	hold("netstamp_needed_key", sock, err)

	fmt.Printf("holdkeys: holding %s", strings.Join(held, ", "))
	if len(missing) > 0 {
		fmt.Printf("; not held: %s", strings.Join(missing, "; "))
	}
	fmt.Println("\nready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, unix.SIGTERM, unix.SIGINT)
	<-stop
	for _, c := range closers {
		if err := c.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "holdkeys: %v\n", err)
		}
	}
}

func idleDevice() (int, error) {
	// A veth pair rather than a dummy device: the tests need veth anyway,
	// some kernels are built without dummy.
	l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: device}, PeerName: peer}
	if err := netlink.LinkAdd(l); err != nil {
		return 0, fmt.Errorf("add veth pair %s/%s: %w", device, peer, err)
	}
	got, err := netlink.LinkByName(device)
	if err != nil {
		return 0, fmt.Errorf("find device %s: %w", device, err)
	}
	return got.Attrs().Index, nil
}

// program loads a two-instruction program that returns ret.
func program(typ ebpf.ProgramType, ret int32) (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         typ,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, ret), asm.Return()},
	})
}

func attachTCX(ifindex int) (link.Link, error) {
	p, err := program(ebpf.SchedCLS, tcxNext)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: p, Attach: ebpf.AttachTCXIngress})
}

func attachGenericXDP(ifindex int) (link.Link, error) {
	p, err := program(ebpf.XDP, 2) // XDP_PASS
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return link.AttachXDP(link.XDPOptions{Interface: ifindex, Program: p, Flags: link.XDPGenericMode})
}

// timestampingSocket is a UDP socket that asked for receive timestamps.
func timestampingSocket() (io.Closer, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "timestamping socket")
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
