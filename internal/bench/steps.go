package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/rttscope/rttscope/internal/loader"
)

// The steps phase: the live TCP bulk transfer of the live phase, with the
// rttscope programs cut after each step of the data path in turn (load-time
// constant cfg_steps, loader.Config.Steps), interleaved with the empty
// program. What a step costs is the difference to the configuration one
// step shorter in the same rep.
//
// With Options.CompareBinary the phase compares two builds instead: the
// monitor of that binary (ProgPrev) and of this one (ProgCur), each run as
// a `rttscope monitor` subprocess with the default settings.

// GroupSteps holds the series of the steps phase.
const GroupSteps = "steps"

// Configurations of the steps phase besides ProgEmpty and the step names
// (loader.StepNames).
const (
	ProgPrev = "prev" // the monitor of Options.CompareBinary
	ProgCur  = "cur"  // the monitor of this executable
)

// stepOf returns the step a configuration name stands for.
func stepOf(prog string) (loader.Step, bool) {
	for i, n := range loader.StepNames {
		if n == prog {
			return loader.StepParse + loader.Step(i), true
		}
	}
	return 0, false
}

// baselineOf is the configuration a program's ns/packet is compared with:
// the previous build for the current one, the empty program otherwise.
func baselineOf(prog string) string {
	switch prog {
	case ProgEmpty, ProgNone:
		return ""
	case ProgCur:
		return ProgPrev
	}
	return ProgEmpty
}

// stepsProgs are the configurations of the steps phase, in order.
func stepsProgs(o *Options) []string {
	if o.CompareBinary != "" {
		return []string{ProgEmpty, ProgPrev, ProgCur}
	}
	return append([]string{ProgEmpty}, loader.StepNames...)
}

func runSteps(ctx context.Context, o *Options, res *Result) error {
	if o.CompareBinary != "" {
		if _, err := os.Stat(o.CompareBinary); err != nil {
			return fmt.Errorf("compare binary: %w", err)
		}
	}
	return runLiveWindows(ctx, o, res, GroupSteps, stepsProgs(o))
}

// attachBinary runs `rttscope monitor` of bin (this executable when "")
// on the interface in Options.CompareMode (default: sampled, the default
// settings), as the load phase does, and
// finds the programs it attached.
func (lb *liveBench) attachBinary(ctx context.Context, bin string) (*attached, error) {
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the rttscope binary: %w", err)
		}
	}
	mb := &loadBench{o: lb.o, lab: lb.lab, ifname: lb.ifname, ifidx: lb.ifidx, bin: bin}
	mode := lb.o.CompareMode
	if mode == "" {
		mode = ModeSampled
	}
	m, err := mb.startMonitor(mode)
	if err != nil {
		return nil, err
	}
	eg, in, err := mb.waitAttached(ctx, m)
	if err != nil {
		_ = m.stop() // the attach error is the one to report
		return nil, err
	}
	return &attached{eg: eg, in: in, stop: m.stop, owned: true}, nil
}

// printSteps writes the per-step table: ns/packet per hook, the ratio to
// the empty program, and what each step adds to the one before it (median
// of the per-rep differences: the two ran in the same rep); or, when two
// builds were compared, their ratio with its confidence interval.
func printSteps(w io.Writer, r *Result) error {
	for _, c := range []string{CaseTCPBulk, CaseUDPFlood} {
		if err := printStepsCase(w, r, c); err != nil {
			return err
		}
	}
	return nil
}

func printStepsCase(w io.Writer, r *Result, traffic string) error {
	progs := []string{}
	for _, p := range append([]string{ProgEmpty, ProgPrev, ProgCur}, loader.StepNames...) {
		if r.Lookup(seriesID(GroupSteps, traffic, p, "", MetricThroughput)) != nil {
			progs = append(progs, p)
		}
	}
	if len(progs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nsteps: live %s (as live), the data path cut after each step (cfg_steps) or two builds; ns/packet median (q1-q3), xratio to the empty program\n", traffic)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONFIG\tEGRESS ns/pkt\tSTEP ADDS\tINGRESS ns/pkt\tSTEP ADDS\tMbit/s\t")
	prev := ""
	for _, p := range progs {
		row := []string{p}
		for _, hook := range []string{"egress", "ingress"} {
			id := seriesID(GroupSteps, traffic, p, hook, MetricNsPerPacket)
			cell := r.cell(id, 1)
			if p == ProgCur {
				cell = r.ciCell(id, seriesID(GroupSteps, traffic, ProgEmpty, hook, MetricNsPerPacket))
			}
			row = append(row, cell, r.stepAdds(traffic, p, prev, hook))
		}
		row = append(row, r.cell(seriesID(GroupSteps, traffic, p, "", MetricThroughput), 0))
		for _, c := range row {
			fmt.Fprintf(tw, "%s\t", c)
		}
		fmt.Fprintln(tw)
		prev = p
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(STEP ADDS: median over reps of ns/pkt minus the row above's in the same rep [min..max]; cur: xratio to prev, geometric mean of per-rep ratios with its 95 % CI)")
	return nil
}

// stepAdds is the median per-rep difference of prog's ns/packet to prev's.
func (r *Result) stepAdds(traffic, prog, prev, hook string) string {
	if prev == "" || prog == ProgPrev {
		return "-"
	}
	a := r.Lookup(seriesID(GroupSteps, traffic, prog, hook, MetricNsPerPacket))
	b := r.Lookup(seriesID(GroupSteps, traffic, prev, hook, MetricNsPerPacket))
	if a == nil || b == nil || a.Missing > 0 || b.Missing > 0 {
		return "-"
	}
	n := min(len(a.Values), len(b.Values))
	if n == 0 {
		return "-"
	}
	d := make([]float64, n)
	for i := range d {
		d[i] = a.Values[i] - b.Values[i]
	}
	s := Summarize(d)
	return fmt.Sprintf("%+.1f [%+.0f..%+.0f]", s.Median, s.Min, s.Max)
}

// ciCell is the ns/packet of the current build with its ratio to the
// previous one (95 % CI) and to the empty program.
func (r *Result) ciCell(id, emptyID string) string {
	s := r.Lookup(id)
	if s == nil || s.Summary.N == 0 {
		return "-"
	}
	out := fmt.Sprintf("%.1f", s.Summary.Median)
	if c := s.Compare; c != nil && c.CILow != nil {
		out += fmt.Sprintf(" x%.3f [%.3f-%.3f] vs prev", *c.Geo, *c.CILow, *c.CIHigh)
	}
	if e := r.Lookup(emptyID); e != nil && e.Summary.N > 0 {
		if q, ok := Ratio(s.Summary.Median, e.Summary.Median); ok {
			out += fmt.Sprintf(", x%.2f empty", q)
		}
	}
	return out
}
