package loader

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// inlineConstants puts the configuration's values (the .rodata constants
// configure sets) into the programs' instructions: a load whose value
// replaces its own pointer,
//
//	rX = &.rodata + off    (ld_imm64, a map value address)
//	rX = *(size *)(rX + k)
//
// becomes rX = VALUE; rX = rX (a move the x86 JIT emits nothing for).
// The verifier already knows frozen .rodata and prunes the branches on
// it, but it keeps these loads: about 40 a packet on the data path, each
// 14-15 bytes of JIT code, the first of them a wait for the
// configuration's cache line. Without them default mode costs ~5 % less
// a packet (docs/performance.md, "Round 12"). Rewritten in place, so that
// the function and line info stay on the instructions, and the raw
// offsets (jumps) do not move. A load that a jump lands on is left alone,
// and so is a pointer kept for several loads (constant arrays). Returns
// how many loads were rewritten.
func inlineConstants(spec *ebpf.CollectionSpec) (int, error) {
	data, err := rodataValues(spec)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ps := range spec.Programs {
		n += inlineProgram(ps.Instructions, data)
	}
	return n, nil
}

// rodataValues is .rodata as the programs will see it: the section's
// contents with the values set through spec.Variables, which reach the map
// only when the collection is created.
func rodataValues(spec *ebpf.CollectionSpec) ([]byte, error) {
	ro, ok := spec.Maps[".rodata"]
	if !ok || len(ro.Contents) != 1 {
		return nil, errors.New("embedded BPF object has no .rodata section")
	}
	orig, ok := ro.Contents[0].Value.([]byte)
	if !ok {
		return nil, fmt.Errorf("embedded BPF object: .rodata holds %T", ro.Contents[0].Value)
	}
	data := append([]byte(nil), orig...)
	for _, v := range spec.Variables {
		if v.SectionName != ".rodata" || v.Value == nil {
			continue
		}
		if int(v.Offset)+len(v.Value) > len(data) {
			return nil, fmt.Errorf("embedded BPF object: %s lies outside .rodata", v.Name)
		}
		copy(data[v.Offset:], v.Value)
	}
	return data, nil
}

func inlineProgram(insns asm.Instructions, data []byte) int {
	// Raw offsets (an ld_imm64 takes two slots) and every jump's target.
	raw := make([]int64, len(insns))
	var off int64
	for i, ins := range insns {
		raw[i] = off
		off += int64(ins.Size() / asm.InstructionSize)
	}
	targets := map[int64]bool{}
	for i, ins := range insns {
		op := ins.OpCode
		if op.Class().IsJump() && op.JumpOp() != asm.Call && op.JumpOp() != asm.Exit {
			targets[raw[i]+1+int64(ins.Offset)] = true
		}
	}
	n := 0
	for i := 0; i+1 < len(insns); i++ {
		ld, use := insns[i], insns[i+1]
		if !ld.OpCode.IsDWordLoad() || ld.Src != asm.PseudoMapValue || ld.Reference() != ".rodata" {
			continue
		}
		if use.OpCode.Class() != asm.LdXClass || use.OpCode.Mode() != asm.MemMode ||
			use.Src != ld.Dst || use.Dst != ld.Dst || targets[raw[i+1]] {
			continue
		}
		v, ok := readValue(data, int64(uint64(ld.Constant)>>32)+int64(use.Offset), use.OpCode.Size().Sizeof())
		if !ok {
			continue
		}
		ld.Src = asm.R0 // a plain 64-bit immediate
		ld.Constant = int64(v)
		insns[i] = ld.WithReference("")
		use.OpCode = asm.Mov.Op(asm.RegSource)
		use.Src, use.Offset, use.Constant = use.Dst, 0, 0
		insns[i+1] = use
		n++
	}
	return n
}

// readValue reads the little-endian value of size bytes at off (the
// objects are built for bpfel).
func readValue(data []byte, off int64, size int) (uint64, bool) {
	if off < 0 || off+int64(size) > int64(len(data)) {
		return 0, false
	}
	b := data[off:]
	switch size {
	case 1:
		return uint64(b[0]), true
	case 2:
		return uint64(binary.LittleEndian.Uint16(b)), true
	case 4:
		return uint64(binary.LittleEndian.Uint32(b)), true
	case 8:
		return binary.LittleEndian.Uint64(b), true
	}
	return 0, false
}
