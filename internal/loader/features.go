package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
)

// CheckKernel reports, in one line a user can act on, the first kernel
// feature rttscope needs that this kernel lacks.
func CheckKernel() error {
	checks := []struct {
		what string
		err  error
	}{
		{"the BPF ring buffer (Linux 5.8+)", features.HaveMapType(ebpf.RingBuf)},
		{"tc BPF programs (CONFIG_NET_CLS_BPF)", features.HaveProgramType(ebpf.SchedCLS)},
		{"BPF tracing programs for map iterators (Linux 5.8+, BTF)", features.HaveProgramType(ebpf.Tracing)},
	}
	for _, c := range checks {
		if errors.Is(c.err, ebpf.ErrNotSupported) {
			return fmt.Errorf("this kernel lacks %s, which rttscope needs", c.what)
		}
	}
	return nil
}
