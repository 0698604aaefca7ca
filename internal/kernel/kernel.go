// Package kernel probes the BPF features rttscope relies on, each with a
// tiny program or map of its own, before anything real is loaded. Kernels
// differ in what they allow (version, build options, lockdown and LSM
// policies), so every optional feature has a fallback: the probe results
// decide which variant the loader tries first, and Report prints them for
// `rttscope doctor`.
//
// RTTSCOPE_DISABLE (a comma-separated list of feature IDs, or "all") makes
// optional features count as disabled, so that tests can force every
// fallback on a kernel that has everything.
package kernel

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// DisableEnv names the environment variable that forces fallbacks.
const DisableEnv = "RTTSCOPE_DISABLE"

// ID names a feature, in RTTSCOPE_DISABLE and in `rttscope doctor`.
type ID string

// The features rttscope probes.
const (
	BTF            ID = "btf"
	RingBuf        ID = "ringbuf"
	TC             ID = "tc"
	TCTestRun      ID = "tc_test_run"
	TCX            ID = "tcx"
	XDP            ID = "xdp"
	MapElemIter    ID = "map_elem_iter"
	ForEachMapElem ID = "for_each_map_elem"
	XDPTestRunMeta ID = "xdp_test_run_meta"
)

// Feature describes one kernel feature and what its absence costs.
type Feature struct {
	ID       ID
	Name     string
	Since    string // first mainline release that has it
	Required bool   // rttscope refuses to run without it
	UsedFor  string
	Instead  string // what is used when it is absent
	Lost     string // what users lose then
	probe    func() error
}

// Status is the outcome of a probe.
type Status int

// Probe outcomes.
const (
	Present  Status = iota
	Missing         // the kernel does not have it (too old, not built)
	Refused         // the kernel has it but does not allow it (EPERM)
	Disabled        // switched off by RTTSCOPE_DISABLE
	Failed          // the probe failed for another reason (see Err)
)

func (s Status) String() string {
	return [...]string{"present", "missing", "refused", "disabled", "failed"}[s]
}

// Result is a probed feature.
type Result struct {
	Feature
	Status Status
	Err    error // nil when Present
}

// OK reports whether the feature can be used.
func (r Result) OK() bool { return r.Status == Present }

// table lists every probe, required ones first.
var table = []Feature{
	{ID: BTF, Name: "kernel BTF (/sys/kernel/btf/vmlinux)", Since: "5.4 (CONFIG_DEBUG_INFO_BTF)", Required: true,
		UsedFor: "replay (__sk_buff layout), iterator programs", probe: probeBTF},
	{ID: RingBuf, Name: "BPF ring buffer", Since: "5.8", Required: true,
		UsedFor: "events to user space", probe: probeRingBuf},
	{ID: TC, Name: "tc BPF programs (sched_cls)", Since: "4.1", Required: true,
		UsedFor: "the data path (egress and tc ingress hooks)", probe: probeTC},
	{ID: TCTestRun, Name: "BPF_PROG_TEST_RUN of tc programs", Since: "4.12", Required: true,
		UsedFor: "replay, cleanup without iterators", probe: probeTCTestRun},
	{ID: TCX, Name: "TCX links", Since: "6.6",
		UsedFor: "tc hooks owned by the process", Instead: "clsact qdisc + filter",
		Lost: "after kill -9 the filter stays attached (tc filter del ... prio 49374)", probe: probeTCX},
	{ID: XDP, Name: "XDP programs", Since: "4.8",
		UsedFor: "--ingress-hook xdp", Instead: "--ingress-hook tc",
		Lost: "the cheaper XDP ingress hook", probe: probeXDP},
	{ID: MapElemIter, Name: "map-element iterators (iter/bpf_map_elem)", Since: "5.8",
		UsedFor: "expiry of idle state, flow-summary snapshots",
		Instead: "expiry by a tc program run with BPF_PROG_TEST_RUN (bpf_for_each_map_elem); snapshots read by user space",
		Lost:    "nothing measured; a snapshot costs syscalls per flow", probe: probeMapElemIter},
	{ID: ForEachMapElem, Name: "bpf_for_each_map_elem helper", Since: "5.13",
		UsedFor: "expiry of idle state when iterators are absent",
		Instead: "no timed expiry: idle flows are replaced when the maps fill",
		Lost:    "\"flow timeout\" closing events (needed only without iterators)", probe: probeForEach},
	{ID: XDPTestRunMeta, Name: "BPF_PROG_TEST_RUN of XDP programs with metadata", Since: "5.15",
		UsedFor: "fast, batched replay", Instead: "replay through the tc programs, one packet per run",
		Lost: "replay speed", probe: probeXDPTestRunMeta},
}

var (
	mu    sync.Mutex
	cache = map[ID]Result{}
)

// Check returns what this kernel offers of one feature. The probe runs
// once per process; RTTSCOPE_DISABLE is read on every call, so tests can
// change it between loads.
func Check(id ID) Result {
	i := slices.IndexFunc(table, func(f Feature) bool { return f.ID == id })
	if i < 0 {
		panic(fmt.Sprintf("kernel: unknown feature %q", id))
	}
	f := table[i]
	if !f.Required && disabled(id) {
		return Result{Feature: f, Status: Disabled, Err: fmt.Errorf("disabled by %s", DisableEnv)}
	}
	mu.Lock()
	defer mu.Unlock()
	r, ok := cache[id]
	if !ok {
		r = Result{Feature: f}
		if err := f.probe(); err != nil {
			r.Status, r.Err = classify(err), err
		}
		cache[id] = r
	}
	return r
}

// Has reports whether a feature can be used.
func Has(id ID) bool { return Check(id).OK() }

// All probes every feature, in the order of the doctor's table.
func All() []Result {
	out := make([]Result, 0, len(table))
	for _, f := range table {
		out = append(out, Check(f.ID))
	}
	return out
}

// CheckRequired returns, as one line a user can act on, the first required
// feature this kernel lacks.
func CheckRequired() error {
	if os.Geteuid() != 0 {
		return errors.New("loading BPF programs needs root (or CAP_BPF and CAP_NET_ADMIN): run with sudo")
	}
	for _, f := range table {
		if !f.Required {
			continue
		}
		if r := Check(f.ID); !r.OK() {
			return fmt.Errorf("this kernel %s %s (Linux %s+), which rttscope needs: %s",
				verb(r.Status), f.Name, f.Since, Explain(r.Err))
		}
	}
	return nil
}

func verb(s Status) string {
	if s == Refused {
		return "does not allow"
	}
	return "lacks"
}

func disabled(id ID) bool {
	for _, v := range strings.Split(os.Getenv(DisableEnv), ",") {
		v = strings.TrimSpace(v)
		if v == "all" || ID(v) == id {
			return true
		}
	}
	return false
}

func classify(err error) Status {
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return Refused
	case errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOTSUP) || errors.Is(err, enotsupp) || errors.Is(err, os.ErrNotExist):
		return Missing
	}
	return Failed
}

// enotsupp is the kernel-internal ENOTSUPP, which leaks out of some calls.
const enotsupp = unix.Errno(524)

// Explain names an error's errno and its likely cause, for refusals of a
// feature or program.
func Explain(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		if os.Geteuid() == 0 {
			return msg + " (EPERM as root: a security policy such as kernel lockdown or an LSM forbids it)"
		}
		return msg + " (EPERM: run as root, or with CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON)"
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, enotsupp):
		return msg + " (kernel too old, or the option not built in)"
	case errors.Is(err, unix.E2BIG):
		return msg + " (E2BIG: past this kernel's verifier complexity limit; please report it with `uname -r` and `rttscope doctor`)"
	}
	return msg
}
