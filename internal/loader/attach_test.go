package loader

import (
	"strings"
	"testing"
)

// TestAttachOptionsValidate: every valid value and the empty default pass;
// anything else names the flag, the value and what is valid.
func TestAttachOptionsValidate(t *testing.T) {
	if err := (AttachOptions{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
	for _, h := range IngressHooks {
		for _, tc := range TCModes {
			for _, x := range XDPModes {
				if err := (AttachOptions{IngressHook: h, TCMode: tc, XDPMode: x}).Validate(); err != nil {
					t.Errorf("%s/%s/%s: %v", h, tc, x, err)
				}
			}
		}
	}
	for _, tc := range []struct {
		opts AttachOptions
		want []string
	}{
		{AttachOptions{IngressHook: "bar"}, []string{"--ingress-hook", `"bar"`, "tc, xdp"}},
		{AttachOptions{TCMode: "new"}, []string{"--tc-mode", `"new"`, "auto, tcx, clsact"}},
		{AttachOptions{XDPMode: "turbo"}, []string{"--xdp-mode", `"turbo"`, "auto, native, generic"}},
	} {
		err := tc.opts.Validate()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %v does not mention %s", tc.opts, err, w)
			}
		}
	}
}
