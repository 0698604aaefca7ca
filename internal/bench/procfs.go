package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/stat and /proc/PID/stat
// times: 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuTimes is the aggregate "cpu" line of /proc/stat (or the sum of some
// "cpuN" lines), in clock ticks.
type cpuTimes struct {
	Total, Idle, Softirq, Steal, System, User, Irq uint64
}

func (t *cpuTimes) add(o cpuTimes) {
	t.Total += o.Total
	t.Idle += o.Idle
	t.Softirq += o.Softirq
	t.Steal += o.Steal
	t.System += o.System
	t.User += o.User
	t.Irq += o.Irq
}

// parseProcStat reads the aggregate cpu line of a /proc/stat text: user
// nice system idle iowait irq softirq steal (guest time is already part
// of user and nice). Idle counts idle and iowait.
func parseProcStat(text string) (cpuTimes, bool) {
	return parseProcStatLine(text, "cpu")
}

// parseProcStatCPUs sums the "cpuN" lines of the given CPUs.
func parseProcStatCPUs(text string, cpus []int) (cpuTimes, bool) {
	var sum cpuTimes
	for _, c := range cpus {
		t, ok := parseProcStatLine(text, "cpu"+strconv.Itoa(c))
		if !ok {
			return cpuTimes{}, false
		}
		sum.add(t)
	}
	return sum, true
}

func parseProcStatLine(text, name string) (cpuTimes, bool) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != name {
			continue
		}
		var v [8]uint64
		for i := 0; i < len(v) && i+1 < len(f); i++ {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return cpuTimes{}, false
			}
			v[i] = n
		}
		var t cpuTimes
		for _, n := range v {
			t.Total += n
		}
		t.Idle = v[3] + v[4]
		t.User = v[0] + v[1]
		t.System = v[2]
		t.Irq = v[5]
		t.Softirq = v[6]
		t.Steal = v[7]
		return t, true
	}
	return cpuTimes{}, false
}

func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	t, _ := parseProcStat(string(b))
	return t
}

// readCPUTimesOf reads the given CPUs' times, or all CPUs' when cpus is
// empty.
func readCPUTimesOf(cpus []int) cpuTimes {
	if len(cpus) == 0 {
		return readCPUTimes()
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	t, _ := parseProcStatCPUs(string(b), cpus)
	return t
}

// cpuUse is CPU time per second of wall time between two readings, by
// kind (1.0 = one CPU fully busy).
type cpuUse struct {
	Busy, Softirq, System, User, Irq, StealShare float64
}

func cpuUseBetween(a, b cpuTimes, sec float64) cpuUse {
	if b.Total <= a.Total || sec <= 0 {
		return cpuUse{nan(), nan(), nan(), nan(), nan(), nan()}
	}
	per := func(x, y uint64) float64 { return float64(y-x) / clockTicks / sec }
	return cpuUse{
		Busy:       float64((b.Total-a.Total)-(b.Idle-a.Idle)) / clockTicks / sec,
		Softirq:    per(a.Softirq, b.Softirq),
		System:     per(a.System, b.System),
		User:       per(a.User, b.User),
		Irq:        per(a.Irq, b.Irq),
		StealShare: float64(b.Steal-a.Steal) / float64(b.Total-a.Total),
	}
}

// cpuShares returns the busy and stolen shares (0..1) of all CPUs between
// two readings; NaN when nothing elapsed.
func cpuShares(a, b cpuTimes) (busy, steal float64) {
	if b.Total <= a.Total {
		return nan(), nan()
	}
	d := float64(b.Total - a.Total)
	idle := float64(b.Idle-a.Idle) / d
	return 1 - idle, float64(b.Steal-a.Steal) / d
}

// parsePidStat returns utime+stime of a /proc/PID/stat text.
func parsePidStat(text string) (uint64, bool) {
	// The command name (field 2) may hold spaces: fields count from
	// after its closing parenthesis.
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(text[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + s, true
}

func procTicks(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parsePidStat(string(b))
}

func procRSSKiB(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// tcpRetransSegs is the TCP RetransSegs counter of the namespace the
// calling thread is in (/proc/thread-self/net/snmp: /proc/self/net would
// be the main thread's namespace).
func tcpRetransSegs() (uint64, error) {
	b, err := os.ReadFile("/proc/thread-self/net/snmp")
	if err != nil {
		return 0, err
	}
	return parseSNMPField(string(b), "Tcp", "RetransSegs")
}

// parseSNMPField reads one field of a /proc/net/snmp text, where each
// protocol has a line of field names and a line of values, both starting
// with "PROTO:".
func parseSNMPField(text, proto, field string) (uint64, error) {
	var names []string
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != proto+":" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, n := range names {
			if n == field && i+1 < len(f) {
				return strconv.ParseUint(f[i+1], 10, 64)
			}
		}
		break
	}
	return 0, fmt.Errorf("no %s %s in the snmp counters", proto, field)
}
