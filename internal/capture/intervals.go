package capture

// Intervals cuts capture time into the intervals of replay's aggregated
// mode and of rttscope pdm --read --pdm-report interval: Every ns long,
// starting at multiples of Every since the Unix epoch plus Offset (0 <=
// Offset < Every). An interval in which no packet came is skipped; the
// last one ends at the newest packet. Not safe for concurrent use.
type Intervals struct {
	Every, Offset int64
	start, end    int64 // the open interval [start, end); end == 0: none yet
	last          int64 // capture time of the newest packet
}

// Advance takes the capture time t of the next packet. When t is past the
// open interval, it returns that interval's bounds and ended true, and the
// packet opens the interval that holds it.
func (iv *Intervals) Advance(t int64) (start, end int64, ended bool) {
	if iv.end == 0 || t > iv.last {
		iv.last = t
	}
	if iv.end != 0 && t < iv.end {
		return 0, 0, false
	}
	start, end, ended = iv.start, iv.end, iv.end != 0
	iv.start = t - (t-iv.Offset)%iv.Every
	iv.end = iv.start + iv.Every
	return start, end, ended
}

// Finish ends the open interval at the newest packet and returns its
// start and that packet's time; ok is false when no packet came.
func (iv *Intervals) Finish() (start, last int64, ok bool) {
	if iv.end == 0 {
		return 0, 0, false
	}
	iv.end = 0
	return iv.start, iv.last, true
}
