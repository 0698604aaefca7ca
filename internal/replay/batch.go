package replay

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
)

// Layout of the buffer rttscope_xdp_replay_batch walks (bpf/rttscope.c):
// replayPad bytes of padding, then [frame][trailer] records, the packet to
// run first last.
const (
	replayPad      = 16
	replayTrailer  = 16 // u64 tstamp, u16 len, u8 egress, 5 reserved
	replayBatchMax = 64
	// replayBufBytes is what one batch may use: XDP test runs keep
	// PAGE_SIZE - 256 - sizeof(skb_shared_info) bytes linear (3520 with
	// 4 KiB pages) and put the rest in fragments, which the batch program
	// cannot walk; 3072 is linear on every kernel with pages >= 4 KiB.
	replayBufBytes = 3072
	xdpPass        = 2
)

// batchRunner queues packets and runs them through the batched XDP replay
// program, as many per BPF_PROG_TEST_RUN call as fit in one linear XDP
// buffer: the call's fixed cost (~1.5 µs here) is then shared.
type batchRunner struct {
	tr    *testRunner
	max   int // largest buffer the kernel takes linear
	size  int // bytes the queued records need
	recs  []batchRec
	arena []byte
	buf   []byte
}

type batchRec struct {
	off, n int
	ts     int64
	egress bool
}

func newBatchRunner(prog *ebpf.Program) *batchRunner {
	ctx := make([]byte, xdpMdSize) // data = 0: no metadata
	return &batchRunner{
		tr:  &testRunner{prog: prog, ctx: ctx, maxData: replayBufBytes},
		max: replayBufBytes,
		buf: make([]byte, 0, replayBufBytes),
	}
}

// fits says whether a frame of n bytes can be queued at all.
func (b *batchRunner) fits(n int) bool { return replayPad+n+replayTrailer <= b.max }

// room says whether a frame of n bytes fits next to those queued.
func (b *batchRunner) room(n int) bool { return replayPad+b.size+n+replayTrailer <= b.max }

// add queues a frame (copied); the caller flushes first when it does not
// fit (room) or the queue is full, so that errors name the right packets.
func (b *batchRunner) add(frame []byte, ts int64, egress bool) error {
	if len(b.recs) == replayBatchMax || !b.room(len(frame)) {
		return fmt.Errorf("batched replay: queue full")
	}
	need := len(frame) + replayTrailer
	b.recs = append(b.recs, batchRec{off: len(b.arena), n: len(frame), ts: ts, egress: egress})
	b.arena = append(b.arena, frame...)
	b.size += need
	return nil
}

// flush runs every queued packet, in the order they were added.
func (b *batchRunner) flush() error {
	if len(b.recs) == 0 {
		return nil
	}
	buf := append(b.buf[:0], make([]byte, replayPad)...)
	for i := len(b.recs) - 1; i >= 0; i-- {
		r := &b.recs[i]
		buf = append(buf, b.arena[r.off:r.off+r.n]...)
		var t [replayTrailer]byte
		binary.LittleEndian.PutUint64(t[0:], uint64(r.ts))
		binary.LittleEndian.PutUint16(t[8:], uint16(r.n))
		if r.egress {
			t[10] = 1
		}
		buf = append(buf, t[:]...)
	}
	b.buf = buf
	b.recs, b.arena, b.size = b.recs[:0], b.arena[:0], 0
	binary.LittleEndian.PutUint32(b.tr.ctx[4:], uint32(len(buf))) // xdp_md.data_end
	if err := b.tr.run(buf); err != nil {
		return err
	}
	if b.tr.attr.retval != xdpPass {
		return fmt.Errorf("batched replay program rejected its buffer (return %d)", b.tr.attr.retval)
	}
	return nil
}
