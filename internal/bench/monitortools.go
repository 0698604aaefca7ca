package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/rttscope/rttscope/internal/nsrun"
)

// The monitors of `rttscope bench monitor`: rttscope in each mode, tcpdump
// writing a capture, and any external command. A tool runs on the
// router's server-facing interface while its window is measured.

// Monitor study configurations besides ProgNone and the rttscope modes of
// the load phase.
const (
	ModeFlowSummary = "flow-summary" // --flow-summary --flow-summary-interval 1s
	ToolTcpdump     = "tcpdump"      // tcpdump -w FILE
)

// External is a monitor command given with --external NAME='CMD {iface}'.
type External struct {
	Name string
	Cmd  string // shell command; {iface} is replaced by the interface name
}

// ParseExternal reads NAME='CMD' (the quotes are the shell's business).
func ParseExternal(s string) (External, error) {
	name, cmd, ok := strings.Cut(s, "=")
	name, cmd = strings.TrimSpace(name), strings.TrimSpace(cmd)
	if !ok || name == "" || cmd == "" {
		return External{}, fmt.Errorf("want NAME='COMMAND {iface}', got %q", s)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_.-]+$`).MatchString(name) {
		return External{}, fmt.Errorf("external name %q: use letters, digits, '.', '_' and '-'", name)
	}
	return External{Name: name, Cmd: cmd}, nil
}

// toolCounters are a tool's cumulative counters.
type toolCounters struct {
	samples, lost, outBytes, outLines uint64
	haveSamples, haveLost             bool
}

// monitorTool is a running monitor.
type monitorTool interface {
	// cpu is the CPU time of the tool's processes.
	cpu() procCPU
	counters() toolCounters
	// stop ends the tool cleanly and tells how it went.
	stop() (string, error)
}

// rttscopeTool is `rttscope monitor` in one mode.
type rttscopeTool struct {
	m    *monitorProc
	mode string
}

func (t *rttscopeTool) cpu() procCPU {
	return readProcCPU(t.m.cmd.Process.Pid)
}

func (t *rttscopeTool) counters() toolCounters {
	c := toolCounters{haveSamples: true, haveLost: true}
	st := t.m.lastStats()
	switch t.mode {
	case ModeAggregated:
		if st != nil {
			c.samples = st.AggregatedSamples
		}
	case ModeFlowSummary:
		c.samples = t.m.flow.Load()
	default:
		c.samples = t.m.rtt.Load()
	}
	if st != nil {
		c.lost = st.RingbufFull + st.TimestampMapFull + st.FlowMapFull + st.PrefixMapFull
	}
	c.outLines = t.m.rtt.Load() + t.m.flow.Load() + t.m.agg.Load()
	return c
}

func (t *rttscopeTool) stop() (string, error) {
	if err := t.m.stop(); err != nil {
		return "", err
	}
	return "exited after SIGTERM", nil
}

// procTool is tcpdump or an external command: a shell in the router's
// namespace, in its own process group, with stdout and stderr counted.
type procTool struct {
	cmd      *exec.Cmd
	pgid     int
	done     chan error
	exited   atomic.Bool
	outBytes atomic.Uint64
	outLines atomic.Uint64
	capture  string // tcpdump's output file ("" for externals)
	stderr   strings.Builder
	mu       sync.Mutex
	readers  sync.WaitGroup
}

// toolStopGrace is how long stop waits after SIGINT and after SIGTERM;
// after SIGKILL it waits toolKillWait (a process holding large BPF maps
// can take seconds to be torn down on a busy machine).
var (
	toolStopGrace = 10 * time.Second
	toolKillWait  = time.Minute
)

// startProcTool runs command (a shell command line) in netns ("": this
// process's namespace).
func startProcTool(netns, command, capture string) (*procTool, error) {
	t := &procTool{done: make(chan error, 1), capture: capture}
	if netns == "" {
		t.cmd = exec.Command("sh", "-c", command)
	} else {
		t.cmd = exec.Command("ip", "netns", "exec", netns, "sh", "-c", command)
	}
	out, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errp, err := t.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	t.readers.Add(2)
	go t.count(out, false)
	go t.count(errp, true)
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %q: %w", command, err)
	}
	t.pgid = t.cmd.Process.Pid
	go func() {
		t.readers.Wait()
		err := t.cmd.Wait()
		t.exited.Store(true)
		t.done <- err
	}()
	return t, nil
}

func (t *procTool) count(r io.Reader, keep bool) {
	defer t.readers.Done()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		t.outBytes.Add(uint64(len(line)))
		if len(line) > 0 && line[len(line)-1] == '\n' {
			t.outLines.Add(1)
		}
		if keep && len(line) > 0 {
			t.mu.Lock()
			if t.stderr.Len() < 64<<10 {
				t.stderr.Write(line)
			}
			t.mu.Unlock()
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// cpu sums the processes of the tool's process group.
func (t *procTool) cpu() procCPU {
	var pids []int
	for _, ps := range groupStats(t.pgid) {
		pids = append(pids, ps.pid)
	}
	return readProcCPU(pids...)
}

// groupAlive reports whether a process of the tool's group is still
// running (zombies do not count).
func (t *procTool) groupAlive() bool {
	for _, ps := range groupStats(t.pgid) {
		st := ps.stat
		if i := strings.LastIndexByte(st, ')'); i >= 0 && !strings.HasPrefix(strings.TrimSpace(st[i+1:]), "Z") {
			return true
		}
	}
	return false
}

// pidStat is a process and its /proc/PID/stat text.
type pidStat struct {
	pid  int
	stat string
}

// groupStats returns the processes of process group pgid.
func groupStats(pgid int) []pidStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []pidStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err == nil && pgidOf(string(b)) == pgid {
			out = append(out, pidStat{pid, string(b)})
		}
	}
	return out
}

// pgidOf reads field 5 (pgrp) of a /proc/PID/stat text.
func pgidOf(stat string) int {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 3 {
		return -1
	}
	n, _ := strconv.Atoi(f[2])
	return n
}

var droppedByKernel = regexp.MustCompile(`(\d+) packets? dropped by kernel`)

func (t *procTool) counters() toolCounters {
	c := toolCounters{outBytes: t.outBytes.Load(), outLines: t.outLines.Load()}
	if t.capture != "" {
		if st, err := os.Stat(t.capture); err == nil {
			c.outBytes = uint64(st.Size())
		}
		t.mu.Lock()
		if m := droppedByKernel.FindStringSubmatch(t.stderr.String()); m != nil {
			c.lost, _ = strconv.ParseUint(m[1], 10, 64)
			c.haveLost = true
		}
		t.mu.Unlock()
	}
	return c
}

// stop sends SIGINT to the process group (tcpdump and most monitors
// finish their output on it), then SIGTERM after toolStopGrace, then
// SIGKILL.
func (t *procTool) stop() (string, error) {
	if t.exited.Load() {
		err := <-t.done
		t.done <- err
		return "had exited by itself before the end of its window", fmt.Errorf("exited early: %w (stderr: %s)", err, t.stderrText())
	}
	for _, s := range []struct {
		sig  syscall.Signal
		wait time.Duration
		how  string
	}{{syscall.SIGINT, toolStopGrace, "exited after SIGINT"}, {syscall.SIGTERM, toolStopGrace, "exited after SIGTERM (ignored SIGINT)"}, {syscall.SIGKILL, toolKillWait, "killed (ignored SIGINT and SIGTERM)"}} {
		_ = syscall.Kill(-t.pgid, s.sig) // the group may be gone already
		select {
		case werr := <-t.done:
			_ = werr // after a signal the exit status tells nothing more
			// Children the leader left behind must not outlive
			// their window.
			if t.groupAlive() {
				_ = syscall.Kill(-t.pgid, syscall.SIGKILL) // gone in between: fine
				return s.how + "; processes it left in its group were killed", nil
			}
			return s.how, nil
		case <-time.After(s.wait):
		}
	}
	return "", fmt.Errorf("process group %d did not exit within %v of SIGKILL", t.pgid, toolKillWait)
}

func (t *procTool) stderrText() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(t.stderr.String())
}

// The hooks a monitor's programs run at, as the monitor study splits
// their run time: tc ingress and XDP count as ingress.
const (
	hookEgress  = "egress"
	hookIngress = "ingress"
)

// hookProgram is a BPF program attached to the watched interface, and
// the direction of the packets it runs for.
type hookProgram struct {
	hook string // hookEgress or hookIngress
	prog *ebpf.Program
}

// attachedPrograms returns the BPF programs on an interface of netns:
// TCX ingress and egress, legacy clsact filters and XDP.
func attachedPrograms(netns string, ifidx int) ([]hookProgram, error) {
	var progs []hookProgram
	err := nsrun.Named(netns, func() error {
		type found struct {
			hook string
			id   ebpf.ProgramID
		}
		var ids []found
		for _, at := range []struct {
			hook string
			typ  ebpf.AttachType
		}{{hookIngress, ebpf.AttachTCXIngress}, {hookEgress, ebpf.AttachTCXEgress}} {
			if q, err := link.QueryPrograms(link.QueryOptions{Target: ifidx, Attach: at.typ}); err == nil {
				for _, p := range q.Programs {
					ids = append(ids, found{at.hook, p.ID})
				}
			}
		}
		lk, err := netlink.LinkByIndex(ifidx)
		if err != nil {
			return err
		}
		if x := lk.Attrs().Xdp; x != nil && x.ProgId != 0 {
			ids = append(ids, found{hookIngress, ebpf.ProgramID(x.ProgId)})
		}
		for _, parent := range []struct {
			hook   string
			handle uint32
		}{{hookIngress, netlink.HANDLE_MIN_INGRESS}, {hookEgress, netlink.HANDLE_MIN_EGRESS}} {
			fs, err := netlink.FilterList(lk, parent.handle)
			if err != nil {
				continue // no clsact qdisc
			}
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && bf.Id != 0 {
					ids = append(ids, found{parent.hook, ebpf.ProgramID(bf.Id)})
				}
			}
		}
		for _, f := range ids {
			if p, err := ebpf.NewProgramFromID(f.id); err == nil {
				progs = append(progs, hookProgram{f.hook, p})
			}
		}
		return nil
	})
	return progs, err
}

// bpfRun is bpf_stats' run count and run time (ns) of some programs.
type bpfRun struct{ runs, ns uint64 }

func (a bpfRun) minus(b bpfRun) bpfRun { return bpfRun{a.runs - b.runs, a.ns - b.ns} }

// bpfTotals sums the bpf_stats of progs: all of them, and per hook.
func bpfTotals(progs []hookProgram) (all bpfRun, byHook map[string]bpfRun) {
	byHook = map[string]bpfRun{}
	for _, p := range progs {
		st, err := p.prog.Stats()
		if err != nil {
			continue
		}
		r := bpfRun{st.RunCount, uint64(st.Runtime.Nanoseconds())}
		all.runs, all.ns = all.runs+r.runs, all.ns+r.ns
		h := byHook[p.hook]
		byHook[p.hook] = bpfRun{h.runs + r.runs, h.ns + r.ns}
	}
	return all, byHook
}
