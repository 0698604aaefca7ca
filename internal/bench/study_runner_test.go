package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The runner without any lab: a fake case and configurations whose windows
// return fixed values.
func fakeStudy(setupFails map[string]int) (*Study, *[]string) {
	var order []string
	calls := map[string]int{}
	st := &Study{
		Group: "fake", Title: "fake",
		Method:  Method{Reps: 3, WarmupRounds: 1, Duration: 100 * time.Millisecond},
		Cases:   []StudyCase{{Name: "a", Start: func(context.Context) (func() error, error) { return func() error { return nil }, nil }}},
		Metrics: []MetricSpec{{Name: MetricGoodput, Unit: "Mbit/s", Primary: true}},
	}
	for _, name := range []string{"base", "x", "y", "broken"} {
		st.Configs = append(st.Configs, StudyConfig{Name: name, Setup: func(context.Context) (func() error, error) {
			calls[name]++
			if n, ok := setupFails[name]; ok && calls[name] >= n {
				return nil, errors.New(name + " refused")
			}
			return func() error { return nil }, nil
		}})
	}
	st.Window = func(_ context.Context, _ StudyCase, cfg StudyConfig) (map[string]float64, any, error) {
		order = append(order, cfg.Name)
		return map[string]float64{MetricGoodput: map[string]float64{"base": 100, "x": 50, "y": 101}[cfg.Name]}, nil, nil
	}
	return st, &order
}

func TestRunStudyOrderWarmupUnavailable(t *testing.T) {
	st, order := fakeStudy(map[string]int{"broken": 1})
	res, err := RunStudy(context.Background(), "fake", st, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 4 rounds (1 warm-up) of the 3 available configurations, rotated
	// and reversed: base x y, y x base, x y base, base y x.
	want := "base x y y x base x y base base y x"
	if got := strings.Join(*order, " "); got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	if len(res.Unavailable) != 1 || res.Unavailable[0].Config != "broken" || !strings.Contains(res.Unavailable[0].Reason, "broken refused") {
		t.Errorf("unavailable %+v", res.Unavailable)
	}
	x := res.Lookup(seriesID("fake", "a", "x", "", MetricGoodput))
	if x == nil || len(x.Values) != 3 || x.Compare == nil || x.Compare.Verdict != VerdictSlower {
		t.Fatalf("x: %+v", x)
	}
	if got := len(res.Runs); got != 12 {
		t.Errorf("%d runs recorded, want 12 (warm-up included)", got)
	}
}

// A run cancelled (Ctrl-C) in its middle returns what it measured.
func TestRunStudyPartialResult(t *testing.T) {
	st, order := fakeStudy(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	window := st.Window
	st.Window = func(c context.Context, sc StudyCase, cfg StudyConfig) (map[string]float64, any, error) {
		if len(*order) == 7 {
			cancel()
		}
		return window(c, sc, cfg)
	}
	res, err := RunStudy(ctx, "fake", st, nil)
	if !errors.Is(err, context.Canceled) || res == nil {
		t.Fatalf("want a partial result and the cancellation, got %v, %v", res, err)
	}
	if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "partial result") {
		t.Errorf("notes %q", res.Notes)
	}
	if s := res.Lookup(seriesID("fake", "a", "base", "", MetricGoodput)); s == nil || len(s.Values) == 0 {
		t.Error("the windows measured before the end are lost")
	}
}

// A window that fails is recorded as missing and the run goes on; failures
// in a row end it.
func TestRunStudyWindowFailure(t *testing.T) {
	st, _ := fakeStudy(nil)
	window := st.Window
	n := 0
	st.Window = func(ctx context.Context, c StudyCase, cfg StudyConfig) (map[string]float64, any, error) {
		if cfg.Name == "x" {
			n++
			if n == 2 {
				return nil, nil, errors.New("would not stop")
			}
		}
		return window(ctx, c, cfg)
	}
	res, err := RunStudy(context.Background(), "fake", st, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := res.Lookup(seriesID("fake", "a", "x", "", MetricGoodput))
	if x == nil || x.Missing != 1 || len(x.Values) != 2 {
		t.Errorf("x: %+v, want 2 values and 1 missing", x)
	}
	failed := 0
	for _, r := range res.Runs {
		if r.Error != "" {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d failed runs recorded, want 1", failed)
	}
	st, _ = fakeStudy(nil)
	st.Window = func(context.Context, StudyCase, StudyConfig) (map[string]float64, any, error) {
		return nil, nil, errors.New("broken")
	}
	if _, err := RunStudy(context.Background(), "fake", st, nil); err == nil {
		t.Error("windows failing in a row must end the run")
	}
}
