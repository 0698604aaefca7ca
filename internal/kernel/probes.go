package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Each probe loads at most a two-instruction program or a one-entry map
// of its own and attaches nothing anywhere.

func probeBTF() error {
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	return err
}

func probeRingBuf() error { return features.HaveMapType(ebpf.RingBuf) }

func probeTC() error { return features.HaveProgramType(ebpf.SchedCLS) }

func probeXDP() error { return features.HaveProgramType(ebpf.XDP) }

func probeForEach() error {
	return features.HaveProgramHelper(ebpf.SchedCLS, asm.FnForEachMapElem)
}

// returnProgram loads a program that returns ret.
func returnProgram(typ ebpf.ProgramType, attach ebpf.AttachType, attachTo string, ret int32) (*ebpf.Program, error) {
	return ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Type:         typ,
		AttachType:   attach,
		AttachTo:     attachTo,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, ret), asm.Return()},
	}, ebpf.ProgramOptions{LogDisabled: true})
}

// probeMapElemIter loads an empty map-element iterator: some kernels have
// the program type but refuse this attach target (EPERM).
func probeMapElemIter() error {
	p, err := returnProgram(ebpf.Tracing, ebpf.AttachTraceIter, "bpf_map_elem", 0)
	if err != nil {
		return err
	}
	return p.Close()
}

func probeTCTestRun() error {
	p, err := returnProgram(ebpf.SchedCLS, ebpf.AttachNone, "", 0)
	if err != nil {
		return err
	}
	defer p.Close()
	_, err = p.Run(&ebpf.RunOptions{Data: make([]byte, 64)})
	return err
}

// probeTCX asks the kernel to create a TCX link on an interface index that
// cannot exist: a kernel with TCX answers ENODEV, one without refuses the
// attach type.
func probeTCX() error {
	p, err := returnProgram(ebpf.SchedCLS, ebpf.AttachNone, "", -1)
	if err != nil {
		return err
	}
	defer p.Close()
	l, err := link.AttachTCX(link.TCXOptions{Interface: math.MaxInt32, Program: p, Attach: ebpf.AttachTCXIngress})
	if err == nil {
		l.Close()
		return errors.New("TCX link on a nonexistent interface succeeded")
	}
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}

// XDPReplayMetaSize is the size of the metadata area the replay programs
// read (struct replay_meta in bpf/rttscope.c).
const XDPReplayMetaSize = 16

// RunXDPWithMeta runs prog once with a metadata area of XDPReplayMetaSize
// bytes in front of a frame, as replay does; n is metadata plus frame.
func RunXDPWithMeta(prog *ebpf.Program, n int) error {
	b := make([]byte, n)
	// A local experimental EtherType: no parser takes it for IP.
	binary.BigEndian.PutUint16(b[XDPReplayMetaSize+12:], 0x88b5)
	ctx := make([]byte, 24) // struct xdp_md: data, data_end, data_meta, ...
	binary.LittleEndian.PutUint32(ctx[0:], XDPReplayMetaSize)
	binary.LittleEndian.PutUint32(ctx[4:], uint32(n))
	_, err := prog.Run(&ebpf.RunOptions{Data: b, Context: ctx})
	return err
}

// XDPPass loads an XDP program that passes every packet.
func XDPPass() (*ebpf.Program, error) {
	return returnProgram(ebpf.XDP, ebpf.AttachNone, "", 2) // XDP_PASS
}

func probeXDPTestRunMeta() error {
	p, err := XDPPass()
	if err != nil {
		return err
	}
	defer p.Close()
	if err := RunXDPWithMeta(p, XDPReplayMetaSize+64); err != nil {
		return fmt.Errorf("XDP test run with metadata: %w", err)
	}
	return nil
}
