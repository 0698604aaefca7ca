package loader

import (
	"github.com/cilium/ebpf"
)

// AttachTC hooks an egress and an ingress tc program of another object
// (rttscope pdm) to ifc with the same TCX-or-clsact choice as Attach
// (tcMode is one of TCModes, "" meaning auto). Call it from the
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
	if err := a.attachTC(egress, ebpf.AttachTCXEgress, tcMode); err != nil {
		return nil, err
	}
	if err := a.attachTC(ingress, ebpf.AttachTCXIngress, tcMode); err != nil {
		return nil, err
	}
	return a, nil
}
