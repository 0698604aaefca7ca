package bpfprof

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes the profile as text: per program its share of all samples,
// its source files' shares and its top source lines.
func Print(w io.Writer, p *Profile, top int) {
	fmt.Fprintf(w, "%d samples in %s on %d CPUs at %d Hz (cpu-clock)\n", p.Samples, p.Duration, p.CPUs, p.Freq)
	if len(p.Programs) == 0 {
		fmt.Fprintln(w, "no sample in a matching program: is one loaded and is traffic running through it?")
	}
	for _, prog := range p.Programs {
		fmt.Fprintf(w, "\n%s (tag %s, %d B JIT, %d load(s)): %d samples, %s of all\n",
			prog.Name, prog.Tag, prog.JitedSize, prog.Loads, prog.Samples, percent(prog.Samples, p.Samples))
		if prog.Samples == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "samples\tshare\t file\t")
		for _, c := range prog.Files {
			fmt.Fprintf(tw, "%d\t%s\t %s\t\n", c.Samples, percent(c.Samples, prog.Samples), c.File)
		}
		_ = tw.Flush()
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "samples\tshare\tline\tsource")
		for i, c := range prog.Lines {
			if top > 0 && i == top {
				fmt.Fprintf(tw, "...\t\t%d more lines\t\n", len(prog.Lines)-top)
				break
			}
			fmt.Fprintf(tw, "%7d\t%6s\t%s:%d\t%s\n", c.Samples, percent(c.Samples, prog.Samples), c.File, c.Line, clip(c.Text, 72))
		}
		_ = tw.Flush()
	}
	if len(p.NoLineInfo) > 0 {
		fmt.Fprintf(w, "\nwithout JIT line info (JIT off, or built without BTF): %s\n", strings.Join(p.NoLineInfo, ", "))
	}
}

func percent(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}
