package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// The HTML report of a result: one self-contained file (figures inline as
// SVG, no script, no external resource) with the machine, the method, the
// summary table with verdicts and, per case and primary metric, a box plot
// per configuration and the values per repetition. The figures are also
// written as SVG and PNG files beside it.

// reportPlot is a pair of figures of one case and metric.
type reportPlot struct {
	Title    string
	Box, Seq template.HTML
}

// reportRow is one line of a summary table.
type reportRow struct {
	Metric, Unit, Config                                 string
	N, Missing                                           int
	Median, IQR, MeanStd, Ratio, CI, Verdict, VerdictCSS string
	Warning                                              string
	Baseline                                             bool
}

type reportCase struct {
	Group, Case string
	Rows        []reportRow
	Plots       []reportPlot
}

type reportData struct {
	Title, Name string
	R           *Result
	Cases       []reportCase
	Method      string
	Details     map[string]string
	Figures     string // directory of the figure files, relative
}

// ReadResult reads a result file (JSON) and recomputes its summaries and
// comparisons (so that a file of an older schema gets the intervals and
// verdicts too).
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sortStudySeries(&r)
	r.Finalize()
	return &r, nil
}

// RemoveReport removes the report of r in dir and its figures, if any.
func RemoveReport(dir string, r *Result) error {
	base := FileBase(r.Name, r.Started)
	return errors.Join(os.Remove(filepath.Join(dir, base+".html")), os.RemoveAll(filepath.Join(dir, base+"-figures")))
}

// WriteReport writes r as NAME-TIMESTAMP.html into dir and its figures
// into NAME-TIMESTAMP-figures/ (SVG and PNG); it returns the HTML path.
// Existing files are never overwritten.
func WriteReport(dir string, r *Result) (string, error) {
	base := FileBase(r.Name, r.Started)
	figDir := filepath.Join(dir, base+"-figures")
	d := reportData{Title: "rttscope bench " + r.Name, Name: base, R: r, Figures: base + "-figures"}
	if st := r.Settings.Study; st != nil {
		d.Title = st.Title
		d.Method = st.Method
		d.Details = st.Details
	} else {
		d.Method = r.Settings.Order
	}
	var figs []figure
	for _, key := range r.caseKeys() {
		rc, f, err := r.reportCase(key.group, key.cas)
		if err != nil {
			return "", err
		}
		d.Cases = append(d.Cases, rc)
		figs = append(figs, f...)
	}
	var html bytes.Buffer
	if err := reportTemplate.Execute(&html, d); err != nil {
		return "", err
	}
	if err := os.MkdirAll(figDir, 0o755); err != nil {
		return "", err
	}
	for _, f := range figs {
		for ext, b := range map[string][]byte{".svg": f.SVG, ".png": f.PNG} {
			if err := writeNew(filepath.Join(figDir, f.Name+ext), func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
				return "", err
			}
		}
	}
	path := filepath.Join(dir, base+".html")
	return path, writeNew(path, func(w io.Writer) error { _, err := w.Write(html.Bytes()); return err })
}

type caseKey struct{ group, cas string }

// caseKeys lists the (group, case) pairs of the series in order of first
// appearance.
func (r *Result) caseKeys() []caseKey {
	var keys []caseKey
	seen := map[caseKey]bool{}
	for _, s := range r.Series {
		k := caseKey{s.Group, s.Case}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// configName is how a series' configuration is labelled: the program,
// with the hook when the series is per hook.
func configName(s *Series) string {
	if s.Hook != "" {
		return s.Program + "/" + s.Hook
	}
	return s.Program
}

// plotted says whether a metric of the case gets figures: a study's
// primary metrics; for the other phases every metric that reads as faster
// or slower.
func (r *Result) plotted(metric string) bool {
	if st := r.Settings.Study; st != nil {
		for _, m := range st.Metrics {
			if m.Name == metric {
				return m.Primary
			}
		}
		return false
	}
	return MetricDirection(metric) != Neutral
}

func (r *Result) reportCase(group, cas string) (reportCase, []figure, error) {
	rc := reportCase{Group: group, Case: cas}
	var metrics []string
	byMetric := map[string][]*Series{}
	for _, s := range r.Series {
		if s.Group != group || s.Case != cas {
			continue
		}
		if _, ok := byMetric[s.Metric]; !ok {
			metrics = append(metrics, s.Metric)
		}
		byMetric[s.Metric] = append(byMetric[s.Metric], s)
	}
	var figs []figure
	for _, m := range metrics {
		ss := byMetric[m]
		for _, s := range ss {
			rc.Rows = append(rc.Rows, reportRowOf(s))
		}
		if !r.plotted(m) {
			continue
		}
		ps := make([]plotSeries, len(ss))
		for i, s := range ss {
			ps[i] = plotSeries{Config: configName(s), Values: s.Values}
		}
		title := fmt.Sprintf("%s %s: %s", group, cas, m)
		name := fileSafe(group + "-" + cas + "-" + m)
		box, err := boxFigure(name+"-box", title, ss[0].Unit, ps)
		if err != nil {
			return rc, nil, err
		}
		seq, err := seriesFigure(name+"-reps", title+" per repetition", ss[0].Unit, ps)
		if err != nil {
			return rc, nil, err
		}
		figs = append(figs, box, seq)
		rc.Plots = append(rc.Plots, reportPlot{
			Title: fmt.Sprintf("%s (%s)", m, ss[0].Unit),
			// The SVG is produced by gonum/plot from numbers: no
			// user text but configuration names, which it escapes.
			Box: template.HTML(inlineSVG(box.SVG)), //nolint:gosec // generated SVG, see above
			Seq: template.HTML(inlineSVG(seq.SVG)), //nolint:gosec // generated SVG, see above
		})
	}
	return rc, figs, nil
}

func reportRowOf(s *Series) reportRow {
	sm := s.Summary
	row := reportRow{Metric: s.Metric, Unit: s.Unit, Config: configName(s), N: sm.N, Missing: s.Missing, Baseline: s.Baseline == ""}
	if sm.N > 0 {
		row.Median = fmtNum(sm.Median)
		row.IQR = fmtNum(sm.IQR)
		row.MeanStd = fmtNum(sm.Mean) + " ± " + fmtNum(sm.Std)
	}
	if c := s.Compare; c != nil {
		if c.MeanRatio != nil {
			row.Ratio = strconv.FormatFloat(*c.MeanRatio, 'f', 3, 64)
		}
		if c.RatioLow != nil && c.RatioHigh != nil {
			row.CI = fmt.Sprintf("%.3f – %.3f", *c.RatioLow, *c.RatioHigh)
		}
		row.Verdict = c.Verdict
		row.Warning = c.Warning
		switch c.Verdict {
		case VerdictFaster:
			row.VerdictCSS = "good"
		case VerdictSlower:
			row.VerdictCSS = "bad"
		case VerdictNoDiff:
			row.VerdictCSS = "none"
		}
	}
	return row
}

// fmtNum prints 4 significant digits, without exponent for usual sizes.
func fmtNum(v float64) string {
	if !finite(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body{font-family:sans-serif;margin:1.5em;max-width:1500px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:13px}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
td.l,th.l{text-align:left}
tr.base td{background:#f2f2f2}
.good{color:#1a7f37;font-weight:bold}.bad{color:#c0392b;font-weight:bold}.none{color:#666}
.warn{color:#b35900}
.plots{display:flex;flex-wrap:wrap;gap:8px}
.plot{border:1px solid #ddd;background:#fff}
.plot svg{display:block;width:672px;height:346px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;font-size:13px}
dt{font-weight:bold}
</style></head><body>
<h1>{{.Title}}</h1>
<dl>
<dt>result</dt><dd>{{.Name}} (schema {{.R.Schema}})</dd>
<dt>date</dt><dd>{{.R.Machine.Date}} – {{.R.Finished.Format "2006-01-02T15:04:05Z07:00"}}</dd>
<dt>commit</dt><dd>{{.R.Machine.Commit}}{{if .R.Machine.Dirty}} (dirty){{end}}</dd>
<dt>machine</dt><dd>{{.R.Machine.CPUModel}} × {{.R.Machine.NProc}}, kernel {{.R.Machine.Kernel}}, {{.R.Machine.GoVersion}}</dd>
<dt>load average</dt><dd>start {{.R.Machine.LoadAvgStart}}, end {{.R.Machine.LoadAvgEnd}}</dd>
<dt>command</dt><dd><code>{{.R.Machine.Command}}</code></dd>
<dt>method</dt><dd>{{.Method}}</dd>
{{range $k, $v := .Details}}<dt>{{$k}}</dt><dd>{{$v}}</dd>
{{end}}</dl>
<p>Verdicts read the 95 % bootstrap confidence interval of mean / baseline mean (paired by repetition when both
series are complete): an interval that contains 1 is <span class="none">no difference at this noise</span>, whatever the
medians say. A warning marks comparisons where the baseline's own spread (std / mean) exceeds the effect.</p>
{{with .R.Unavailable}}<h2>Not available on this machine</h2>
<table><tr><th class="l">configuration</th><th class="l">reason</th></tr>
{{range .}}<tr><td class="l">{{.Group}} {{.Config}}</td><td class="l">not available on this kernel: {{.Reason}}</td></tr>
{{end}}</table>{{end}}
{{with .R.Derived}}<h2>Derived figures</h2>
<table><tr><th class="l">case</th><th class="l">configuration</th><th class="l">figure</th><th>value</th><th>95 % CI</th><th class="l">how</th></tr>
{{range .}}<tr><td class="l">{{.Case}}</td><td class="l">{{.Config}}</td><td class="l">{{.Name}} ({{.Unit}})</td><td>{{printf "%.4g" .Value}}</td>
<td>{{printf "%.4g" .Low}} – {{printf "%.4g" .High}}</td><td class="l">{{.How}}</td></tr>
{{end}}</table>{{end}}
{{range .Cases}}
<h2>{{.Group}}: {{.Case}}</h2>
<div class="plots">{{range .Plots}}<div class="plot">{{.Box}}</div><div class="plot">{{.Seq}}</div>{{end}}</div>
<table><tr><th class="l">metric</th><th class="l">configuration</th><th>n</th><th>median</th><th>IQR</th><th>mean ± std</th>
<th>ratio</th><th>95 % CI</th><th class="l">verdict</th><th class="l">warning</th></tr>
{{range .Rows}}<tr{{if .Baseline}} class="base"{{end}}><td class="l">{{.Metric}} ({{.Unit}})</td><td class="l">{{.Config}}</td>
<td>{{.N}}{{if .Missing}} (+{{.Missing}} missing){{end}}</td><td>{{.Median}}</td><td>{{.IQR}}</td><td>{{.MeanStd}}</td>
<td>{{.Ratio}}</td><td>{{.CI}}</td><td class="l {{.VerdictCSS}}">{{.Verdict}}</td><td class="l warn">{{.Warning}}</td></tr>
{{end}}</table>
{{end}}
{{with .R.Notes}}<h2>Notes</h2><ul>{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}
<p>Per-repetition values: the CSV and JSON files of the same name. Figures: {{.Figures}}/ (SVG and PNG).</p>
</body></html>
`))
