package replay

import (
	"encoding/binary"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/kernel"
)

// packetRunner hands one captured frame to the programs, with its capture
// time and direction. Each engine and each parallel worker owns one.
type packetRunner interface {
	feed(frame []byte, tsUnixNano int64, egress bool) error
	// maxFrame is the longest frame fed whole; longer ones are cut (the
	// programs read only headers and take lengths from them).
	maxFrame() int
}

// newRunner returns the cheapest runner this kernel supports: the XDP
// replay program (capture time and direction in the XDP metadata area),
// else the tc programs (capture time in __sk_buff.tstamp).
func (e *Engine) newRunner() packetRunner {
	if e.objs.RttscopeXdpReplay == nil {
		return e.newTCRunner()
	}
	if max := maxXDPReplayData(); max > replayMetaSize+14 {
		return newXDPRunner(e.objs.RttscopeXdpReplay, max)
	}
	return e.newTCRunner()
}

// runnerVariant names the runner newRunner picks, for Variant.Replay.
func (e *Engine) runnerVariant() string {
	if _, ok := e.run.(*xdpRunner); !ok {
		return "tc"
	}
	if e.objs.RttscopeXdpReplayBatch != nil {
		return "xdp-batch"
	}
	return "xdp"
}

// newTCRunner runs the tc programs themselves, as attached live. The BPF
// unit tests use it, since they test the live data path.
func (e *Engine) newTCRunner() *tcRunner {
	ctx := make([]byte, e.skbSize)
	return &tcRunner{
		ctx:     ctx,
		tsOff:   e.tsOff,
		egress:  newTestRunner(e.objs.RttscopeTcEgress, ctx),
		ingress: newTestRunner(e.objs.RttscopeTcIngress, ctx),
	}
}

// tcRunner runs the tc egress or ingress program with the capture time in
// the tstamp field of the __sk_buff context.
type tcRunner struct {
	ctx             []byte
	tsOff           int
	egress, ingress *testRunner
}

func (r *tcRunner) feed(frame []byte, ts int64, egress bool) error {
	binary.LittleEndian.PutUint64(r.ctx[r.tsOff:], uint64(ts))
	if egress {
		return r.egress.run(frame)
	}
	return r.ingress.run(frame)
}

func (r *tcRunner) maxFrame() int { return r.egress.maxData }

// Layout of struct replay_meta (bpf/rttscope.c) and struct xdp_md.
const (
	replayMetaSize = kernel.XDPReplayMetaSize // u64 tstamp, u32 egress, u32 reserved
	xdpMdSize      = 24                       // data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex
)

// xdpRunner runs rttscope_xdp_replay. BPF_PROG_TEST_RUN takes the metadata
// as the first xdp_md.data bytes of the input, so every frame is copied
// behind a replay_meta into one reused buffer.
type xdpRunner struct {
	tr  *testRunner
	buf []byte
}

func newXDPRunner(prog *ebpf.Program, maxData int) *xdpRunner {
	ctx := make([]byte, xdpMdSize)
	binary.LittleEndian.PutUint32(ctx[0:], replayMetaSize) // xdp_md.data
	return &xdpRunner{
		tr:  &testRunner{prog: prog, ctx: ctx, maxData: maxData},
		buf: make([]byte, maxData),
	}
}

func (r *xdpRunner) feed(frame []byte, ts int64, egress bool) error {
	n := min(len(frame), r.maxFrame())
	b := r.buf[:replayMetaSize+n]
	binary.LittleEndian.PutUint64(b[0:], uint64(ts))
	var dir uint32
	if egress {
		dir = 1
	}
	binary.LittleEndian.PutUint32(b[8:], dir)
	copy(b[replayMetaSize:], frame[:n])
	binary.LittleEndian.PutUint32(r.tr.ctx[4:], uint32(len(b))) // xdp_md.data_end
	return r.tr.run(b)
}

func (r *xdpRunner) maxFrame() int { return r.tr.maxData - replayMetaSize }

var xdpReplayData struct {
	once sync.Once
	n    int
}

// maxXDPReplayData returns the largest input (metadata + frame) that
// BPF_PROG_TEST_RUN of an XDP program takes here, or 0 when XDP test runs
// with metadata do not work on this kernel (or are disabled, see package
// kernel). It probes with a throwaway program so that the replay programs'
// counters stay untouched.
func maxXDPReplayData() int {
	if !kernel.Has(kernel.XDPTestRunMeta) {
		return 0
	}
	xdpReplayData.once.Do(func() {
		prog, err := kernel.XDPPass()
		if err != nil {
			return
		}
		defer prog.Close()
		ok := func(n int) bool { return kernel.RunXDPWithMeta(prog, n) == nil }
		lo, hi := replayMetaSize+64, 1<<16 // lo must be accepted, hi is not wanted
		if !ok(lo) {
			return
		}
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; ok(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		xdpReplayData.n = lo
	})
	return xdpReplayData.n
}
