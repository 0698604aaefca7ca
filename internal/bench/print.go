package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// PrintSummary writes readable tables of r: medians with the interquartile
// range, and for the rttscope programs the difference to the empty
// program and the ratio.
func PrintSummary(w io.Writer, r *Result) error {
	m := r.Machine
	fmt.Fprintf(w, "rttscope bench %s: commit %s, kernel %s, %s x%d, %s\n",
		m.Date, m.commitText(), m.Kernel, m.CPUModel, m.NProc, m.GoVersion)
	fmt.Fprintf(w, "cells: median (q1-q3) over %d reps; rttscope cells add +delta and xratio against the empty program\n", r.Settings.Reps)

	if r.Settings.TestRunPhase {
		fmt.Fprintf(w, "\nBPF_PROG_TEST_RUN, ns per run (no traffic, bpf_stats off; repeat %d; *: single runs, median of %d, timer overhead included)\n",
			r.Settings.Repeat, r.Settings.Pairs)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PACKET\tEMPTY\tRTTSCOPE EGRESS\tRTTSCOPE INGRESS\t")
		for _, c := range r.cases(GroupTestRun) {
			name := c
			if s := r.Lookup(seriesID(GroupTestRun, c, ProgEmpty, "", MetricNsPerRun)); s != nil && strings.HasPrefix(s.Mode, "single") {
				name += " *"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name,
				r.cell(seriesID(GroupTestRun, c, ProgEmpty, "", MetricNsPerRun), 1),
				r.cell(seriesID(GroupTestRun, c, ProgRttscope, "egress", MetricNsPerRun), 1),
				r.cell(seriesID(GroupTestRun, c, ProgRttscope, "ingress", MetricNsPerRun), 1))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if s := r.Lookup(seriesID(GroupTestRun, CaseStatsOn, ProgEmpty, "", MetricNsPerRun)); s != nil && s.Compare != nil {
			fmt.Fprintf(w, "(%s: the same frame with bpf_stats on; its EMPTY cell compares with bpf_stats off: the accounting costs %.1f ns per run here",
				CaseStatsOn, s.Compare.Delta)
			if own := r.Lookup(seriesID(GroupTestRun, CaseStatsOn, ProgEmpty, "", MetricBPFNsPerRun)); own != nil && own.Summary.N > 0 {
				fmt.Fprintf(w, ", of which %.1f ns land inside run_time_ns: the empty program's own bpf_stats figure, the residual in every live ns/packet", own.Summary.Median)
			}
			fmt.Fprintln(w, ")")
		}
	}

	if r.Settings.LivePhase && len(r.Windows) > 0 {
		fmt.Fprintf(w, "\nlive TCP bulk through the middlebox (%s, %s on %s; path %s, pacing %s; %s per window after %s warm-up; bpf_stats via %s)\n",
			r.Settings.Attach, r.Settings.DelayMethod+" delay", r.Settings.LiveInterface, r.Settings.Path, r.Settings.Pacing,
			r.Settings.Duration, r.Settings.Warmup, r.Settings.StatsMethod)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PROGRAM\tEGRESS ns/pkt\tINGRESS ns/pkt\tEGRESS pkt/s\tINGRESS pkt/s\tMbit/s\t")
		for _, p := range []string{ProgNone, ProgEmpty, ProgRttscope} {
			if r.Lookup(seriesID(GroupLive, CaseTCPBulk, p, "", MetricThroughput)) == nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", p,
				r.cell(seriesID(GroupLive, CaseTCPBulk, p, "egress", MetricNsPerPacket), 1),
				r.cell(seriesID(GroupLive, CaseTCPBulk, p, "ingress", MetricNsPerPacket), 1),
				r.cell(seriesID(GroupLive, CaseTCPBulk, p, "egress", MetricPacketsPerS), 0),
				r.cell(seriesID(GroupLive, CaseTCPBulk, p, "ingress", MetricPacketsPerS), 0),
				r.cell(seriesID(GroupLive, CaseTCPBulk, p, "", MetricThroughput), 0))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, "(live ns/pkt = delta run_time_ns / delta run_cnt: the empty and rttscope rows carry the same accounting bias, so the +delta is rttscope's own cost;")
		fmt.Fprintln(w, " pkt/s and Mbit/s of the programs compare with none; per-window CPU busy/steal and counters are in the JSON)")
	}
	if err := printSteps(w, r); err != nil {
		return err
	}
	if err := printEvents(w, r); err != nil {
		return err
	}
	if err := printLoad(w, r); err != nil {
		return err
	}
	printTargets(w, r)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func printEvents(w io.Writer, r *Result) error {
	es := r.Settings.Events
	if es == nil || len(r.EventsRuns) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nuser-space RTT event consumption (per-sample programs fed data/ACK pairs by BPF_PROG_TEST_RUN; %d reps; burst %d records; concurrent %s with %d producers)\n",
		es.Reps, es.Burst, es.Concurrent, es.Producers)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tCONSUMED events/s\tPRODUCED events/s\tRINGBUF_FULL\t")
	for _, c := range []string{CaseEvDrainRead, CaseEvDrainJSONL, CaseEvConcurrent, CaseEvDecode, CaseEvDecodeAnon} {
		if r.Lookup(seriesID(GroupEvents, c, ProgRttscope, "", MetricEventsPerS)) == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", c,
			r.cell(seriesID(GroupEvents, c, ProgRttscope, "", MetricEventsPerS), 0),
			r.cell(seriesID(GroupEvents, c, ProgRttscope, "", MetricProducedPerS), 0),
			r.cell(seriesID(GroupEvents, c, ProgRttscope, "", MetricRingbufFull), 0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(ringbuf-read: ReadInto only; ringbuf-jsonl: ReadInto+decode+jsonl to io.Discard, both draining a burst produced beforehand;")
	fmt.Fprintln(w, " concurrent: producers and reader at once; decode-jsonl: records from memory; decode-jsonl-anon: the same")
	fmt.Fprintln(w, " through --anonymize pfx --anonymize-ports with a warm cache)")
	return nil
}

func printLoad(w io.Writer, r *Result) error {
	ls := r.Settings.Load
	if ls == nil || len(r.LoadWindows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nload through the middlebox (%s; %s per window after %s warm-up, %d reps, modes interleaved; TCP writes of %d B at %s, UDP %d B payload at %s pps)\n",
		ls.Interface, ls.Duration, ls.Warmup, ls.Reps, ls.WriteSize, ls.TCPRate, ls.UDPPayload, ppsText(ls.UDPPPS))
	fmt.Fprintf(w, "bound: %s\n", ls.Bound)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tMODE\tFWD Mbit/s\tFWD pkt/s\tBPF ns/pkt eg\tBPF ns/pkt in\tSOFTIRQ CPUs\tRTTSCOPE CPUs\tRTTSCOPE CPU SHARE\tRTT events/s\t")
	for _, c := range r.cases(GroupLoad) {
		for _, m := range LoadModes {
			id := func(hook, metric string) string { return seriesID(GroupLoad, c, m, hook, metric) }
			if r.Lookup(id("", MetricFwdMbit)) == nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, m,
				r.ratioCell(id("", MetricFwdMbit), 0),
				r.ratioCell(id("", MetricFwdPPS), 0),
				r.cell(id("egress", MetricNsPerPacket), 0),
				r.cell(id("ingress", MetricNsPerPacket), 0),
				r.ratioCell(id("", MetricSoftirqCores), 2),
				r.cell(id("", MetricMonitorCores), 2),
				r.pctCell(id("", MetricCPUShare)),
				r.cell(id("", MetricRTTEventsPerS), 0))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(median (q1-q3); xN = ratio of medians to no monitor, [pN] = median of per-rep paired ratios; FWD = the middlebox's monitored")
	fmt.Fprintln(w, " interface: Mbit/s sent toward the server, packets both ways; softirq and busy CPU time are machine-wide; RTTSCOPE CPUs = the monitor")
	fmt.Fprintln(w, " process; RTTSCOPE CPU SHARE = (BPF run time of both hooks + monitor process) / machine busy time)")
	return nil
}

// pctCell is "median% (q1-q3%)" of a share series.
func (r *Result) pctCell(id string) string {
	s := r.Lookup(id)
	if s == nil || s.Summary.N == 0 {
		return "-"
	}
	sm := s.Summary
	return fmt.Sprintf("%.1f%% (%.1f-%.1f)", 100*sm.Median, 100*sm.Q1, 100*sm.Q3)
}

func ppsText(pps uint64) string {
	if pps == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d", pps)
}

// ratioCell is "median (q1-q3) xratio [ppaired]" against the baseline.
func (r *Result) ratioCell(id string, prec int) string {
	s := r.Lookup(id)
	if s == nil || s.Summary.N == 0 {
		return "-"
	}
	sm := s.Summary
	out := fmt.Sprintf("%.*f (%.*f-%.*f)", prec, sm.Median, prec, sm.Q1, prec, sm.Q3)
	if c := s.Compare; c != nil {
		out += fmt.Sprintf(" x%.3f", c.Ratio)
		if c.PairedRatio != nil {
			out += fmt.Sprintf(" [p%.3f]", *c.PairedRatio)
		}
	}
	if s.Missing > 0 {
		out += fmt.Sprintf(" [%d missing]", s.Missing)
	}
	return out
}

func printTargets(w io.Writer, r *Result) {
	if len(r.Targets) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntargets (reported, not asserted):")
	for _, t := range r.Targets {
		verdict := "not measured"
		if t.Met != nil {
			verdict = "NOT MET"
			if *t.Met {
				verdict = "met"
			}
		}
		fmt.Fprintf(w, "  [%s] %s\n        %s\n", verdict, t.Goal, t.Measured)
		if t.Caveat != "" {
			fmt.Fprintf(w, "        (%s)\n", t.Caveat)
		}
	}
}

func seriesID(group, cas, prog, hook, metric string) string {
	return (&Series{Group: group, Case: cas, Program: prog, Hook: hook, Metric: metric}).ID()
}

// cases returns the distinct cases of a group in order of first use.
func (r *Result) cases(group string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range r.Series {
		if s.Group == group && !seen[s.Case] {
			seen[s.Case] = true
			out = append(out, s.Case)
		}
	}
	return out
}

// cell renders a series as "median (q1-q3)" plus "+delta xratio" when it
// has a baseline; "-" when it does not exist or holds no value.
func (r *Result) cell(id string, prec int) string {
	s := r.Lookup(id)
	if s == nil || s.Summary.N == 0 {
		return "-"
	}
	f := func(v float64) string { return fmt.Sprintf("%.*f", prec, v) }
	sm := s.Summary
	out := fmt.Sprintf("%s (%s-%s)", f(sm.Median), f(sm.Q1), f(sm.Q3))
	if c := s.Compare; c != nil {
		d := f(c.Delta)
		if strings.Trim(d, "-0.") == "" {
			d = f(0) // no "-0"
		}
		if !strings.HasPrefix(d, "-") {
			d = "+" + d
		}
		out += fmt.Sprintf(" %s x%.2f", d, c.Ratio)
	}
	if s.Missing > 0 {
		out += fmt.Sprintf(" [%d missing]", s.Missing)
	}
	return out
}
