package loader

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/rttscope/rttscope/internal/probe"
)

// A load whose value replaces its pointer becomes the value; a load that
// a jump lands on, or that keeps the pointer, stays.
func TestInlineConstants(t *testing.T) {
	rodata := func(off uint32) asm.Instruction {
		return asm.LoadMapValue(asm.R1, 0, off).WithReference(".rodata")
	}
	insns := asm.Instructions{
		rodata(4),                                 // 0-1
		asm.LoadMem(asm.R1, asm.R1, 2, asm.Byte),  // 2: byte at 6, set below: 7
		rodata(0),                                 // 3-4
		asm.LoadMem(asm.R1, asm.R1, 0, asm.Word),  // 5: word at 0: 0x01020304
		rodata(8),                                 // 6-7
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Byte),  // 8: keeps the pointer: stays
		asm.JEq.Imm(asm.R2, 0, "").WithSymbol(""), // 9: jumps to 12
		rodata(8),                                 // 10-11
		asm.LoadMem(asm.R1, asm.R1, 0, asm.Byte),  // 12: a jump target: stays
		asm.Return(),
	}
	insns[6].Offset = 2 // raw 9 + 1 + 2 = 12
	spec := &ebpf.CollectionSpec{
		Maps: map[string]*ebpf.MapSpec{".rodata": {
			Name: ".rodata", Type: ebpf.Array, KeySize: 4, ValueSize: 16, MaxEntries: 1,
			Contents: []ebpf.MapKV{{Key: uint32(0), Value: []byte{4, 3, 2, 1, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0}}},
		}},
		Programs:  map[string]*ebpf.ProgramSpec{"p": {Name: "p", Type: ebpf.SchedCLS, Instructions: insns}},
		Variables: map[string]*ebpf.VariableSpec{"v": {Name: "v", SectionName: ".rodata", Offset: 6, Value: []byte{7}}},
	}
	n, err := inlineConstants(spec)
	if err != nil {
		t.Fatal(err)
	}
	got := spec.Programs["p"].Instructions
	if n != 2 {
		t.Errorf("rewrote %d loads, want 2:\n%v", n, got)
	}
	for _, c := range []struct {
		i    int
		want int64
	}{{0, 7}, {2, 0x01020304}} {
		ld, mov := got[c.i], got[c.i+1]
		if ld.Src != asm.R0 || ld.Constant != c.want || ld.Reference() != "" {
			t.Errorf("insn %d: %v, want r1 = %#x", c.i, ld, c.want)
		}
		if mov.OpCode != asm.Mov.Op(asm.RegSource) || mov.Src != asm.R1 || mov.Dst != asm.R1 {
			t.Errorf("insn %d: %v, want r1 = r1", c.i+1, mov)
		}
	}
	for _, i := range []int{4, 7} {
		if got[i].Reference() != ".rodata" {
			t.Errorf("insn %d rewritten: %v", i, got[i])
		}
	}
}

// On the real object, configure inlines the data path's constants: loads
// of .rodata are fewer afterwards, and none left matches the pattern.
func TestConfigureInlinesDataPathConstants(t *testing.T) {
	spec, err := probe.LoadRttscope()
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		for _, ins := range spec.Programs["rttscope_tc_egress"].Instructions {
			if ins.OpCode.IsDWordLoad() && ins.Src == asm.PseudoMapValue && ins.Reference() == ".rodata" {
				n++
			}
		}
		return n
	}
	before := count()
	if err := configure(spec, DefaultConfig(), false); err != nil {
		t.Fatal(err)
	}
	after := count()
	t.Logf(".rodata loads in rttscope_tc_egress: %d before, %d after", before, after)
	if after >= before/2 {
		t.Errorf("%d of %d .rodata loads left", after, before)
	}
	data, err := rodataValues(spec)
	if err != nil {
		t.Fatal(err)
	}
	if n := inlineProgram(spec.Programs["rttscope_tc_egress"].Instructions, data); n != 0 {
		t.Errorf("a second pass still rewrote %d loads", n)
	}
}
