package loader

import (
	"github.com/cilium/ebpf"
)

// AttachTC hooks an egress and an ingress tc program of another object
// (rttscope pdm, the bench's forwarder) to ifc with the same
// TCX-or-clsact choice as Attach (tcMode is one of TCModes, "" meaning
// auto); a nil program leaves its direction alone. Call it from the
// interface's network namespace. On error nothing stays attached.
func AttachTC(ifc Interface, egress, ingress *ebpf.Program, tcMode string) (_ *Attachment, err error) {
	if err := (AttachOptions{TCMode: tcMode}).Validate(); err != nil {
		return nil, err
	}
	a := &Attachment{Iface: ifc}
	defer func() {
		if err != nil {
			_ = a.Close() // the attach error is the one to report
		}
	}()
	for _, h := range []struct {
		prog *ebpf.Program
		dir  ebpf.AttachType
	}{{egress, ebpf.AttachTCXEgress}, {ingress, ebpf.AttachTCXIngress}} {
		if h.prog == nil {
			continue
		}
		if err := a.attachTC(h.prog, h.dir, tcMode); err != nil {
			return nil, err
		}
	}
	return a, nil
}
