package bpfprof

import (
	"errors"
	"os"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// monoNow is CLOCK_MONOTONIC in ns: the clock perf record is told to
// stamp its samples with (-k CLOCK_MONOTONIC), so the two compare.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// follower keeps the layout of every program whose name matches that is
// loaded while the profile runs. A benchmark loads and unloads its
// programs once per window, so the set is polled, not read once.
type follower struct {
	match      func(name string) bool
	progs      map[ebpf.ProgramID]*loadedProg
	skipped    map[ebpf.ProgramID]bool
	noLineInfo map[string]bool // names of matching programs without it
	polls      int
}

func newFollower(match func(string) bool) *follower {
	return &follower{
		match:      match,
		progs:      map[ebpf.ProgramID]*loadedProg{},
		skipped:    map[ebpf.ProgramID]bool{},
		noLineInfo: map[string]bool{},
	}
}

// poll walks the loaded programs once at time now (monoNow): new matching
// ones are read, known ones marked seen, vanished ones unloaded. Programs
// present at the first poll count as loaded since before the profile.
func (f *follower) poll(now int64) error {
	seen := map[ebpf.ProgramID]bool{}
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return err
		}
		id = next
		seen[id] = true
		if p, ok := f.progs[id]; ok {
			p.lastSeen = now
			continue
		}
		if f.skipped[id] {
			continue
		}
		f.add(id, now)
	}
	for id, p := range f.progs {
		if !seen[id] && p.unloadSeen == 0 {
			p.unloadSeen = now
		}
	}
	f.polls++
	return nil
}

// add reads program id if its name matches; one that vanished meanwhile or
// cannot be read is left out.
func (f *follower) add(id ebpf.ProgramID, now int64) {
	p, err := readProg(id)
	if p == nil || !f.match(p.name) {
		f.skipped[id] = true
		return
	}
	if err != nil {
		f.skipped[id] = true
		f.noLineInfo[p.name] = true
		return
	}
	if f.polls > 0 {
		p.firstSeen = now
	}
	p.lastSeen = now
	f.progs[id] = p
}
