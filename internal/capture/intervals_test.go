package capture

import "testing"

func TestIntervals(t *testing.T) {
	type step struct {
		t          int64
		start, end int64 // the interval the packet ends
		ended      bool
	}
	for _, tc := range []struct {
		name          string
		every, offset int64
		steps         []step
		start, last   int64 // Finish
	}{
		{"aligned", 10, 0, []step{{13, 0, 0, false}, {19, 0, 0, false}, {20, 10, 20, true}, {47, 20, 30, true}, {45, 0, 0, false}}, 40, 47},
		{"offset", 10, 3, []step{{13, 0, 0, false}, {12, 0, 0, false}, {23, 13, 23, true}, {24, 0, 0, false}}, 23, 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv := Intervals{Every: tc.every, Offset: tc.offset}
			if _, _, ok := iv.Finish(); ok {
				t.Fatal("Finish before any packet: ok")
			}
			for _, s := range tc.steps {
				start, end, ended := iv.Advance(s.t)
				if ended != s.ended || ended && (start != s.start || end != s.end) {
					t.Errorf("Advance(%d) = %d, %d, %v; want %d, %d, %v", s.t, start, end, ended, s.start, s.end, s.ended)
				}
			}
			start, last, ok := iv.Finish()
			if !ok || start != tc.start || last != tc.last {
				t.Errorf("Finish() = %d, %d, %v; want %d, %d, true", start, last, ok, tc.start, tc.last)
			}
			if _, _, ok := iv.Finish(); ok {
				t.Error("second Finish: ok")
			}
		})
	}
}
