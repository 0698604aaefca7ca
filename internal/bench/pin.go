package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Pinning: with --cpus, every thread of this process is bound to those
// CPUs. Threads the Go runtime creates later inherit the mask of the
// thread that creates them, and so do child processes, so the traffic
// generators, sinks and monitors all stay there. On veth and loopback the
// receiving softirq runs on the sending CPU (the backlog of the CPU that
// called netif_rx), so the whole packet path stays on those CPUs and the
// other CPUs absorb the rest of the machine's load (other developers'
// work on a shared machine).

func validCPUs(cpus []int) error {
	n := runtime.NumCPU()
	for _, c := range cpus {
		if c < 0 || c >= n {
			return fmt.Errorf("CPU %d does not exist (this machine has CPUs 0-%d)", c, n-1)
		}
	}
	return nil
}

// ParseCPUs reads a CPU list: "1", "0,1", "2-3", or "last" (the highest
// numbered CPU); "" or "none" is no pinning.
func ParseCPUs(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "", "none":
		return nil, nil
	case "last":
		return []int{runtime.NumCPU() - 1}, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("invalid CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("invalid CPU range %q", part)
			}
		}
		for c := a; c <= b; c++ {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out, validCPUs(out)
}

func cpuList(cpus []int) string {
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// pinSelf binds every thread of this process to cpus and returns a
// function that restores each thread's previous mask.
func pinSelf(cpus []int) (restore func(), err error) {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tids, err := threadIDs()
	if err != nil {
		return nil, err
	}
	old := map[int]unix.CPUSet{}
	for _, tid := range tids {
		var prev unix.CPUSet
		if unix.SchedGetaffinity(tid, &prev) != nil {
			continue // the thread exited
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			continue
		}
		old[tid] = prev
	}
	return func() {
		// Threads created while pinned are restored to the mask of
		// the first thread (the process's original mask).
		orig, ok := old[os.Getpid()]
		now, _ := threadIDs()
		for _, tid := range now {
			if prev, had := old[tid]; had {
				_ = unix.SchedSetaffinity(tid, &prev)
			} else if ok {
				_ = unix.SchedSetaffinity(tid, &orig)
			}
		}
	}, nil
}

func threadIDs() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// unpinProcess lets every thread of process pid run on every CPU again
// (for helpers that measure and must not compete with the pinned traffic).
func unpinProcess(pid int) error {
	var all unix.CPUSet
	for c := 0; c < runtime.NumCPU(); c++ {
		all.Set(c)
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			_ = unix.SchedSetaffinity(tid, &all) // a thread may have exited
		}
	}
	return nil
}
