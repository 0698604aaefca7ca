package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procCPU is the CPU time of some processes at one moment, read two ways:
//   - ns: the sum of their threads' run times as the scheduler accounts
//     them (/proc/PID/task/TID/schedstat, first field, nanoseconds);
//   - ticks: the processes' utime+stime (/proc/PID/stat, clock ticks).
//
// Ticks are what top and ps show, but over bench monitor's 2-s windows a
// tick (10 ms) is 0.005 CPUs, a quarter point of a 2-CPU router's busy
// time: as coarse as the differences the study compares (a monitor
// process uses 0.005-0.02 CPUs). The per-thread sum is exact but forgets
// threads that exited, whose time utime+stime keep; cpuSecondsBetween
// therefore uses it only when every thread of the first reading is still
// there at the second.
type procCPU struct {
	ns    uint64
	ticks uint64
	tids  map[int]bool
	exact bool // every thread's schedstat was read
}

// readProcCPU reads the CPU time of processes pids (the ones gone are
// left out).
func readProcCPU(pids ...int) procCPU {
	c := procCPU{tids: map[int]bool{}, exact: true}
	for _, pid := range pids {
		ticks, ok := procTicks(pid)
		if !ok {
			continue
		}
		c.ticks += ticks
		dir := fmt.Sprintf("/proc/%d/task", pid)
		ents, err := os.ReadDir(dir)
		if err != nil {
			c.exact = false
			continue
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
			if err != nil {
				// Exited between the listing and the read: its time
				// is in neither sum of this reading.
				c.exact = false
				continue
			}
			ns, ok := parseSchedstat(string(b))
			if !ok {
				c.exact = false
				continue
			}
			c.ns += ns
			c.tids[tid] = true
		}
	}
	return c
}

// parseSchedstat returns the run time (ns) of a /proc/.../schedstat text:
// "run_ns wait_ns timeslices".
func parseSchedstat(text string) (uint64, bool) {
	f := strings.Fields(text)
	if len(f) < 1 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	return n, err == nil
}

// cpuSecondsBetween returns the CPU seconds used from reading a to b, and
// whether that is the exact per-thread figure (else clock ticks).
func cpuSecondsBetween(a, b procCPU) (float64, bool) {
	exact := a.exact && b.exact && b.ns >= a.ns
	for tid := range a.tids {
		if !b.tids[tid] {
			exact = false
			break
		}
	}
	if exact {
		return float64(b.ns-a.ns) / 1e9, true
	}
	if b.ticks < a.ticks {
		return 0, false
	}
	return float64(b.ticks-a.ticks) / clockTicks, false
}
