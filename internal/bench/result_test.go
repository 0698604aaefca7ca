package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sample is a small result as the bench would produce it: a baseline and
// a compared series in each group.
func sample() *Result {
	start := time.Date(2026, 3, 4, 5, 6, 7, 800, time.UTC)
	r := &Result{
		Schema:  SchemaVersion,
		Name:    "unit",
		Started: start,
		Machine: Machine{CPUModel: "Test CPU, 2 GHz", NProc: 2, Kernel: "6.18.0", Arch: "amd64",
			GoVersion: "go1.26", Commit: "abc1234", Dirty: true, Date: start.Format(time.RFC3339)},
		Settings: Settings{Reps: 3, Repeat: 1000, Pairs: 10, TestRunPhase: true, LivePhase: true},
		Checks:   map[string]uint64{"test_run_pairs": 30},
	}
	e := r.series(GroupTestRun, CaseTCPData, ProgEmpty, "", MetricNsPerRun, "ns", "repeat=1000")
	for _, v := range []float64{10, 12, 11} {
		e.Add(v)
	}
	g := r.series(GroupTestRun, CaseTCPData, ProgRttscope, "egress", MetricNsPerRun, "ns", "repeat=1000")
	g.Baseline = e.ID()
	for _, v := range []float64{40, 36, 44} {
		g.Add(v)
	}
	n := r.series(GroupLive, CaseTCPBulk, ProgNone, "", MetricThroughput, "Mbit/s", "")
	for _, v := range []float64{500, 500, 500} {
		n.Add(v)
	}
	l := r.series(GroupLive, CaseTCPBulk, ProgRttscope, "", MetricThroughput, "Mbit/s", "")
	l.Baseline = n.ID()
	l.Add(490)
	l.Add(math.NaN()) // a window that measured nothing
	l.Add(495)
	return r
}

func TestSeriesLookupAndReuse(t *testing.T) {
	r := sample()
	s := r.series(GroupTestRun, CaseTCPData, ProgEmpty, "", MetricNsPerRun, "ns", "other mode")
	if len(s.Values) != 3 || s.Mode != "repeat=1000" {
		t.Errorf("series() created a second series for an existing key: %+v", s)
	}
	if r.Lookup("test_run/tcp-data-ts/rttscope/egress/ns_per_run") == nil {
		t.Error("Lookup by ID failed")
	}
	if r.Lookup("nope") != nil {
		t.Error("Lookup of an unknown ID must be nil")
	}
}

func TestFinalize(t *testing.T) {
	r := sample()
	r.Finalize()
	g := r.Lookup("test_run/tcp-data-ts/rttscope/egress/ns_per_run")
	if g.Summary.Median != 40 || g.Summary.N != 3 {
		t.Errorf("summary = %+v", g.Summary)
	}
	c := g.Compare
	if c == nil || !near(c.Ratio, 40.0/11) || c.Delta != 29 {
		t.Fatalf("compare = %+v, want ratio 40/11, delta 29", c)
	}
	// Paired: 40/10, 36/12, 44/11 = 4, 3, 4.
	if c.PairedRatio == nil || *c.PairedRatio != 4 {
		t.Errorf("paired ratio = %v, want 4", c.PairedRatio)
	}
	if e := r.Lookup("test_run/tcp-data-ts/empty//ns_per_run"); e.Compare != nil {
		t.Errorf("the baseline itself got a comparison: %+v", e.Compare)
	}
	l := r.Lookup("live/tcp-bulk/rttscope//mbit_per_s")
	if l.Missing != 1 || l.Summary.N != 2 {
		t.Errorf("NaN must count as missing: missing %d, n %d", l.Missing, l.Summary.N)
	}
	if l.Compare == nil || l.Compare.PairedRatio != nil {
		t.Errorf("with a missing rep the reps no longer pair up: %+v", l.Compare)
	}
	// A baseline that does not exist leaves no comparison.
	g.Baseline = "test_run/x/empty//ns_per_run"
	r.Finalize()
	if g.Compare != nil {
		t.Errorf("comparison against a missing baseline: %+v", g.Compare)
	}
}

func TestFileBase(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	if got := FileBase("rttscope", ts); got != "rttscope-20260102T020405Z" {
		t.Errorf("FileBase = %q", got)
	}
	if got := FileBase("", ts); !strings.HasPrefix(got, "rttscope-") {
		t.Errorf("empty name: %q", got)
	}
}

func TestWriteFiles(t *testing.T) {
	r := sample()
	r.Finalize()
	dir := filepath.Join(t.TempDir(), "results", "sub")
	jp, cp, err := WriteFiles(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(jp) != "unit-20260304T050607Z.json" || filepath.Base(cp) != "unit-20260304T050607Z.csv" {
		t.Errorf("paths %s %s", jp, cp)
	}

	// JSON: round trip keeps machine, series and comparisons.
	b, err := os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	if back.Schema != SchemaVersion || back.Machine != r.Machine || len(back.Series) != len(r.Series) {
		t.Errorf("round trip lost data: %+v", back.Machine)
	}
	if g := back.Lookup("test_run/tcp-data-ts/rttscope/egress/ns_per_run"); g == nil || g.Compare == nil || g.Baseline == "" {
		t.Errorf("compared series lost its comparison: %+v", g)
	}
	if back.Checks["test_run_pairs"] != 30 {
		t.Errorf("checks lost: %v", back.Checks)
	}

	// CSV: header, one row per rep value and one summary per series,
	// machine columns on every row.
	f, err := os.Open(cp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v", err)
	}
	if strings.Join(rows[0], ",") != strings.Join(CSVHeader, ",") {
		t.Errorf("header = %v", rows[0])
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	reps, sums := 0, 0
	for _, row := range rows[1:] {
		if len(row) != len(CSVHeader) {
			t.Fatalf("row with %d columns: %v", len(row), row)
		}
		if row[col["commit"]] != "abc1234" || row[col["dirty"]] != "true" || row[col["cpu_model"]] != "Test CPU, 2 GHz" || row[col["kernel"]] != "6.18.0" {
			t.Errorf("machine columns missing: %v", row)
		}
		switch row[col["kind"]] {
		case "rep":
			reps++
		case "summary":
			sums++
			if row[col["program"]] == ProgRttscope && row[col["group"]] == GroupTestRun {
				if row[col["median"]] != "40" || row[col["delta"]] != "29" || row[col["paired_ratio"]] != "4" || row[col["ratio"]] != "3.6364" {
					t.Errorf("summary row = %v", row)
				}
			}
		default:
			t.Errorf("unknown kind in %v", row)
		}
	}
	if reps != 11 || sums != 4 {
		t.Errorf("%d rep rows and %d summary rows, want 11 and 4", reps, sums)
	}

	// A second write with the same start time must not overwrite.
	if _, _, err := WriteFiles(dir, r); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second WriteFiles: err = %v, want ErrExist", err)
	}
}

func TestWriteJSONHasNoNaN(t *testing.T) {
	r := sample()
	r.Series[0].Add(math.Inf(1))
	r.Finalize()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
}

func TestParseCPUModel(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	if got := ParseCPUModel(x86); got != "AMD EPYC 7B13" {
		t.Errorf("x86: %q", got)
	}
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nHardware\t: BCM2835\n"
	if got := ParseCPUModel(arm); got != "BCM2835" {
		t.Errorf("arm: %q", got)
	}
	if got := ParseCPUModel(""); got != "unknown" {
		t.Errorf("empty: %q", got)
	}
}

func TestPrintSummary(t *testing.T) {
	r := sample()
	r.Settings.LivePhase = false // no windows recorded
	r.Notes = []string{"something to know"}
	r.Finalize()
	var buf bytes.Buffer
	if err := PrintSummary(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"commit abc1234-dirty", "tcp-data-ts", "11.0 (10.5-11.5)", "40.0 (38.0-42.0) +29.0 x3.64", "note: something to know"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestCellSigns(t *testing.T) {
	r := sample()
	r.Finalize()
	l := r.Lookup("live/tcp-bulk/rttscope//mbit_per_s")
	l.Compare = &Compare{Ratio: 0.999, Delta: -0.2}
	if got := r.cell(l.ID(), 0); !strings.Contains(got, " +0 x1.00") || !strings.Contains(got, "[1 missing]") {
		t.Errorf("cell = %q, want +0 (not -0) and the missing count", got)
	}
	l.Compare.Delta = -7
	if got := r.cell(l.ID(), 0); !strings.Contains(got, " -7 x") {
		t.Errorf("cell = %q, want -7", got)
	}
	if got := r.cell("no/such/series", 1); got != "-" {
		t.Errorf("missing series cell = %q", got)
	}
}
