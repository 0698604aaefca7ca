// Package bpfprof finds where loaded BPF programs spend their time, by
// source line, on live traffic: perf samples every CPU (cpu-clock), and each
// sample whose instruction pointer lies in a program's JIT image is
// attributed, through the program's JIT line info (BTF line info the
// kernel maps to JIT addresses), to the source line it was executing. The
// programs are polled while perf runs, so a benchmark that loads them once
// per window is profiled too; the loads of one program with the same JIT
// image add up. Needs perf (Debian's linux-perf), the JIT on and objects
// built with BTF (-g), as rttscope's are; not libbfd, which Debian's
// bpftool lacks for `prog dump jited linum`.
//
// What a sample means: the timer interrupt lands after the instruction
// that was retiring, so a slow load's cost shows on the line after it
// (skid), and the program's first line carries its entry (the JIT
// prologue, the first touch of the program's code). Shares of a few
// percent are differences of a few samples: read them with the counts.
package bpfprof

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Options of one profile.
type Options struct {
	Duration time.Duration // sampling time
	Freq     int           // samples per second per CPU
	Prefix   string        // programs whose name starts with it ("" = all)
	Perf     string        // the perf binary ("" = perf on PATH)
	Poll     time.Duration // how often loaded programs are listed
	Progress io.Writer     // one line per phase (nil = none)
}

// DefaultOptions profiles rttscope's programs for 10 s at 4999 Hz.
func DefaultOptions() Options {
	return Options{Duration: 10 * time.Second, Freq: 4999, Prefix: "rttscope_", Poll: 100 * time.Millisecond}
}

// Count is a number of samples at a place.
type Count struct {
	File    string `json:"file"`
	Line    uint32 `json:"line,omitempty"`
	Text    string `json:"text,omitempty"`
	Samples int    `json:"samples"`
}

// Program is the profile of one program: every load of it with the same
// JIT image.
type Program struct {
	Name      string  `json:"name"`
	Tag       string  `json:"tag"`
	JitedSize uint32  `json:"jited_bytes"`
	Loads     int     `json:"loads"`
	Samples   int     `json:"samples"`
	Files     []Count `json:"files"` // by source file, most samples first
	Lines     []Count `json:"lines"` // by source line, most samples first
}

// Profile is the result of Run.
type Profile struct {
	Duration   time.Duration `json:"duration_ns"` // sampled for
	Freq       int           `json:"freq_hz"`
	CPUs       int           `json:"cpus"`
	Samples    int           `json:"samples"` // every sample, all CPUs
	Programs   []Program     `json:"programs"`
	NoLineInfo []string      `json:"no_line_info,omitempty"`
}

// Run samples every CPU for o.Duration and attributes the samples to the
// source lines of the programs loaded meanwhile whose name starts with
// o.Prefix.
func Run(ctx context.Context, o Options) (*Profile, error) {
	perf := o.Perf
	if perf == "" {
		perf = "perf"
	}
	path, err := exec.LookPath(perf)
	if err != nil {
		return nil, fmt.Errorf("%s not found: install linux-perf (scripts/setup.sh does) or give its path", perf)
	}
	if o.Duration <= 0 || o.Freq <= 0 || o.Poll <= 0 {
		return nil, errors.New("duration, frequency and poll interval must be positive")
	}
	dir, err := os.MkdirTemp("", "rttscope-profile-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	fol := newFollower(func(name string) bool { return strings.HasPrefix(name, o.Prefix) })
	if err := fol.poll(monoNow()); err != nil {
		return nil, fmt.Errorf("list BPF programs (needs root): %w", err)
	}
	progress(o.Progress, "profile: sampling every CPU at %d Hz for %s", o.Freq, o.Duration)
	start := time.Now()
	rec, err := startPerfRecord(path, filepath.Join(dir, "perf.data"), o.Freq)
	if err != nil {
		return nil, err
	}
	if err := follow(ctx, fol, rec, o); err != nil {
		_ = rec.stop()
		return nil, err
	}
	if err := rec.stop(); err != nil {
		return nil, err
	}
	sampled := time.Since(start).Round(time.Millisecond) // shorter after Ctrl-C
	progress(o.Progress, "profile: reading the samples (perf script)")
	// Stopped early (SIGINT), the samples so far are still read.
	samples, err := readSamples(context.WithoutCancel(ctx), path, filepath.Join(dir, "perf.data"))
	if err != nil {
		return nil, err
	}
	var progs []*loadedProg
	for _, p := range fol.progs {
		progs = append(progs, p)
	}
	prof := &Profile{Duration: sampled, Freq: o.Freq, CPUs: runtime.NumCPU(), Samples: len(samples)}
	prof.Programs = attribute(progs, samples, o.Poll.Nanoseconds())
	for name := range fol.noLineInfo {
		prof.NoLineInfo = append(prof.NoLineInfo, name)
	}
	sort.Strings(prof.NoLineInfo)
	return prof, nil
}

// follow polls the loaded programs until the duration is over, ctx is
// done (the profile then ends early, with what it has), or perf exits.
func follow(ctx context.Context, fol *follower, rec *perfRecord, o Options) error {
	end := time.Now().Add(o.Duration)
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if gone, why := rec.exited(); gone {
			return fmt.Errorf("perf record stopped: %s", why)
		}
		if err := fol.poll(monoNow()); err != nil {
			return err
		}
	}
	return nil
}

// attribute counts each sample for the program load whose image holds its
// address at its time. A load first seen at a poll may have started up to
// one poll interval (slack, ns) before it.
func attribute(progs []*loadedProg, samples []sample, slack int64) []Program {
	groups := map[string]*progCounts{}
	for _, p := range progs {
		g := groups[p.group()]
		if g == nil {
			g = &progCounts{first: p, files: map[string]int{}, lines: map[lineKey]int{}}
			groups[p.group()] = g
		}
		g.loads++
	}
	for _, s := range samples {
		p := loadAt(progs, s, slack)
		if p == nil {
			continue
		}
		g := groups[p.group()]
		g.samples++
		l, ok := p.lineAt(s.ip)
		if !ok {
			l = jitLine{file: "?"}
		}
		g.files[l.file]++
		g.lines[lineKey{l.file, l.line, l.text}]++
	}
	var out []Program
	for _, g := range groups {
		out = append(out, g.program())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Samples != out[j].Samples {
			return out[i].Samples > out[j].Samples
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// loadAt finds the load holding s: its image contains the address and it
// was loaded at the time; of several (an address reused within a poll
// interval), the latest loaded.
func loadAt(progs []*loadedProg, s sample, slack int64) *loadedProg {
	var best *loadedProg
	for _, p := range progs {
		if !p.contains(s.ip) {
			continue
		}
		if p.firstSeen != 0 && s.time < p.firstSeen-slack {
			continue
		}
		if p.unloadSeen != 0 && s.time > p.unloadSeen {
			continue
		}
		if best == nil || p.firstSeen > best.firstSeen {
			best = p
		}
	}
	return best
}

type lineKey struct {
	file string
	line uint32
	text string
}

type progCounts struct {
	first   *loadedProg
	loads   int
	samples int
	files   map[string]int
	lines   map[lineKey]int
}

func (g *progCounts) program() Program {
	p := Program{Name: g.first.name, Tag: g.first.tag, JitedSize: g.first.jitedSize, Loads: g.loads, Samples: g.samples}
	for f, n := range g.files {
		p.Files = append(p.Files, Count{File: f, Samples: n})
	}
	for k, n := range g.lines {
		p.Lines = append(p.Lines, Count{File: k.file, Line: k.line, Text: k.text, Samples: n})
	}
	sortCounts(p.Files)
	sortCounts(p.Lines)
	return p
}

func sortCounts(c []Count) {
	sort.Slice(c, func(i, j int) bool {
		if c[i].Samples != c[j].Samples {
			return c[i].Samples > c[j].Samples
		}
		if c[i].File != c[j].File {
			return c[i].File < c[j].File
		}
		return c[i].Line < c[j].Line
	})
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
