// Package doctor tells what rttscope can do on this kernel: every probed
// feature, and the variants a trial load of the real programs ends up
// with, live and in replay. It loads programs but attaches nothing.
package doctor

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/replay"
)

// Report is what Check found.
type Report struct {
	Kernel   string // release and machine, from uname
	Features []kernel.Result
	// Live and Replay are the variants of a trial load with flow
	// summaries on; LiveErr and ReplayErr why a trial load failed.
	Live, Replay       loader.Variant
	LiveErr, ReplayErr error
	XDPIngress         bool // the XDP ingress program loaded
}

// OK reports whether rttscope can measure here (live and in replay).
func (r *Report) OK() bool { return r.LiveErr == nil && r.ReplayErr == nil }

// Check probes the kernel and loads the programs as monitor and replay
// would, then releases them.
func Check() *Report {
	r := &Report{Kernel: uname(), Features: kernel.All()}
	cfg := loader.DefaultConfig()
	cfg.FlowSummary = true
	r.Live, r.XDPIngress, r.LiveErr = trialLive(cfg)
	r.Replay, r.ReplayErr = trialReplay(cfg)
	return r
}

func trialLive(cfg loader.Config) (loader.Variant, bool, error) {
	objs, err := loader.Load(cfg)
	if err != nil {
		return loader.Variant{}, false, err
	}
	defer objs.Close()
	c, err := objs.NewCleaner()
	if err != nil {
		return objs.Variant, false, err
	}
	defer c.Close()
	s, err := objs.NewSummaries(0)
	if err != nil {
		return objs.Variant, false, err
	}
	defer s.Close()
	return objs.Variant, objs.RttscopeXdpIngress != nil, nil
}

func trialReplay(cfg loader.Config) (loader.Variant, error) {
	e, err := replay.NewEngine(cfg, nil)
	if err != nil {
		return loader.Variant{}, err
	}
	defer e.Close()
	return e.Objects().Variant, nil
}

func uname() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:]) + " (" + unix.ByteSliceToString(u.Machine[:]) + ")"
}

// Write prints the report for a person.
func (r *Report) Write(w io.Writer) error {
	fmt.Fprintf(w, "kernel %s\n\n", r.Kernel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FEATURE\tID\tSINCE\tSTATUS\tWITHOUT IT")
	for _, f := range r.Features {
		without := "rttscope cannot run"
		if !f.Required {
			without = f.Instead
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Name, f.ID, f.Since, f.Status, without)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var absent []string
	for _, f := range r.Features {
		if !f.OK() {
			absent = append(absent, fmt.Sprintf("  %s: %s\n    lost: %s", f.ID, kernel.Explain(f.Err), lost(f)))
		}
	}
	if len(absent) > 0 {
		fmt.Fprintf(w, "\nabsent features:\n%s\n", strings.Join(absent, "\n"))
	}
	fmt.Fprintln(w)
	writeTrial(w, "monitor", r.Live, r.LiveErr)
	if r.LiveErr == nil {
		hook := "tc only (XDP unavailable, see above: --ingress-hook xdp is refused)"
		if r.XDPIngress {
			hook = "tc or xdp"
		}
		tc := "tcx"
		if !kernel.Has(kernel.TCX) {
			tc = "clsact"
		}
		fmt.Fprintf(w, "  hooks: egress %s, ingress %s\n", tc, hook)
	}
	writeTrial(w, "replay", r.Replay, r.ReplayErr)
	if !r.OK() {
		return errors.New("rttscope cannot run on this kernel (see above)")
	}
	return nil
}

func lost(f kernel.Result) string {
	if f.Required {
		return "everything: rttscope refuses to run"
	}
	return f.Lost
}

func writeTrial(w io.Writer, what string, v loader.Variant, err error) {
	if err != nil {
		fmt.Fprintf(w, "%s: cannot load: %v\n", what, err)
		return
	}
	fmt.Fprintf(w, "%s: loads; %s\n", what, v)
	for _, n := range v.Notes {
		fmt.Fprintf(w, "  fallback: %s\n", n)
	}
}
