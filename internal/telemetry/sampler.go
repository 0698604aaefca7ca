package telemetry

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/events"
)

// Sampler fills the self-telemetry part of successive stats records and
// keeps what the interval figures (CPU share, run time per packet over the
// interval) need from the previous record. It is not safe for concurrent
// use.
type Sampler struct {
	progs []Program
	// ownStats is true when this process holds a BPF_ENABLE_STATS fd.
	ownStats bool

	prevProgs []ebpf.ProgramStats
	prevCPU   time.Duration
	prevWall  time.Time

	// Sources, replaceable in tests.
	now         func() time.Time
	readProcess func(*events.ProcessStats) error
	readProgram func(*ebpf.Program) (ebpf.ProgramStats, error)
	sysctl      func() (bool, error)
}

// NewSampler starts the intervals now: the first record's CPU share covers
// the time from here, its per-program interval figures the time since the
// programs were loaded. ownStats says the caller enabled run time
// accounting itself (EnableBPFStats) and holds it on.
func NewSampler(progs []Program, ownStats bool) *Sampler {
	s := &Sampler{
		progs:       append([]Program(nil), progs...),
		ownStats:    ownStats,
		prevProgs:   make([]ebpf.ProgramStats, len(progs)),
		now:         time.Now,
		readProcess: ReadProcess,
		readProgram: ReadProgram,
		sysctl:      SysctlEnabled,
	}
	s.start()
	return s
}

func (s *Sampler) start() {
	s.prevWall = s.now()
	var p events.ProcessStats
	_ = s.readProcess(&p) // CPU times are set even if the RSS is not
	s.prevCPU = p.CPUUser + p.CPUSystem
}

// Fill sets st.Process and st.BPF to new values (the record owns them) and
// moves the interval on. On an error the parts that could be read are
// still set, and the record is worth writing; a part that could not be
// read at all is left nil.
func (s *Sampler) Fill(st *events.Stats) error {
	var errs []error
	wall := s.now()
	p := new(events.ProcessStats)
	if err := s.readProcess(p); err != nil {
		errs = append(errs, err)
	}
	if cpu := p.CPUUser + p.CPUSystem; cpu > 0 {
		if dt := wall.Sub(s.prevWall); dt > 0 && cpu >= s.prevCPU {
			p.CPUShare = float64(cpu-s.prevCPU) / float64(dt)
		}
		s.prevCPU, s.prevWall = cpu, wall
		st.Process = p
	} else {
		st.Process = nil // getrusage failed
	}

	b, err := s.programs()
	if err != nil {
		errs = append(errs, err)
	}
	st.BPF = b
	return errors.Join(errs...)
}

// programs reads the accounting of every program. Run time statistics
// count as enabled when this process enabled them, when the sysctl is on,
// or when a run count grew since the previous record (someone else holds
// a BPF_ENABLE_STATS fd: run counts only move while accounting is on).
// While they are disabled the counters are frozen, so no figures are
// reported rather than stale ones or zeros. A program whose accounting
// cannot be read is left out; nil means none could be read.
func (s *Sampler) programs() (*events.BPFStats, error) {
	var errs []error
	cur := make([]ebpf.ProgramStats, len(s.progs))
	ok := make([]bool, len(s.progs))
	read, grew := 0, false
	for i, p := range s.progs {
		c, err := s.readProgram(p.Prog)
		if err != nil {
			errs = append(errs, fmt.Errorf("run time statistics of %s: %w", p.Name, err))
			continue
		}
		cur[i], ok[i] = c, true
		read++
		grew = grew || c.RunCount > s.prevProgs[i].RunCount
	}
	if read == 0 && len(s.progs) > 0 {
		return nil, errors.Join(errs...)
	}
	enabled := s.ownStats || grew
	if !enabled {
		on, err := s.sysctl()
		if err != nil {
			errs = append(errs, fmt.Errorf("whether BPF run time statistics are on: %w", err))
		}
		enabled = on
	}
	b := &events.BPFStats{Enabled: enabled}
	if enabled {
		b.Programs = make([]events.ProgramStats, 0, read)
	}
	for i, p := range s.progs {
		if !ok[i] {
			continue
		}
		c, prev := cur[i], s.prevProgs[i]
		s.prevProgs[i] = c
		if !enabled {
			continue
		}
		ps := events.ProgramStats{Name: p.Name, RunCount: c.RunCount, RunTime: c.Runtime}
		if c.RunCount >= prev.RunCount && c.Runtime >= prev.Runtime {
			ps.IntervalRunCount, ps.IntervalRunTime = c.RunCount-prev.RunCount, c.Runtime-prev.Runtime
		}
		b.Programs = append(b.Programs, ps)
	}
	return b, errors.Join(errs...)
}
