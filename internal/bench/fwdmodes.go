package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/probe"
)

// Router modes of the forwarding study, each applied to the lab's
// middlebox (the router) for a window and removed after it.
const (
	FwdKernel    = "kernel"    // net.ipv4.ip_forward: the kernel's IP stack
	FwdTC        = "tc-bpf"    // bpf/fwd.c fwd_tc on TCX ingress of both router interfaces
	FwdXDP       = "xdp"       // bpf/fwd.c fwd_xdp on both router interfaces, xdp_pass on their peers
	FwdFlowtable = "flowtable" // nftables flowtable (software offload) on both router interfaces
)

// ForwardModes are the router modes, the baseline first.
var ForwardModes = []string{FwdKernel, FwdTC, FwdXDP, FwdFlowtable}

func routerModesText() string {
	return "kernel: IP forwarding by the kernel (sysctl ip_forward=1, always on underneath); " +
		"tc-bpf: bpf/fwd.c fwd_tc on the tc ingress (TCX, else clsact) of both router interfaces (bpf_fib_lookup, TTL decrement, bpf_redirect with the FIB's MACs or bpf_redirect_neigh); " +
		"xdp: bpf/fwd.c fwd_xdp in native (driver) mode on both router interfaces (bpf_fib_lookup, bpf_redirect_map into a DEVMAP_HASH), " +
		"with xdp_pass on the client's and the server's interfaces (a veth receives redirected frames only when its peer has an XDP program); " +
		"flowtable: nftables table inet with a flowtable on both router interfaces and a forward-chain rule 'flow add' for TCP and UDP (software fast path after the first packets of a flow)"
}

// routerModes holds what the BPF modes need for the whole run.
type routerModes struct {
	lab                *lab.Lab
	objs               probe.FwdObjects
	cliIfidx, srvIfidx int // router interfaces
	peerCli, peerSrv   int // client's and server's interfaces
	kconfig            map[string]string
	tcAttach           string // how tc-bpf attached: "tcx ingress" or "clsact ingress"
}

func newRouterModes(l *lab.Lab) (*routerModes, error) {
	rm := &routerModes{lab: l, kconfig: kernelConfig()}
	if err := l.Middlebox.Do(func() error {
		var err error
		if rm.cliIfidx, err = ifindex(l.MiddleboxClientIf); err != nil {
			return err
		}
		rm.srvIfidx, err = ifindex(l.MiddleboxServerIf[0])
		return err
	}); err != nil {
		return nil, err
	}
	if err := l.Client.Do(func() (err error) { rm.peerCli, err = ifindex(lab.ClientIf); return }); err != nil {
		return nil, err
	}
	if err := l.Servers[0].Do(func() (err error) { rm.peerSrv, err = ifindex(lab.ServerIf); return }); err != nil {
		return nil, err
	}
	return rm, nil
}

func ifindex(name string) (int, error) {
	lk, err := netlink.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("find %s: %w", name, err)
	}
	return lk.Attrs().Index, nil
}

func (rm *routerModes) Close() { _ = rm.objs.Close() }

// config returns the study configuration of a mode, probing it: a mode
// this machine cannot run comes back with Unavailable set.
func (rm *routerModes) config(ctx context.Context, mode string) (StudyConfig, error) {
	cfg := StudyConfig{Name: mode}
	var setup func(context.Context) (func() error, error)
	switch mode {
	case FwdKernel:
		return cfg, nil
	case FwdTC:
		setup = rm.setupTC
	case FwdXDP:
		setup = rm.setupXDP
	case FwdFlowtable:
		setup = rm.setupFlowtable
	default:
		return cfg, fmt.Errorf("unknown router mode %q (want %s)", mode, strings.Join(ForwardModes, ", "))
	}
	if (mode == FwdTC || mode == FwdXDP) && rm.objs.FwdTc == nil {
		if err := probe.LoadFwdObjects(&rm.objs, nil); err != nil {
			cfg.Unavailable = "bpf/fwd.c does not load: " + err.Error()
			return cfg, nil
		}
	}
	// Probe: apply and remove once.
	teardown, err := setup(ctx)
	if err != nil {
		cfg.Unavailable = rm.explain(mode, err)
		return cfg, nil
	}
	if err := teardown(); err != nil {
		return cfg, fmt.Errorf("%s: remove after probing: %w", mode, err)
	}
	cfg.Setup = setup
	return cfg, nil
}

// explain adds the kernel configuration's evidence to a set-up error.
func (rm *routerModes) explain(mode string, err error) string {
	msg := err.Error()
	if mode == FwdFlowtable && rm.kconfig != nil {
		var missing []string
		for _, opt := range []string{"CONFIG_NF_FLOW_TABLE", "CONFIG_NF_FLOW_TABLE_INET", "CONFIG_NFT_FLOW_OFFLOAD"} {
			if v := rm.kconfig[opt]; v != "y" && v != "m" {
				missing = append(missing, opt)
			}
		}
		if len(missing) > 0 {
			msg = strings.Join(missing, ", ") + " not set in this kernel (/proc/config.gz); nft said: " + msg
		}
	}
	return msg
}

func (rm *routerModes) setupTC(context.Context) (func() error, error) {
	var atts []*loader.Attachment
	closeAll := func() error {
		var errs []error
		for i := len(atts) - 1; i >= 0; i-- {
			errs = append(errs, atts[i].Close())
		}
		return errors.Join(errs...)
	}
	// TCX where the kernel has it, else the legacy clsact filter (6.1).
	err := rm.lab.Middlebox.Do(func() error {
		for _, name := range []string{rm.lab.MiddleboxClientIf, rm.lab.MiddleboxServerIf[0]} {
			ifc, err := loader.Inspect(name)
			if err != nil {
				return err
			}
			att, err := loader.AttachTC(ifc, nil, rm.objs.FwdTc, loader.TCModeAuto)
			if err != nil {
				return err
			}
			atts = append(atts, att)
			rm.tcAttach = strings.Join(att.Modes, ", ")
		}
		return nil
	})
	if err != nil {
		_ = closeAll() // the attach error is the one to report
		return nil, err
	}
	return closeAll, nil
}

func (rm *routerModes) setupXDP(context.Context) (func() error, error) {
	var links []link.Link
	var keys []uint32
	closeAll := func() error {
		errs := []error{closeLinks(links)}
		for _, k := range keys {
			errs = append(errs, rm.objs.TxPorts.Delete(k))
		}
		return errors.Join(errs...)
	}
	attach := func(n *lab.Node, idx int, prog *ebpf.Program) error {
		return n.Do(func() error {
			l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: idx, Flags: link.XDPDriverMode})
			if err != nil {
				return fmt.Errorf("native XDP on ifindex %d: %w", idx, err)
			}
			links = append(links, l)
			return nil
		})
	}
	// The kernel resolves a devmap entry's ifindex in the network
	// namespace of the thread that writes it: write from the router's,
	// or the entries would name this namespace's interfaces.
	if err := rm.lab.Middlebox.Do(func() error {
		for _, idx := range []int{rm.cliIfidx, rm.srvIfidx} {
			if err := rm.objs.TxPorts.Put(uint32(idx), uint32(idx)); err != nil {
				return fmt.Errorf("devmap: %w", err)
			}
			keys = append(keys, uint32(idx))
		}
		return nil
	}); err != nil {
		_ = closeAll() // the map error is the one to report
		return nil, err
	}
	// Peers first, so that no redirected frame meets a peer without XDP.
	steps := []struct {
		n    *lab.Node
		idx  int
		prog *ebpf.Program
	}{
		{rm.lab.Client, rm.peerCli, rm.objs.XdpPass},
		{rm.lab.Servers[0], rm.peerSrv, rm.objs.XdpPass},
		{rm.lab.Middlebox, rm.cliIfidx, rm.objs.FwdXdp},
		{rm.lab.Middlebox, rm.srvIfidx, rm.objs.FwdXdp},
	}
	for _, s := range steps {
		if err := attach(s.n, s.idx, s.prog); err != nil {
			_ = closeAll() // the attach error is the one to report
			return nil, err
		}
	}
	return closeAll, nil
}

// closeLinks detaches links, the most recent first.
func closeLinks(links []link.Link) error {
	var errs []error
	for i := len(links) - 1; i >= 0; i-- {
		errs = append(errs, links[i].Close())
	}
	return errors.Join(errs...)
}

// nftTable is the table the flowtable mode creates in the router
// namespace (nothing else lives there: the namespace is the lab's own).
const nftTable = "rttbench_fwd"

func (rm *routerModes) nft(ctx context.Context, script string) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return errors.New("nft is not installed (Debian package nftables; scripts/setup.sh installs it)")
	}
	cmd := rm.lab.Middlebox.Command(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, strings.Join(strings.Fields(out.String()), " "))
	}
	return nil
}

func (rm *routerModes) setupFlowtable(ctx context.Context) (func() error, error) {
	devs := rm.lab.MiddleboxClientIf + ", " + rm.lab.MiddleboxServerIf[0]
	script := fmt.Sprintf(`table inet %s {
	flowtable ft {
		hook ingress priority 0
		devices = { %s }
	}
	chain forward {
		type filter hook forward priority 0; policy accept;
		meta l4proto { tcp, udp } flow add @ft
	}
}
`, nftTable, devs)
	if err := rm.nft(ctx, script); err != nil {
		// A half-created table would stay: remove whatever exists.
		_ = rm.nft(context.Background(), "destroy table inet "+nftTable+"\n") // best effort; the set-up error is the one to report
		return nil, err
	}
	return func() error { return rm.nft(context.Background(), "delete table inet "+nftTable+"\n") }, nil
}
