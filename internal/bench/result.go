package bench

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SchemaVersion names the layout of the result files; bump it when a field
// changes meaning.
const SchemaVersion = "rttscope-bench/2"

// Groups of series.
const (
	GroupTestRun = "test_run" // BPF_PROG_TEST_RUN, no traffic
	GroupLive    = "live"     // TCP traffic through the lab, bpf_stats
	GroupLoad    = "load"     // many flows / UDP through the lab, monitor modes
	GroupEvents  = "events"   // user-space RTT event consumption
)

// Programs compared.
const (
	ProgNone     = "none"     // nothing attached (live throughput baseline)
	ProgEmpty    = "empty"    // bpf/empty.c: cost of running any tc program
	ProgRttscope = "rttscope" // the rttscope tc programs
)

// Metrics and their units.
const (
	MetricNsPerRun    = "ns_per_run"    // TEST_RUN: kernel-timed mean per run
	MetricNsPerPacket = "ns_per_packet" // live: delta run_time_ns / delta run_cnt
	MetricPacketsPerS = "packets_per_s" // live: interface packet counter rate
	MetricThroughput  = "mbit_per_s"    // live: goodput received by the sink
)

// Series is one measured quantity of one configuration: a value per
// repetition, in the order the repetitions ran.
type Series struct {
	Group   string `json:"group"`
	Case    string `json:"case"`    // packet type (test_run) or traffic (live)
	Program string `json:"program"` // none, empty, rttscope
	Hook    string `json:"hook"`    // egress, ingress, or "" when not per hook
	Metric  string `json:"metric"`
	Unit    string `json:"unit"`
	// Mode says how one value was obtained (e.g. "repeat=200000",
	// "single-run median of 2000").
	Mode   string    `json:"mode,omitempty"`
	Values []float64 `json:"values"`
	// Missing counts repetitions that gave no value (e.g. no packet ran).
	Missing int `json:"missing,omitempty"`
	// RepLoad1 is the machine's 1-minute load average read before each
	// repetition (parallel to Values; studies only).
	RepLoad1 []float64 `json:"rep_load1,omitempty"`
	// Baseline is the ID of the series this one is compared with.
	Baseline string   `json:"baseline,omitempty"`
	Summary  Summary  `json:"summary"`
	Compare  *Compare `json:"compare,omitempty"`
}

// Compare relates a series to its baseline.
type Compare struct {
	// Ratio is median / baseline median.
	Ratio float64 `json:"ratio"`
	// Delta is median - baseline median (e.g. the ns a program adds over
	// the empty program).
	Delta float64 `json:"delta"`
	// PairedRatio is the median over repetitions of value / baseline
	// value of the same repetition (they ran next to each other).
	PairedRatio *float64 `json:"paired_ratio,omitempty"`
	// Geo is the geometric mean of the paired ratios, CILow and CIHigh
	// its 95 % confidence interval (RatioCI); absent with fewer than
	// two pairs.
	Geo    *float64 `json:"paired_geomean,omitempty"`
	CILow  *float64 `json:"paired_ci95_low,omitempty"`
	CIHigh *float64 `json:"paired_ci95_high,omitempty"`
	// MeanRatio is mean / baseline mean; RatioLow and RatioHigh its 95 %
	// bootstrap confidence interval (BootstrapRatio, paired when both
	// series have every rep), and DeltaLow/DeltaHigh that of the
	// difference of the means.
	MeanRatio *float64 `json:"mean_ratio,omitempty"`
	RatioLow  *float64 `json:"ratio_ci95_low,omitempty"`
	RatioHigh *float64 `json:"ratio_ci95_high,omitempty"`
	DeltaLow  *float64 `json:"delta_ci95_low,omitempty"`
	DeltaHigh *float64 `json:"delta_ci95_high,omitempty"`
	// Verdict reads the ratio's interval (VerdictOf): faster, slower,
	// higher, lower or "no difference at this noise".
	Verdict string `json:"verdict,omitempty"`
	// Warning is set when the baseline's own spread exceeds the effect
	// (NoiseWarning).
	Warning string `json:"warning,omitempty"`
}

// ID identifies a series inside one result.
func (s *Series) ID() string {
	return strings.Join([]string{s.Group, s.Case, s.Program, s.Hook, s.Metric}, "/")
}

// Add records one repetition's value; a value that is not finite counts
// as missing (JSON cannot hold it and it means nothing was measured).
func (s *Series) Add(v float64) {
	if !finite(v) {
		s.Missing++
		return
	}
	s.Values = append(s.Values, v)
}

// AddWithLoad records a value with the load average read before its
// repetition.
func (s *Series) AddWithLoad(v, load1 float64) {
	if !finite(v) {
		s.Missing++
		return
	}
	s.Values = append(s.Values, v)
	s.RepLoad1 = append(s.RepLoad1, load1)
}

// Machine records where and on what a result was measured.
type Machine struct {
	CPUModel  string `json:"cpu_model"`
	NProc     int    `json:"nproc"`
	Kernel    string `json:"kernel"`
	Arch      string `json:"arch"`
	GoVersion string `json:"go_version"`
	Commit    string `json:"commit"`
	Dirty     bool   `json:"dirty"`
	Date      string `json:"date"` // UTC, RFC 3339, when the run started
	// LoadAvg is /proc/loadavg at the start and end of the run: a hint of
	// how busy the shared machine was.
	LoadAvgStart string `json:"loadavg_start,omitempty"`
	LoadAvgEnd   string `json:"loadavg_end,omitempty"`
	// BPFStatsEnabled is kernel.bpf_stats_enabled as found at the start.
	BPFStatsEnabled string `json:"bpf_stats_enabled_at_start,omitempty"`
	// Command is the command line of the run.
	Command string `json:"command_line,omitempty"`
	// BPFJIT is net.core.bpf_jit_enable.
	BPFJIT string `json:"bpf_jit_enable,omitempty"`
}

// Result is everything one bench run recorded.
type Result struct {
	Schema   string    `json:"schema"`
	Name     string    `json:"name"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`
	Series   []*Series `json:"series"`
	// Windows are the raw counters of every live measurement window.
	Windows []LiveWindow `json:"live_windows,omitempty"`
	// LoadWindows are the raw counters of every load measurement window.
	LoadWindows []LoadWindow `json:"load_windows,omitempty"`
	// Runs are the windows of a study (study.go), warm-up rounds included.
	Runs []StudyRun `json:"runs,omitempty"`
	// Derived are figures computed from several series.
	Derived []Derived `json:"derived,omitempty"`
	// Unavailable are a study's configurations this machine could not run.
	Unavailable []UnavailableConfig `json:"unavailable,omitempty"`
	// EventsRuns are the raw records of the events phase.
	EventsRuns []EventsRun `json:"events_runs,omitempty"`
	// Targets are the performance targets (bench/README.md) with what
	// was measured against them (reported, not asserted).
	Targets []Target `json:"targets,omitempty"`
	// Checks are sanity facts gathered while measuring (e.g. that the
	// matching ACKs really produced RTT events).
	Checks map[string]uint64 `json:"checks,omitempty"`
	Notes  []string          `json:"notes,omitempty"`
}

// Settings are the parameters the run used.
type Settings struct {
	Reps          int    `json:"reps"`
	Repeat        int    `json:"test_run_repeat"`
	Pairs         int    `json:"test_run_pairs"`
	Warmup        string `json:"live_warmup"`
	Duration      string `json:"live_duration"`
	Path          string `json:"live_path"`
	Pacing        string `json:"live_pacing"`
	DelayMethod   string `json:"live_delay_method,omitempty"`
	Attach        string `json:"live_attach,omitempty"`
	StatsMethod   string `json:"bpf_stats_method,omitempty"`
	BPFConfig     string `json:"bpf_config"`
	Order         string `json:"order"`
	TestRunPhase  bool   `json:"test_run"`
	LivePhase     bool   `json:"live"`
	LiveInterface string `json:"live_interface,omitempty"`
	LoadPhase     bool   `json:"load"`
	StepsPhase    bool   `json:"steps"`
	// CompareBinary is the previous build the steps phase compared with.
	CompareBinary string `json:"compare_binary,omitempty"`
	CompareMode   string `json:"compare_mode,omitempty"`
	EventsPhase   bool   `json:"events"`
	// Load and Events are the settings of those phases when they ran.
	Load   *LoadSettings   `json:"load_settings,omitempty"`
	Study  *StudySettings  `json:"study,omitempty"`
	Events *EventsSettings `json:"events_settings,omitempty"`
}

// Lookup returns the series with the given ID, or nil.
func (r *Result) Lookup(id string) *Series {
	for _, s := range r.Series {
		if s.ID() == id {
			return s
		}
	}
	return nil
}

// Series returns the series for the key, creating it (in order of first
// use) when needed.
func (r *Result) series(group, cas, prog, hook, metric, unit, mode string) *Series {
	k := Series{Group: group, Case: cas, Program: prog, Hook: hook, Metric: metric}
	if s := r.Lookup(k.ID()); s != nil {
		return s
	}
	s := &Series{Group: group, Case: cas, Program: prog, Hook: hook, Metric: metric, Unit: unit, Mode: mode}
	r.Series = append(r.Series, s)
	return s
}

// Finalize computes every summary and every comparison with a baseline.
// Series whose Baseline names no series (or one without values) get no
// comparison.
func (r *Result) Finalize() {
	for _, s := range r.Series {
		s.Summary = Summarize(s.Values)
	}
	for _, s := range r.Series {
		s.Compare = nil
		if s.Baseline == "" || s.Summary.N == 0 {
			continue
		}
		b := r.Lookup(s.Baseline)
		if b == nil || b.Summary.N == 0 {
			continue
		}
		ratio, ok := Ratio(s.Summary.Median, b.Summary.Median)
		if !ok {
			continue
		}
		c := &Compare{Ratio: ratio, Delta: s.Summary.Median - b.Summary.Median}
		if pr := PairedRatios(s.Values, b.Values); len(pr) > 0 && s.Missing == 0 && b.Missing == 0 {
			m := Median(pr)
			c.PairedRatio = &m
			if g, lo, hi, ok := RatioCI(pr); ok {
				c.Geo, c.CILow, c.CIHigh = &g, &lo, &hi
			}
		}
		fillBootstrap(c, s, b)
		s.Compare = c
	}
}

// fillBootstrap adds the bootstrap intervals, the verdict and the noise
// warning of s against its baseline b.
func fillBootstrap(c *Compare, s, b *Series) {
	paired := s.Missing == 0 && b.Missing == 0 && len(s.Values) == len(b.Values)
	if mr, ok := Ratio(s.Summary.Mean, b.Summary.Mean); ok {
		c.MeanRatio = &mr
		c.Warning = NoiseWarning(b.Summary, mr)
	}
	lo, hi, ok := BootstrapRatio(s.Values, b.Values, paired)
	if !ok {
		return
	}
	c.RatioLow, c.RatioHigh = &lo, &hi
	c.Verdict = VerdictOf(lo, hi, MetricDirection(s.Metric))
	if dl, dh, ok := BootstrapDiff(s.Values, b.Values, paired); ok {
		c.DeltaLow, c.DeltaHigh = &dl, &dh
	}
}

// WriteFiles writes the result as NAME-TIMESTAMP.json and .csv into dir
// (created if needed), TIMESTAMP being the UTC start time, and returns the
// two paths. Existing files are never overwritten.
func WriteFiles(dir string, r *Result) (jsonPath, csvPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	base := filepath.Join(dir, FileBase(r.Name, r.Started))
	jsonPath, csvPath = base+".json", base+".csv"
	if err := writeNew(jsonPath, func(w io.Writer) error { return WriteJSON(w, r) }); err != nil {
		return "", "", err
	}
	if err := writeNew(csvPath, func(w io.Writer) error { return WriteCSV(w, r) }); err != nil {
		return jsonPath, "", err
	}
	return jsonPath, csvPath, nil
}

// FileBase is the file name without extension for a result named name
// that started at t: NAME-YYYYMMDDTHHMMSSZ.
func FileBase(name string, t time.Time) string {
	if name == "" {
		name = "rttscope"
	}
	return name + "-" + t.UTC().Format("20060102T150405Z")
}

func writeNew(path string, fill func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		_ = os.Remove(path) // the fill error is the one to report
		return err
	}
	return f.Close()
}

// WriteJSON writes r as indented JSON.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// CSVHeader is the first line of the CSV file. Every row carries the
// machine columns so that rows of many files can be concatenated. Rows of
// kind "rep" hold one repetition's value; rows of kind "summary" hold the
// summary of a series and its comparison with the baseline.
var CSVHeader = []string{
	"kind", "group", "case", "program", "hook", "metric", "unit", "mode",
	"rep", "value", "load1",
	"n", "missing", "median", "q1", "q3", "min", "max", "mean", "std",
	"baseline", "ratio", "delta", "paired_ratio",
	"mean_ratio", "ratio_ci95_low", "ratio_ci95_high", "verdict", "warning",
	"date", "commit", "dirty", "kernel", "cpu_model", "nproc", "go_version",
}

// WriteCSV writes r as CSV (see CSVHeader).
func WriteCSV(w io.Writer, r *Result) error {
	cw := csv.NewWriter(w)
	m := r.Machine
	machine := []string{m.Date, m.Commit, strconv.FormatBool(m.Dirty), m.Kernel, m.CPUModel, strconv.Itoa(m.NProc), m.GoVersion}
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	for _, s := range r.Series {
		key := []string{s.Group, s.Case, s.Program, s.Hook, s.Metric, s.Unit, s.Mode}
		for i, v := range s.Values {
			row := append([]string{"rep"}, key...)
			load := ""
			if i < len(s.RepLoad1) {
				load = num(s.RepLoad1[i])
			}
			row = append(row, strconv.Itoa(i+1), num(v), load)
			row = append(row, make([]string, 18)...)
			if err := cw.Write(append(row, machine...)); err != nil {
				return err
			}
		}
	}
	for _, s := range r.Series {
		key := []string{s.Group, s.Case, s.Program, s.Hook, s.Metric, s.Unit, s.Mode}
		row := append([]string{"summary"}, key...)
		row = append(row, "", "", "")
		sm := s.Summary
		if sm.N == 0 {
			row = append(row, "0", strconv.Itoa(s.Missing), "", "", "", "", "", "", "")
		} else {
			row = append(row, strconv.Itoa(sm.N), strconv.Itoa(s.Missing), num(sm.Median), num(sm.Q1), num(sm.Q3), num(sm.Min), num(sm.Max), num(sm.Mean), num(sm.Std))
		}
		cmp := make([]string, 8)
		if c := s.Compare; c != nil {
			cmp = []string{num(c.Ratio), num(c.Delta), optNum(c.PairedRatio), optNum(c.MeanRatio), optNum(c.RatioLow), optNum(c.RatioHigh), c.Verdict, c.Warning}
		}
		row = append(append(row, s.Baseline), cmp...)
		if err := cw.Write(append(row, machine...)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func optNum(v *float64) string {
	if v == nil {
		return ""
	}
	return num(*v)
}

// num formats a value with up to 4 decimals and no trailing zeros.
func num(v float64) string {
	if !finite(v) {
		return ""
	}
	return strconv.FormatFloat(math.Round(v*1e4)/1e4, 'f', -1, 64)
}

// ParseCPUModel returns the first "model name" of a /proc/cpuinfo text
// (or the "Hardware"/"Processor" line some ARM kernels use instead).
func ParseCPUModel(cpuinfo string) string {
	var fallback string
	for _, line := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name":
			if v != "" {
				return v
			}
		case "Hardware", "Processor", "cpu model":
			if fallback == "" {
				fallback = v
			}
		}
	}
	if fallback == "" {
		return "unknown"
	}
	return fallback
}
