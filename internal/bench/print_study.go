package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// PrintStudy writes a study's summary: per case and metric, each
// configuration's median (IQR), mean ± std, the ratio of its mean to the
// baseline's with the 95 % bootstrap interval, and the verdict.
func PrintStudy(w io.Writer, r *Result) error {
	m := r.Machine
	title := r.Name
	if r.Settings.Study != nil {
		title = r.Settings.Study.Title
	}
	fmt.Fprintf(w, "%s\n%s: commit %s, kernel %s, %s x%d; load average %s at the start, %s at the end\n",
		title, m.Date, m.commitText(), m.Kernel, m.CPUModel, m.NProc, m.LoadAvgStart, m.LoadAvgEnd)
	if r.Settings.Study != nil {
		fmt.Fprintf(w, "method: %s\n", r.Settings.Study.Method)
	}
	for _, u := range r.Unavailable {
		fmt.Fprintf(w, "%s %s: not available on this kernel: %s\n", u.Group, u.Config, u.Reason)
	}
	for _, key := range r.caseKeys() {
		fmt.Fprintf(w, "\n%s: %s\n", key.group, key.cas)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "METRIC\tCONFIG\tN\tMEDIAN\tIQR\tMEAN ± STD\tRATIO\t95% CI\tVERDICT\t")
		for _, s := range r.Series {
			if s.Group != key.group || s.Case != key.cas {
				continue
			}
			row := reportRowOf(s)
			warn := ""
			if row.Warning != "" {
				warn = " (!)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s%s\t\n", s.Metric+" "+s.Unit, row.Config, row.N, row.Median, row.IQR, row.MeanStd, row.Ratio, row.CI, row.Verdict, warn)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, d := range r.Derived {
		fmt.Fprintf(w, "%s %s %s: %s %.4g %s (95%% CI %.4g to %.4g)\n", d.Group, d.Case, d.Config, d.Name, d.Value, d.Unit, d.Low, d.High)
	}
	fmt.Fprintln(w, "\n(!): the baseline's own spread exceeds the effect; verdicts come from the ratio's 95% bootstrap interval")
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
