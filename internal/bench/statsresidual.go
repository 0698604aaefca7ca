package bench

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rttscope/rttscope/internal/probe"
)

// bpf_stats' residual: the part of the kernel's run time accounting that
// lands inside the run time it reports.
//
// With bpf_stats on, the kernel reads the clock (sched_clock) before and
// after every program run and adds the difference to run_time_ns. Part of
// the two clock reads falls between them, so every program's reported
// time per run carries a fixed residual that a deployment, where the
// accounting is off, does not pay: 36-37 ns on a 2-vCPU Intel Xeon VM with
// kvm-clock, where the accounting as a whole costs ~50 ns per run
// (docs/performance.md, "Round 10"). An empty program's body is a few
// instructions, so its reported time per run, measured with
// BPF_PROG_TEST_RUN, is that residual plus the call of an empty program on
// warm caches (1-2 ns, which a deployment does pay).
//
// Net figures subtract the residual per run. They are estimates of the
// cost without the accounting: low by the empty call's few ns, high when
// the clock reads cost more live than on warm caches.

// Residual measurement: the least over residualCalls test runs of
// residualRepeat runs each (about 10 ms in all). An interrupt that lands
// between a run's two clock reads (and the softirq work it runs on exit,
// plenty under a forwarding load) adds its whole length to that run, so
// noise only ever adds: the quietest call is the closest, and short calls
// leave some quiet ones even under load. (7 calls of 20,000 runs under a
// bench's forwarding load read 45 ns where the machine at rest reads 37.)
const (
	residualCalls  = 100
	residualRepeat = 1000
)

// statsResidual measures the residual with an empty tc program of its own,
// so that no other run of that program mixes into its counters.
type statsResidual struct {
	empty probe.EmptyObjects
	frame []byte
	least float64 // the least measured so far
}

func newStatsResidual() (*statsResidual, error) {
	frame, err := smallUDPFrame()
	if err != nil {
		return nil, err
	}
	r := &statsResidual{frame: frame, least: math.Inf(1)}
	if err := probe.LoadEmptyObjects(&r.empty, nil); err != nil {
		return nil, fmt.Errorf("load the empty program to measure bpf_stats' residual: %w", err)
	}
	return r, nil
}

func (r *statsResidual) Close() error { return r.empty.Close() }

// measure returns the empty program's reported run time per run: the
// least over residualCalls test runs, and over every earlier measure of
// r (the clock reads cost the same all along; a window in which no call
// was quiet reads high, by up to 12 ns under a bench's load). The
// accounting must be on (the caller's BPF_ENABLE_STATS or sysctl); a run
// count that does not move says it is off.
func (r *statsResidual) measure() (float64, error) {
	least := r.least
	for range residualCalls {
		runs, runTime, err := r.testRun(residualRepeat)
		if err != nil {
			return 0, fmt.Errorf("bpf_stats residual: %w", err)
		}
		if runs == 0 {
			return 0, errors.New("bpf_stats residual: the empty program's run count did not move: run time accounting is off")
		}
		least = min(least, float64(runTime)/float64(runs))
	}
	r.least = least
	return least, nil
}

// testRun runs the empty program repeat times with BPF_PROG_TEST_RUN and
// returns what its bpf_stats counted meanwhile: runs and run time (both 0
// while the accounting is off).
func (r *statsResidual) testRun(repeat int) (runs uint64, runTime time.Duration, err error) {
	p := r.empty.EmptyTc
	before, err := p.Stats()
	if err != nil {
		return 0, 0, err
	}
	if _, _, err := p.Benchmark(r.frame, repeat, nil); err != nil {
		return 0, 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", err)
	}
	after, err := p.Stats()
	if err != nil {
		return 0, 0, err
	}
	return after.RunCount - before.RunCount, after.Runtime - before.Runtime, nil
}

// netRunTimeNs is a reported run time less the residual of each of its
// runs, never below zero.
func netRunTimeNs(runTimeNs, runCnt uint64, residual float64) float64 {
	return max(float64(runTimeNs)-residual*float64(runCnt), 0)
}

// netCPUShare is a monitor's share of the busy CPU without the residual:
// (net BPF time + its processes) / (busy time - the residual), everything
// over the same seconds. The residual is busy time too, so it comes off
// both sides. ok is false when no busy time is left.
func netCPUShare(runTimeNs, runCnt uint64, residual, seconds, toolCores, busyCores float64) (share float64, ok bool) {
	net := netRunTimeNs(runTimeNs, runCnt, residual)
	busy := busyCores - (float64(runTimeNs)-net)/1e9/seconds
	if !(busy > 0) {
		return 0, false
	}
	return (net/1e9/seconds + toolCores) / busy, true
}

// accounting reports whether the kernel accounts BPF run time now: a test
// run of the empty program moves its run count only then. The sysctl
// kernel.bpf_stats_enabled cannot tell: it reads 1 only when it was
// written, not while a process holds BPF_ENABLE_STATS.
func (r *statsResidual) accounting() (bool, error) {
	runs, _, err := r.testRun(1)
	if err != nil {
		return false, fmt.Errorf("bpf_stats: %w", err)
	}
	return runs != 0, nil
}
