package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rttscope/rttscope/internal/lab"
)

// A study is one of the experiments of `rttscope bench forwarding`,
// `monitor` and `hooks`: traffic cases, each measured under every
// configuration (router mode, monitor, BPF program) in interleaved
// rounds, with the same method everywhere (Method).

// Method is how every study measures.
type Method struct {
	Reps         int           // measured rounds per case
	WarmupRounds int           // rounds run first and discarded
	Warmup       time.Duration // inside each window, after the configuration is set up, before the first reading
	Duration     time.Duration // measured time per window
	Settle       time.Duration // traffic before each case's first round
	// CPUs, when not empty, pins this process (traffic generators, sinks,
	// the lab's delay line) and the processes it starts to these CPUs
	// (pin.go); CPU figures then count these CPUs only.
	CPUs []int
}

// DefaultMethod: 10 repetitions of 3 s after a discarded warm-up round.
func DefaultMethod() Method {
	return Method{Reps: 10, WarmupRounds: 1, Warmup: time.Second, Duration: 3 * time.Second, Settle: 2 * time.Second}
}

func (m Method) validate() error {
	switch {
	case m.Reps < 1:
		return fmt.Errorf("reps must be >= 1, got %d", m.Reps)
	case m.WarmupRounds < 0:
		return fmt.Errorf("warm-up rounds must be >= 0, got %d", m.WarmupRounds)
	case m.Duration < 100*time.Millisecond:
		return fmt.Errorf("duration must be >= 100ms, got %v", m.Duration)
	case m.Warmup < 0 || m.Settle < 0:
		return errors.New("warm-up and settle must be >= 0")
	}
	return validCPUs(m.CPUs)
}

func (m Method) text() string {
	pin := "no CPU pinning"
	if len(m.CPUs) > 0 {
		pin = "this process and its children pinned to CPUs " + cpuList(m.CPUs) + " (CPU figures count those CPUs)"
	}
	return fmt.Sprintf("%d measured rounds after %d discarded warm-up round(s); per window %v of traffic after the configuration is set up, then %v measured; "+
		"per case %v of traffic before the first round; configurations in rotated order, reversed every other round (A B C, C B A, B C A, A C B, ...); "+
		"1-minute load average read before every window; %s",
		m.Reps, m.WarmupRounds, m.Warmup, m.Duration, m.Settle, pin)
}

// StudyConfig is one configuration of a study.
type StudyConfig struct {
	Name string
	// Unavailable says why this machine cannot run it (from a probe):
	// it is reported as a row, never measured.
	Unavailable string
	// Setup applies the configuration before a window; the returned
	// teardown undoes it. nil Setup: nothing to do (the baseline).
	Setup func(ctx context.Context) (teardown func() error, err error)
}

// StudyCase is one traffic pattern of a study.
type StudyCase struct {
	Name string
	// Start starts the traffic; stop ends it.
	Start func(ctx context.Context) (stop func() error, err error)
}

// MetricSpec describes one value a window returns.
type MetricSpec struct {
	Name, Unit, How string
	// Primary metrics get box plots and time series in the report.
	Primary bool
}

// Study is one experiment.
type Study struct {
	Group   string // e.g. "forwarding": the series' group
	Title   string
	Cases   []StudyCase
	Configs []StudyConfig // Configs[0] is the baseline
	Metrics []MetricSpec
	// Window measures one window (the configuration is set up and warmed
	// up): the values of Metrics (a missing or NaN one counts as missing)
	// and a raw record kept in the JSON.
	Window func(ctx context.Context, c StudyCase, cfg StudyConfig) (map[string]float64, any, error)
	// Details are study-specific settings recorded in the result.
	Details map[string]string
	Method  Method
}

// StudyRun is the record of one window, in the order they ran.
type StudyRun struct {
	Seq     int                `json:"seq"`
	Case    string             `json:"case"`
	Config  string             `json:"config"`
	Round   int                `json:"round"` // 1-based; warm-up rounds are <= 0
	Warmup  bool               `json:"warmup,omitempty"`
	Start   time.Time          `json:"start"`
	Load1   float64            `json:"load1"`
	Values  map[string]float64 `json:"values"`
	Raw     json.RawMessage    `json:"raw,omitempty"`
	Seconds float64            `json:"seconds"`
	// Error is why the window gave no values (they count as missing).
	Error string `json:"error,omitempty"`
}

// maxWindowFailures is how many failed windows in a row end a run.
const maxWindowFailures = 3

// UnavailableConfig is a configuration this machine could not run.
type UnavailableConfig struct {
	Group  string `json:"group"`
	Config string `json:"config"`
	Reason string `json:"reason"`
}

// StudySettings are the parameters of a study run.
type StudySettings struct {
	Title    string            `json:"title"`
	Method   string            `json:"method"`
	Baseline string            `json:"baseline"`
	Cases    []string          `json:"cases"`
	Configs  []string          `json:"configs"`
	Metrics  []MetricSpec      `json:"metrics"`
	Details  map[string]string `json:"details,omitempty"`
}

// newStudyResult starts the result of a study named name.
func newStudyResult(name string, st *Study) *Result {
	start := time.Now()
	res := &Result{
		Schema:  SchemaVersion,
		Name:    name,
		Started: start.UTC(),
		Machine: CollectMachine(start),
		Checks:  map[string]uint64{},
	}
	res.Settings.Reps = st.Method.Reps
	res.Settings.Order = st.Method.text()
	ss := &StudySettings{Title: st.Title, Method: st.Method.text(), Baseline: st.Configs[0].Name, Details: st.Details}
	for _, c := range st.Cases {
		ss.Cases = append(ss.Cases, c.Name)
	}
	for _, c := range st.Configs {
		ss.Configs = append(ss.Configs, c.Name)
	}
	ss.Metrics = st.Metrics
	res.Settings.Study = ss
	return res
}

// RunStudy measures st and returns its result (no files written). Every
// case's traffic runs throughout its rounds; every configuration is set up
// and torn down around each of its windows. A configuration whose set-up
// fails the first time is reported unavailable with the error; a window
// that fails later (set-up, measurement or tear-down) is recorded with its
// error and its values missing, and the run goes on, unless
// maxWindowFailures fail in a row. When the run ends early (that, or
// Ctrl-C), the result of what was measured is returned with the error,
// noted as partial.
func RunStudy(ctx context.Context, name string, st *Study, progress io.Writer) (_ *Result, err error) {
	if err := st.Method.validate(); err != nil {
		return nil, err
	}
	if len(st.Configs) == 0 || len(st.Cases) == 0 {
		return nil, errors.New("study without configurations or cases")
	}
	if st.Configs[0].Unavailable != "" {
		return nil, fmt.Errorf("the baseline %q is not available: %s", st.Configs[0].Name, st.Configs[0].Unavailable)
	}
	res := newStudyResult(name, st)
	if len(st.Method.CPUs) > 0 {
		unpin, err := pinSelf(st.Method.CPUs)
		if err != nil {
			return nil, err
		}
		defer unpin()
	}
	say := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, "bench %s: "+format+"\n", append([]any{st.Group}, args...)...)
		}
	}
	configs := append([]StudyConfig(nil), st.Configs...)
	r := &studyRunner{st: st, res: res, say: say}
	var runErr error
	for _, c := range st.Cases {
		if err := r.runCase(ctx, c, configs); err != nil {
			runErr = fmt.Errorf("%s: %w", c.Name, err)
			res.Notes = append(res.Notes, "partial result: the run ended early: "+runErr.Error())
			break
		}
	}
	for _, c := range configs {
		if c.Unavailable != "" {
			res.Unavailable = append(res.Unavailable, UnavailableConfig{Group: st.Group, Config: c.Name, Reason: c.Unavailable})
		}
	}
	res.Finished = time.Now().UTC()
	res.Machine.LoadAvgEnd = readTrim("/proc/loadavg")
	sortStudySeries(res)
	res.Finalize()
	return res, runErr
}

// sortStudySeries orders the series by case, then metric, then
// configuration, each in the study's order (they were created in the order the
// first round happened to run them).
func sortStudySeries(res *Result) {
	if res.Settings.Study == nil {
		return
	}
	index := func(names []string) map[string]int {
		m := map[string]int{}
		for i, n := range names {
			m[n] = i
		}
		return m
	}
	cases, configs, metrics := index(res.Settings.Study.Cases), index(res.Settings.Study.Configs), map[string]int{}
	for i, m := range res.Settings.Study.Metrics {
		metrics[m.Name] = i
	}
	slices.SortStableFunc(res.Series, func(a, b *Series) int {
		return cmp.Or(cmp.Compare(cases[a.Case], cases[b.Case]), cmp.Compare(metrics[a.Metric], metrics[b.Metric]), cmp.Compare(configs[a.Program], configs[b.Program]))
	})
}

type studyRunner struct {
	st  *Study
	res *Result
	say func(string, ...any)
	seq int
}

func (r *studyRunner) runCase(ctx context.Context, c StudyCase, configs []StudyConfig) (err error) {
	stop, err := c.Start(ctx)
	if err != nil {
		return fmt.Errorf("start traffic: %w", err)
	}
	defer func() {
		if serr := stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop traffic: %w", serr))
		}
	}()
	if err := sleepCtx(ctx, r.st.Method.Settle); err != nil {
		return err
	}
	m := r.st.Method
	failures := 0
	for round := 1 - m.WarmupRounds; round <= m.Reps; round++ {
		for _, i := range roundOrder(len(configs), round+m.WarmupRounds-1) {
			cfg := &configs[i]
			if cfg.Unavailable != "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			run, err := r.window(ctx, c, cfg, round)
			if err != nil {
				// A failed window (a monitor that would not stop,
				// say) is recorded and the run goes on; several in a
				// row, or a cancelled run, end it.
				failures++
				if ctx.Err() != nil || failures > maxWindowFailures {
					return fmt.Errorf("round %d, %s: %w", round, cfg.Name, err)
				}
				r.say("%s round %d %s: window failed, recorded as missing: %v", c.Name, round, cfg.Name, err)
				run = &StudyRun{Seq: r.seq, Case: c.Name, Config: cfg.Name, Round: round, Warmup: round <= 0, Start: time.Now().UTC(), Error: err.Error()}
			} else if run != nil {
				failures = 0
			}
			if run == nil {
				continue // became unavailable
			}
			r.res.Runs = append(r.res.Runs, *run)
			if !run.Warmup {
				r.record(c, cfg, run)
			}
		}
	}
	return nil
}

// window sets up cfg, measures, tears it down. It returns nil (and marks
// cfg unavailable) when the first set-up of cfg fails.
func (r *studyRunner) window(ctx context.Context, c StudyCase, cfg *StudyConfig, round int) (_ *StudyRun, err error) {
	r.seq++
	run := &StudyRun{Seq: r.seq, Case: c.Name, Config: cfg.Name, Round: round, Warmup: round <= 0, Start: time.Now().UTC(), Load1: load1()}
	if cfg.Setup != nil {
		teardown, err := cfg.Setup(ctx)
		if err != nil {
			if !r.seen(cfg.Name) {
				cfg.Unavailable = "set-up failed: " + err.Error()
				r.say("%s: %s not available: %v", c.Name, cfg.Name, err)
				return nil, nil
			}
			return nil, err
		}
		defer func() {
			if terr := teardown(); terr != nil {
				err = errors.Join(err, fmt.Errorf("tear down %s: %w", cfg.Name, terr))
			}
		}()
	}
	if err := sleepCtx(ctx, r.st.Method.Warmup); err != nil {
		return nil, err
	}
	t0 := time.Now()
	vals, raw, err := r.st.Window(ctx, c, *cfg)
	if err != nil {
		return nil, err
	}
	run.Seconds = time.Since(t0).Seconds()
	run.Values = map[string]float64{}
	for k, v := range vals {
		if finite(v) {
			run.Values[k] = v
		}
	}
	if raw != nil {
		if run.Raw, err = json.Marshal(raw); err != nil {
			return nil, err
		}
	}
	tag := ""
	if run.Warmup {
		tag = " (warm-up, discarded)"
	}
	r.say("%s round %d/%d %-14s %s%s", c.Name, round, r.st.Method.Reps, cfg.Name, r.brief(vals), tag)
	return run, nil
}

// seen reports whether a window of the configuration already ran.
func (r *studyRunner) seen(config string) bool {
	for _, run := range r.res.Runs {
		if run.Config == config {
			return true
		}
	}
	return false
}

func (r *studyRunner) brief(vals map[string]float64) string {
	var parts []string
	for _, m := range r.st.Metrics {
		if v, ok := vals[m.Name]; ok && m.Primary && finite(v) {
			parts = append(parts, fmt.Sprintf("%s %s %s", m.Name, strconv.FormatFloat(v, 'g', 4, 64), m.Unit))
		}
	}
	return strings.Join(parts, ", ")
}

func (r *studyRunner) record(c StudyCase, cfg *StudyConfig, run *StudyRun) {
	base := r.st.Configs[0].Name
	for _, m := range r.st.Metrics {
		v, ok := run.Values[m.Name]
		if !ok {
			v = nan()
		}
		s := r.res.series(r.st.Group, c.Name, cfg.Name, "", m.Name, m.Unit, m.How)
		if cfg.Name != base {
			s.Baseline = seriesID(r.st.Group, c.Name, base, "", m.Name)
		}
		s.AddWithLoad(v, run.Load1)
	}
}

// roundOrder is the order of n configurations in round k (0-based):
// rotated by one every two rounds and reversed on every odd round, so that
// no configuration always follows the same one (A B C, C B A, B C A,
// A C B, ...).
func roundOrder(n, k int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	order := rotate(idx, k/2)
	if k%2 == 1 {
		order = reversed(order)
	}
	return order
}

// load1 is the 1-minute load average (0 when unreadable, which Linux's
// /proc/loadavg never is).
func load1() float64 {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// closeLab removes a run's lab (deferred), joining its error to *err.
func closeLab(l *lab.Lab, err *error) {
	if cerr := l.Close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("remove lab: %w", cerr))
	}
}

// commandLine is how this process was started.
func commandLine() string { return strings.Join(os.Args, " ") }
