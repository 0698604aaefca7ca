package telemetry

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/events"
)

func TestParseStatm(t *testing.T) {
	for _, c := range []struct {
		in   string
		page uint64
		want uint64
		bad  bool
	}{
		{in: "1000 250 100 10 0 300 0\n", page: 4096, want: 250 * 4096},
		{in: "1000 250 100 10 0 300 0", page: 16384, want: 250 * 16384},
		{in: "  7   0 0 0 0 0 0\n", page: 4096, want: 0},
		{in: "18446744073709551615 3", page: 4096, want: 3 * 4096},
		{in: "", bad: true},
		{in: "1000\n", bad: true},
		{in: "1000 x 1 1 0 1 0\n", bad: true},
		{in: "-5 250 100\n", bad: true},
	} {
		got, err := parseStatm([]byte(c.in), c.page)
		if c.bad {
			if err == nil {
				t.Errorf("%q: accepted (%d)", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestFromRusage(t *testing.T) {
	ru := unix.Rusage{
		Utime:  unix.Timeval{Sec: 1, Usec: 234_567},
		Stime:  unix.Timeval{Sec: 0, Usec: 89},
		Maxrss: 23_456, // KiB
	}
	var p events.ProcessStats
	p.CPUShare = 0.5
	fromRusage(&ru, &p)
	if p.CPUUser != 1_234_567*time.Microsecond || p.CPUSystem != 89*time.Microsecond {
		t.Errorf("cpu: user %v system %v", p.CPUUser, p.CPUSystem)
	}
	if p.MaxRSS != 23_456*1024 {
		t.Errorf("max rss %d", p.MaxRSS)
	}
	if p.CPUShare != 0.5 {
		t.Error("fromRusage changed CPUShare")
	}
	ru.Maxrss = -1
	fromRusage(&ru, &p)
	if p.MaxRSS != 0 {
		t.Errorf("negative ru_maxrss gave %d", p.MaxRSS)
	}
}

func TestParseSysctlBool(t *testing.T) {
	for in, want := range map[string]bool{"0\n": false, "1\n": true, "1": true} {
		if got, err := parseSysctlBool([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "2\n", "yes"} {
		if _, err := parseSysctlBool([]byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestReadProcess reads this test process: it has used some CPU time and
// has a resident set no larger than its peak.
func TestReadProcess(t *testing.T) {
	// Burn a little CPU so that the reading cannot be zero.
	deadline := time.Now().Add(20 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	var p events.ProcessStats
	if err := ReadProcess(&p); err != nil {
		t.Fatal(err)
	}
	if p.CPUUser+p.CPUSystem <= 0 || p.RSS == 0 || p.MaxRSS == 0 {
		t.Errorf("%+v (after %d loops)", p, x)
	}
	if p.RSS > p.MaxRSS {
		t.Errorf("RSS %d above the peak %d", p.RSS, p.MaxRSS)
	}
	// Cross-check with VmRSS from /proc/self/status, loosely: the two
	// readings are moments apart.
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v) // "12345 kB"
			if len(f) != 2 || f[1] != "kB" {
				t.Fatalf("VmRSS %q", v)
			}
			kb, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			if lo, hi := kb*1024/2, kb*1024*2; p.RSS < lo || p.RSS > hi {
				t.Errorf("statm RSS %d far from VmRSS %d KiB", p.RSS, kb)
			}
		}
	}
}

// fake is a scripted clock, process and set of program counters.
type fake struct {
	now    time.Time
	cpu    time.Duration
	progs  map[*ebpf.Program]ebpf.ProgramStats
	fail   map[*ebpf.Program]bool
	sysctl bool
}

func newFakeSampler(f *fake, progs []Program, own bool) *Sampler {
	s := &Sampler{
		progs:     progs,
		ownStats:  own,
		prevProgs: make([]ebpf.ProgramStats, len(progs)),
		now:       func() time.Time { return f.now },
		readProcess: func(p *events.ProcessStats) error {
			p.CPUUser, p.CPUSystem = f.cpu*3/4, f.cpu/4
			p.RSS, p.MaxRSS = 10<<20, 12<<20
			return nil
		},
		readProgram: func(p *ebpf.Program) (ebpf.ProgramStats, error) {
			if f.fail[p] {
				return ebpf.ProgramStats{}, errors.New("EBADF")
			}
			return f.progs[p], nil
		},
		sysctl: func() (bool, error) { return f.sysctl, nil },
	}
	s.start()
	return s
}

func TestSampler(t *testing.T) {
	eg, in := new(ebpf.Program), new(ebpf.Program)
	progs := []Program{{TCEgress, eg}, {TCIngress, in}}
	f := &fake{now: time.Unix(1000, 0), cpu: time.Second, progs: map[*ebpf.Program]ebpf.ProgramStats{}}

	// Accounting off, nothing runs: disabled, no figures.
	s := newFakeSampler(f, progs, false)
	f.now = f.now.Add(2 * time.Second)
	f.cpu += 100 * time.Millisecond
	var st events.Stats
	if err := s.Fill(&st); err != nil {
		t.Fatal(err)
	}
	if st.Process == nil || st.Process.CPUShare != 0.05 || st.Process.CPUUser != 825*time.Millisecond {
		t.Errorf("process %+v", st.Process)
	}
	if st.BPF == nil || st.BPF.Enabled || len(st.BPF.Programs) != 0 {
		t.Errorf("accounting off: %+v", st.BPF)
	}

	// Someone else turned accounting on with an fd: run counts grow.
	f.progs[eg] = ebpf.ProgramStats{RunCount: 100, Runtime: 20 * time.Microsecond}
	f.now = f.now.Add(time.Second)
	prev := st
	if err := s.Fill(&st); err != nil {
		t.Fatal(err)
	}
	if prev.Process == st.Process || prev.BPF == st.BPF {
		t.Error("Fill reused the previous record's telemetry")
	}
	if !st.BPF.Enabled || len(st.BPF.Programs) != 2 {
		t.Fatalf("run counts grew: %+v", st.BPF)
	}
	p := st.BPF.Programs[0]
	if p.Name != TCEgress || p.RunCount != 100 || p.IntervalRunCount != 100 {
		t.Errorf("egress %+v", p)
	}
	if ns, ok := p.IntervalNsPerPacket(); !ok || ns != 200 {
		t.Errorf("egress interval ns/packet %v %v", ns, ok)
	}
	if _, ok := st.BPF.Programs[1].NsPerPacket(); ok {
		t.Errorf("ingress never ran but has a mean: %+v", st.BPF.Programs[1])
	}
	if st.Process.CPUShare != 0 {
		t.Errorf("no CPU used, share %v", st.Process.CPUShare)
	}

	// Sysctl on, quiet interval: enabled, interval counts zero.
	f.sysctl = true
	f.now = f.now.Add(time.Second)
	if err := s.Fill(&st); err != nil {
		t.Fatal(err)
	}
	if !st.BPF.Enabled || st.BPF.Programs[0].IntervalRunCount != 0 || st.BPF.Programs[0].RunCount != 100 {
		t.Errorf("sysctl on: %+v", st.BPF)
	}
	if _, ok := st.BPF.Programs[0].IntervalNsPerPacket(); ok {
		t.Error("quiet interval has a mean")
	}
	if ns, _ := st.BPF.Programs[0].NsPerPacket(); ns != 200 {
		t.Errorf("total mean %v", ns)
	}

	// Enabled by us, ingress unreadable: left out, error reported.
	f.sysctl = false
	s.ownStats = true
	f.fail = map[*ebpf.Program]bool{in: true}
	f.progs[eg] = ebpf.ProgramStats{RunCount: 150, Runtime: 35 * time.Microsecond}
	err := s.Fill(&st)
	if err == nil || !strings.Contains(err.Error(), TCIngress) {
		t.Errorf("error %v", err)
	}
	if !st.BPF.Enabled || len(st.BPF.Programs) != 1 || st.BPF.Programs[0].IntervalRunCount != 50 ||
		st.BPF.Programs[0].IntervalRunTime != 15*time.Microsecond {
		t.Errorf("own stats, one unreadable: %+v", st.BPF)
	}

	// Nothing readable: no BPF section rather than "disabled".
	s.ownStats = false
	f.fail[eg] = true
	if err := s.Fill(&st); err == nil || st.BPF != nil {
		t.Errorf("nothing readable: %v %+v", err, st.BPF)
	}
}
