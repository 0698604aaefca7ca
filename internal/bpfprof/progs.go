package bpfprof

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
)

// jitLine is where the JIT put the first instruction of one source line.
type jitLine struct {
	addr uint64
	file string // relative to the source tree, e.g. bpf/rttscope.c
	line uint32
	text string
}

// jitFunc is one function (the program or a subprogram) of a JIT image.
type jitFunc struct {
	addr uint64
	size uint32
}

// loadedProg is one load of a BPF program: its JIT image's address ranges
// and line table, and when it was seen loaded. Another program may get the
// same addresses once this one is gone, hence the times.
type loadedProg struct {
	id        ebpf.ProgramID
	name, tag string
	jitedSize uint32
	funcs     []jitFunc
	lines     []jitLine // sorted by addr
	// Poll times (monoNow): the first poll that found it (0: loaded
	// before the profile began), the last, and the first that missed it
	// (0: still loaded).
	firstSeen, lastSeen, unloadSeen int64
}

// group names the programs whose samples add up: the same program built
// and configured the same way gets the same JIT image at every load (a
// benchmark loads it once per window).
func (p *loadedProg) group() string {
	return fmt.Sprintf("%s/%s/%d", p.name, p.tag, p.jitedSize)
}

// contains says whether addr lies in one of the image's functions.
func (p *loadedProg) contains(addr uint64) bool {
	for _, f := range p.funcs {
		if addr >= f.addr && addr < f.addr+uint64(f.size) {
			return true
		}
	}
	return false
}

// lineAt returns the source line whose instructions include addr.
func (p *loadedProg) lineAt(addr uint64) (jitLine, bool) {
	i := sort.Search(len(p.lines), func(i int) bool { return p.lines[i].addr > addr }) - 1
	if i < 0 {
		return jitLine{}, false
	}
	return p.lines[i], true
}

// errNoLineInfo: the program has no BTF line info or no JIT image (JIT
// off, or an object built without -g).
var errNoLineInfo = errors.New("no JIT line info")

// readProg reads the JIT image's layout and line table of program id. The
// program's file descriptor is closed before returning: holding it would
// keep the program loaded after its owner let it go.
func readProg(id ebpf.ProgramID) (*loadedProg, error) {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return nil, err
	}
	p := &loadedProg{id: id, name: fullName(info), tag: info.Tag}
	if n, err := info.JitedSize(); err == nil {
		p.jitedSize = n
	}
	addrs, ok1 := info.JitedKsymAddrs()
	lens, ok2 := info.JitedFuncLens()
	jl, ok3 := info.JitedLineInfos()
	lines, err := info.LineInfos()
	if !ok1 || !ok2 || !ok3 || err != nil || len(addrs) != len(lens) || len(jl) == 0 {
		return p, errNoLineInfo
	}
	for i := range addrs {
		p.funcs = append(p.funcs, jitFunc{addr: uint64(addrs[i]), size: lens[i]})
	}
	for i, l := range lines {
		if i >= len(jl) {
			break
		}
		p.lines = append(p.lines, jitLine{
			addr: jl[i],
			file: sourcePath(l.Line.FileName()),
			line: l.Line.LineNumber(),
			text: strings.TrimSpace(l.Line.Line()),
		})
	}
	sort.SliceStable(p.lines, func(i, j int) bool { return p.lines[i].addr < p.lines[j].addr })
	return p, nil
}

// fullName is the program's name from BTF: the kernel keeps only the first
// 15 bytes of the name given at load time.
func fullName(info *ebpf.ProgramInfo) string {
	funcs, err := info.FuncInfos()
	if err == nil && len(funcs) > 0 && funcs[0].Offset == 0 && funcs[0].Func != nil {
		return funcs[0].Func.Name
	}
	return info.Name
}

// sourcePath shortens the compiler's file name (bpf2go compiles from
// internal/probe, so it reads ./../../bpf/x.c) to its path in the tree.
func sourcePath(name string) string {
	name = filepath.ToSlash(filepath.Clean(name))
	for strings.HasPrefix(name, "../") {
		name = strings.TrimPrefix(name, "../")
	}
	return name
}
