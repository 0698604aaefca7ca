package replay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/probe"
)

// progRunAttr is the BPF_PROG_TEST_RUN member of union bpf_attr
// (include/uapi/linux/bpf.h, "struct { ... } test"). Pointers are held as
// unsafe.Pointer so the garbage collector keeps what they point to alive;
// each is padded to the 64 bits the kernel reads (see haveFastRun).
type progRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      unsafe.Pointer
	_           [8 - unsafe.Sizeof(uintptr(0))]byte
	dataOut     unsafe.Pointer
	_           [8 - unsafe.Sizeof(uintptr(0))]byte
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       unsafe.Pointer
	_           [8 - unsafe.Sizeof(uintptr(0))]byte
	ctxOut      unsafe.Pointer
	_           [8 - unsafe.Sizeof(uintptr(0))]byte
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

const bpfProgTestRun = 10 // BPF_PROG_TEST_RUN

// haveFastRun: the raw attribute above is only laid out right when a
// pointer fills its 64-bit slot (64-bit platforms); elsewhere testRunner
// falls back to cilium/ebpf's Program.Run.
const haveFastRun = unsafe.Sizeof(uintptr(0)) == 8

// testRunner runs one program on one packet per call through
// BPF_PROG_TEST_RUN with a context buffer it owns, without allocating:
// cilium/ebpf's Program.Run serialises the context into a fresh buffer on
// every call, which costs about as much as the rest of the Go side of a
// replayed packet.
type testRunner struct {
	prog    *ebpf.Program
	ctx     []byte
	maxData int
	attr    progRunAttr
}

func newTestRunner(prog *ebpf.Program, ctx []byte) *testRunner {
	return &testRunner{prog: prog, ctx: ctx, maxData: maxTestRunData()}
}

// run runs the program once on data with the current contents of the
// context buffer. Data longer than the kernel accepts is cut: the programs
// take lengths from the IP headers and only read headers, so a packet
// aggregated by GRO/TSO (up to 64 KiB in captures taken on a host) gives
// the same result as a whole one.
func (r *testRunner) run(data []byte) error {
	data = data[:min(len(data), r.maxData)]
	if !haveFastRun {
		_, err := r.prog.Run(&ebpf.RunOptions{Data: data, Context: r.ctx})
		return err
	}
	if len(data) == 0 {
		return errors.New("empty packet")
	}
	a := &r.attr
	*a = progRunAttr{
		progFD:     uint32(r.prog.FD()),
		dataSizeIn: uint32(len(data)),
		dataIn:     unsafe.Pointer(&data[0]),
		repeat:     1,
		ctxSizeIn:  uint32(len(r.ctx)),
		ctxIn:      unsafe.Pointer(&r.ctx[0]),
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgTestRun, uintptr(unsafe.Pointer(a)), unsafe.Sizeof(*a))
	runtime.KeepAlive(data)
	runtime.KeepAlive(r.ctx)
	a.dataIn, a.ctxIn = nil, nil // do not keep the caller's buffer alive
	switch errno {
	case 0, unix.EINTR:
		// With repeat 1, EINTR means the program ran and a signal was
		// pending on the way out (as cilium/ebpf treats it).
		return nil
	}
	return fmt.Errorf("BPF_PROG_TEST_RUN: %w", errno)
}

// fallbackMaxData is the largest packet BPF_PROG_TEST_RUN takes for tc
// programs on x86-64 with 4 KiB pages (PAGE_SIZE - NET_SKB_PAD -
// SKB_DATA_ALIGN(sizeof(struct skb_shared_info))), used if probing fails.
const fallbackMaxData = 3712

var maxData struct {
	once sync.Once
	n    int
}

// maxTestRunData returns the largest packet the kernel accepts in
// BPF_PROG_TEST_RUN for a tc program (it depends on the page size and the
// kernel's struct sizes), found once by bisection with an empty program.
func maxTestRunData() int {
	maxData.once.Do(func() {
		maxData.n = fallbackMaxData
		var objs probe.EmptyObjects
		if err := probe.LoadEmptyObjects(&objs, nil); err != nil {
			return
		}
		defer objs.Close()
		ok := func(n int) bool {
			b := make([]byte, n)
			binary.BigEndian.PutUint16(b[12:], 0x88b5) // local experimental EtherType
			_, err := objs.EmptyTc.Run(&ebpf.RunOptions{Data: b})
			return err == nil
		}
		lo, hi := 64, 1<<16 // lo is accepted, hi is not
		if !ok(lo) || ok(hi) {
			return
		}
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; ok(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		maxData.n = lo
	})
	return maxData.n
}

// minTestRunData returns how long a frame must be for BPF_PROG_TEST_RUN
// to take it: an Ethernet header, plus a whole IPv4 or IPv6 header when
// the EtherType says so (the kernel checks those two).
func minTestRunData(frame []byte) int {
	if len(frame) < 14 {
		return 14
	}
	switch binary.BigEndian.Uint16(frame[12:]) {
	case etherTypeIPv4:
		return 14 + 20
	case etherTypeIPv6:
		return 14 + 40
	}
	return 14
}
