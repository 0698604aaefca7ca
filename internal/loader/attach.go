package loader

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/kernel"
)

// Hook choices: the values of --ingress-hook, --tc-mode and --xdp-mode.
const (
	IngressTC  = "tc"
	IngressXDP = "xdp"

	TCModeAuto   = "auto"   // TCX, else clsact
	TCModeTCX    = "tcx"    // TCX links (Linux 6.6+)
	TCModeClsact = "clsact" // legacy clsact qdisc + filter

	XDPModeAuto    = "auto" // native, else generic
	XDPModeNative  = "native"
	XDPModeGeneric = "generic"
)

// The valid values of each AttachOptions field, the default first.
var (
	IngressHooks = []string{IngressTC, IngressXDP}
	TCModes      = []string{TCModeAuto, TCModeTCX, TCModeClsact}
	XDPModes     = []string{XDPModeAuto, XDPModeNative, XDPModeGeneric}
)

// clsactPriority is the filter priority rttscope uses with the legacy
// clsact attach; a fixed value lets a second instance fail loudly instead of
// silently stacking.
const clsactPriority = 0xc0de

// AttachOptions say how to hook an interface. An empty field means its
// default (the first of its valid values).
type AttachOptions struct {
	IngressHook string // one of IngressHooks
	TCMode      string // one of TCModes
	XDPMode     string // one of XDPModes, used with IngressXDP
}

// Validate reports a field that is not one of its valid values, naming the
// flag that sets it. Attach checks it before anything else, so the attach
// code below handles valid values only.
func (o AttachOptions) Validate() error {
	for _, f := range []struct {
		flag, value string
		valid       []string
	}{
		{"--ingress-hook", o.IngressHook, IngressHooks},
		{"--tc-mode", o.TCMode, TCModes},
		{"--xdp-mode", o.XDPMode, XDPModes},
	} {
		if f.value != "" && !slices.Contains(f.valid, f.value) {
			return fmt.Errorf("invalid %s %q: want one of %s", f.flag, f.value, strings.Join(f.valid, ", "))
		}
	}
	return nil
}

// Interface is what Inspect learns about an interface before loading.
type Interface struct {
	Name   string
	Index  int
	L3Only bool   // no Ethernet header (tun, PPP, ip tunnels)
	Encap  string // netlink encapsulation type, e.g. "ether", "none"
}

// Inspect resolves an interface by name in the current network namespace.
func Inspect(name string) (Interface, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return Interface{}, fmt.Errorf("interface %q not found (see `ip link`)", name)
	}
	a := l.Attrs()
	encap := a.EncapType
	return Interface{
		Name:   name,
		Index:  a.Index,
		Encap:  encap,
		L3Only: encap != "ether" && encap != "loopback",
	}, nil
}

// Attachment is the set of hooks on one interface. Links (TCX, XDP) are
// held by this process only, so the kernel detaches them if it dies.
type Attachment struct {
	Iface   Interface
	Modes   []string // human-readable, e.g. "tcx egress", "xdp generic"
	closers []func() error
}

// Attach hooks the egress program and the chosen ingress program to ifc.
// Call it from the interface's network namespace. On error nothing stays
// attached.
func (o *Objects) Attach(ifc Interface, opts AttachOptions) (_ *Attachment, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	a := &Attachment{Iface: ifc}
	defer func() {
		if err != nil {
			_ = a.Close() // the attach error is the one to report
		}
	}()
	if err := a.attachTC(o.RttscopeTcEgress, ebpf.AttachTCXEgress, opts.TCMode); err != nil {
		return nil, err
	}
	if opts.IngressHook == IngressXDP {
		if o.RttscopeXdpIngress == nil {
			return nil, fmt.Errorf("%s: this kernel does not allow the XDP ingress program (see `rttscope doctor`): use --ingress-hook tc", ifc.Name)
		}
		err = a.attachXDP(o.RttscopeXdpIngress, opts.XDPMode)
	} else {
		err = a.attachTC(o.RttscopeTcIngress, ebpf.AttachTCXIngress, opts.TCMode)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

func dirName(t ebpf.AttachType) string {
	if t == ebpf.AttachTCXEgress {
		return "egress"
	}
	return "ingress"
}

func (a *Attachment) attachTC(prog *ebpf.Program, dir ebpf.AttachType, mode string) error {
	if mode == "" {
		mode = TCModeAuto
	}
	if mode == TCModeAuto && !kernel.Has(kernel.TCX) {
		mode = TCModeClsact // probed absent (or disabled): no attempt
	}
	if mode == TCModeTCX {
		if r := kernel.Check(kernel.TCX); !r.OK() {
			return fmt.Errorf("%s: TCX links are %s on this kernel (Linux 6.6+): use --tc-mode clsact (or auto)", a.Iface.Name, r.Status)
		}
	}
	if mode != TCModeClsact {
		l, err := link.AttachTCX(link.TCXOptions{Interface: a.Iface.Index, Program: prog, Attach: dir})
		if err == nil {
			a.Modes = append(a.Modes, "tcx "+dirName(dir))
			a.closers = append(a.closers, l.Close)
			return nil
		}
		if mode == TCModeTCX || !errors.Is(err, ebpf.ErrNotSupported) {
			return attachError(a.Iface.Name, "tcx "+dirName(dir), err)
		}
	}
	return a.attachClsact(prog, dir)
}

// attachClsact is the fallback for kernels before 6.6. Unlike links, a
// filter outlives the process: it is removed on every orderly exit, and the
// README says how to remove it after a crash.
//
// The netlink handle is opened here, in the interface's namespace, and kept
// for the detach: Close may run on any thread (a monitor's deferred
// cleanup, the watcher of vanished interfaces), and netlink's package-level
// functions would then talk to whatever namespace that thread is in,
// missing our filter or, worse, deleting the clsact qdisc of an unrelated
// interface that has the same ifindex there.
func (a *Attachment) attachClsact(prog *ebpf.Program, dir ebpf.AttachType) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return attachError(a.Iface.Name, "clsact (netlink)", err)
	}
	qdisc := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: a.Iface.Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	created := false
	switch err := h.QdiscAdd(qdisc); {
	case err == nil:
		created = true
	case errors.Is(err, unix.EEXIST):
	default:
		h.Close()
		return attachError(a.Iface.Name, "clsact qdisc", err)
	}
	parent := uint32(netlink.HANDLE_MIN_INGRESS)
	if dir == ebpf.AttachTCXEgress {
		parent = netlink.HANDLE_MIN_EGRESS
	}
	filter := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: a.Iface.Index,
			Parent:    parent,
			Handle:    1,
			Protocol:  unix.ETH_P_ALL,
			Priority:  clsactPriority,
		},
		Fd:           prog.FD(),
		Name:         "rttscope_" + dirName(dir),
		DirectAction: true,
	}
	if err := h.FilterAdd(filter); err != nil {
		if created {
			_ = h.QdiscDel(qdisc) // the filter error is the one to report
		}
		h.Close()
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s: an rttscope clsact filter is already attached (another instance, or left by a crash: `tc filter del dev %s %s prio %d`)",
				a.Iface.Name, a.Iface.Name, dirName(dir), clsactPriority)
		}
		return attachError(a.Iface.Name, "clsact "+dirName(dir), err)
	}
	a.Modes = append(a.Modes, "clsact "+dirName(dir))
	a.closers = append(a.closers, func() error {
		defer h.Close()
		err := h.FilterDel(filter)
		if created {
			// Only the qdisc we added goes; deleting it also removes
			// the filter of the other direction, which is fine once
			// both closers have run (errors for a gone link are ignored).
			_ = h.QdiscDel(qdisc)
		}
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return nil
		}
		return err
	})
	return nil
}

func (a *Attachment) attachXDP(prog *ebpf.Program, mode string) error {
	tries := []link.XDPAttachFlags{link.XDPDriverMode, link.XDPGenericMode} // auto
	switch mode {
	case XDPModeNative:
		tries = tries[:1]
	case XDPModeGeneric:
		tries = tries[1:]
	}
	var errs []error
	for _, flags := range tries {
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: a.Iface.Index, Flags: flags})
		if err == nil {
			name := "xdp native"
			if flags == link.XDPGenericMode {
				name = "xdp generic"
			}
			a.Modes = append(a.Modes, name)
			a.closers = append(a.closers, l.Close)
			return nil
		}
		errs = append(errs, err)
	}
	all := errors.Join(errs...)
	if errors.Is(all, unix.EBUSY) || errors.Is(all, unix.EEXIST) {
		return fmt.Errorf("%s: another XDP program is already attached; use --ingress-hook tc", a.Iface.Name)
	}
	if len(tries) == 1 && tries[0] == link.XDPDriverMode && notSupported(all) {
		return fmt.Errorf("%s: the driver has no native XDP support; use --xdp-mode generic (or auto), or --ingress-hook tc", a.Iface.Name)
	}
	if notSupported(errs[len(errs)-1]) {
		return fmt.Errorf("%s: XDP is not supported here; use --ingress-hook tc", a.Iface.Name)
	}
	return attachError(a.Iface.Name, "xdp", errs[len(errs)-1])
}

// notSupported tells "this kernel or driver cannot do that" errors.
func notSupported(err error) bool {
	const enotsupp = unix.Errno(524) // the kernel-internal ENOTSUPP leaks out of some drivers
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, enotsupp)
}

func attachError(ifname, what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%s: attaching %s needs root (CAP_NET_ADMIN and CAP_BPF): %w", ifname, what, err)
	}
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("%s: interface disappeared while attaching %s", ifname, what)
	}
	return fmt.Errorf("%s: attach %s: %w", ifname, what, err)
}

// Close detaches everything, most recent first.
func (a *Attachment) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	a.closers = nil
	return errors.Join(errs...)
}
