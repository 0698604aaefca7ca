// Package telemetry collects rttscope's self-telemetry beyond the kernel
// counters: the process's own CPU time and memory, and the kernel's run
// time accounting of the attached BPF programs (bpf_stats).
package telemetry

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/events"
)

const statmPath = "/proc/self/statm"

// ReadProcess fills p with the process's CPU time (getrusage RUSAGE_SELF),
// current RSS (/proc/self/statm) and peak RSS (ru_maxrss, or the current
// RSS if that is larger). It leaves
// p.CPUShare alone: that needs two readings (see Sampler).
func ReadProcess(p *events.ProcessStats) error {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return fmt.Errorf("getrusage: %w", err)
	}
	fromRusage(&ru, p)
	b, err := os.ReadFile(statmPath)
	if err != nil {
		return fmt.Errorf("current RSS: %w", err)
	}
	rss, err := parseStatm(b, uint64(os.Getpagesize()))
	if err != nil {
		return fmt.Errorf("current RSS: %s: %w", statmPath, err)
	}
	p.RSS = rss
	// Both figures come from the kernel's approximate per-CPU RSS
	// counters, read moments apart: keep the peak consistent.
	p.MaxRSS = max(p.MaxRSS, rss)
	return nil
}

// fromRusage copies the CPU times and the peak RSS of ru into p. Linux
// reports ru_maxrss in KiB.
func fromRusage(ru *unix.Rusage, p *events.ProcessStats) {
	p.CPUUser = timevalDuration(ru.Utime)
	p.CPUSystem = timevalDuration(ru.Stime)
	p.MaxRSS = 0
	if ru.Maxrss > 0 {
		p.MaxRSS = uint64(ru.Maxrss) * 1024
	}
}

func timevalDuration(tv unix.Timeval) time.Duration {
	return time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
}

var errStatm = errors.New("want at least two numeric fields (size resident ...)")

// parseStatm returns the resident set size in bytes from the content of
// /proc/PID/statm: "size resident shared text lib data dt", in pages.
func parseStatm(b []byte, pageSize uint64) (uint64, error) {
	fields := bytes.Fields(b)
	if len(fields) < 2 {
		return 0, errStatm
	}
	for _, f := range fields[:2] {
		if _, err := strconv.ParseUint(string(f), 10, 64); err != nil {
			return 0, errStatm
		}
	}
	pages, _ := strconv.ParseUint(string(fields[1]), 10, 64)
	return pages * pageSize, nil
}
