package replay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
)

// errorRecorder keeps what checkLiveReplay reports as errors.
type errorRecorder struct{ errors []string }

func (r *errorRecorder) Helper()             {}
func (r *errorRecorder) Logf(string, ...any) {}
func (r *errorRecorder) Errorf(f string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(f, args...))
}

// samples makes RTT samples of the given durations in ms.
func samples(ms ...float64) []events.RTT {
	out := make([]events.RTT, len(ms))
	for i, m := range ms {
		out[i].RTT = time.Duration(m * float64(time.Millisecond))
	}
	return out
}

// TestCheckLiveReplay: the rule between live and replayed samples (the
// host's bounds; under emulation checkLiveReplay widens both)
// accepts the timing noise of two observation points (one packet timed
// 1.5 ms apart moves two back-to-back samples) and refuses pairings of
// other packets.
func TestCheckLiveReplay(t *testing.T) {
	live := samples(50, 46.51, 53.07, 48, 49, 51, 47, 52)
	for _, c := range []struct {
		name   string
		rep    []events.RTT
		errors int
	}{
		{"same", samples(50, 46.51, 53.07, 48, 49, 51, 47, 52), 0},
		{"within 1 ms", samples(50.9, 46.0, 53.5, 48.2, 49, 51, 47, 52), 0},
		{"one packet 1.5 ms off (seen)", samples(50, 44.97, 54.63, 48, 49, 51, 47, 52), 0},
		{"three samples past 1 ms", samples(51.5, 44.97, 54.63, 48, 49, 51, 47, 52), 1},
		{"one sample past 10 ms", samples(50, 46.51, 53.07, 60, 49, 51, 47, 52), 1},
		{"shifted by one sample", samples(46.51, 53.07, 48, 49, 51, 47, 52, 50), 1},
	} {
		var r errorRecorder
		checkLiveReplayWithin(&r, c.name, live, c.rep, time.Millisecond, liveReplayOutlier)
		if len(r.errors) != c.errors {
			t.Errorf("%s: %d errors %q, want %d", c.name, len(r.errors), r.errors, c.errors)
		}
	}
}
