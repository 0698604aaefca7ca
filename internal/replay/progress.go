package replay

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether f is a terminal (progress is only shown on one).
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress prints a one-line, self-overwriting status of a long replay:
// percent of the file consumed (when its size is known), packets and
// packets per second. It stays silent for replays shorter than
// progressDelay.
type progress struct {
	w       io.Writer
	name    string
	size    int64
	start   time.Time
	next    time.Time
	printed bool
}

const (
	progressDelay = time.Second
	progressEvery = 250 * time.Millisecond
)

func newProgress(w io.Writer, name string, size int64, now time.Time) *progress {
	return &progress{w: w, name: name, size: size, start: now, next: now.Add(progressDelay)}
}

// update prints the status if it is due.
func (p *progress) update(now time.Time, packets uint64, bytesRead int64) {
	if p == nil || now.Before(p.next) {
		return
	}
	p.next = now.Add(progressEvery)
	p.printed = true
	el := now.Sub(p.start).Seconds()
	line := fmt.Sprintf("\rrttscope: replay %s: ", p.name)
	if p.size > 0 {
		pct := 100 * float64(bytesRead) / float64(p.size)
		line += fmt.Sprintf("%5.1f%%, ", min(pct, 100))
	}
	line += fmt.Sprintf("%d packets, %s packets/s\033[K", packets, siRate(float64(packets)/el))
	fmt.Fprint(p.w, line)
}

// done clears the status line and, if one was shown, prints a summary.
func (p *progress) done(now time.Time, packets uint64) {
	if p == nil || !p.printed {
		return
	}
	el := now.Sub(p.start)
	fmt.Fprintf(p.w, "\rrttscope: replay %s: %d packets in %v, %s packets/s\033[K\n",
		p.name, packets, el.Round(time.Millisecond), siRate(float64(packets)/el.Seconds()))
}

// siRate renders a rate with a k/M suffix and three significant digits.
func siRate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.3gM", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.3gk", r/1e3)
	}
	return fmt.Sprintf("%.3g", r)
}
