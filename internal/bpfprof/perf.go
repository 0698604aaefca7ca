package bpfprof

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// sample is one CPU sample: when (CLOCK_MONOTONIC ns) and where.
type sample struct {
	time int64
	ip   uint64
}

// perfRecord is `perf record` running on every CPU: cpu-clock, a software
// event, so it samples in VMs without a PMU too; sample times on
// CLOCK_MONOTONIC (monoNow).
type perfRecord struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	out    string
	done   chan struct{} // closed once perf has exited (one Wait, here)
	err    error         // its exit status, set before done is closed
}

func startPerfRecord(perf, out string, freq int) (*perfRecord, error) {
	r := &perfRecord{out: out, done: make(chan struct{})}
	r.cmd = exec.Command(perf, "record", "-a", "-q", "-e", "cpu-clock",
		"-F", strconv.Itoa(freq), "-k", "CLOCK_MONOTONIC", "-o", out)
	r.cmd.Stdout = io.Discard
	r.cmd.Stderr = &r.stderr
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s record: %w", perf, err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	return r, nil
}

// stop ends the recording with SIGINT, on which perf writes its file.
func (r *perfRecord) stop() error {
	if gone, _ := r.exited(); !gone {
		_ = r.cmd.Process.Signal(os.Interrupt)
	}
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
		return fmt.Errorf("perf record did not stop within 30 s of SIGINT")
	}
	// SIGINT is how it is meant to end: its exit status is not an error.
	if _, serr := os.Stat(r.out); serr != nil {
		err := r.err
		if err == nil {
			err = serr
		}
		return fmt.Errorf("perf record wrote no samples (%w): %s", err, firstLine(r.stderr.String()))
	}
	return nil
}

// exited says whether perf record has ended, and its first line of
// stderr: before stop, that it failed to sample (perf_event_paranoid, a
// missing event).
func (r *perfRecord) exited() (bool, string) {
	select {
	case <-r.done:
		return true, firstLine(r.stderr.String())
	default:
		return false, ""
	}
}

// readSamples runs `perf script` over the recording: the time and the
// instruction pointer of every sample, symbols left to us.
func readSamples(ctx context.Context, perf, file string) ([]sample, error) {
	cmd := exec.CommandContext(ctx, perf, "script", "-i", file, "-F", "time,ip", "--ns")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s script: %w", perf, err)
	}
	samples, perr := parseSamples(stdout)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("perf script: %w: %s", err, firstLine(stderr.String()))
	}
	return samples, perr
}

// parseSamples reads `perf script -F time,ip --ns` lines such as
// "  43808.590531123:  ffffffffc00275cf"; others are skipped.
func parseSamples(r io.Reader) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		t, ok := parsePerfTime(strings.TrimSuffix(f[0], ":"))
		ip, err := strconv.ParseUint(f[1], 16, 64)
		if !ok || err != nil {
			continue
		}
		out = append(out, sample{time: t, ip: ip})
	}
	return out, sc.Err()
}

// parsePerfTime turns "SECONDS.NANOSECONDS" into ns without going through
// a float (whose 53 bits would round the ns of a long uptime).
func parsePerfTime(s string) (int64, bool) {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok || len(frac) > 9 {
		return 0, false
	}
	si, err1 := strconv.ParseInt(sec, 10, 64)
	fi, err2 := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return si*1e9 + fi, true
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
