package replay

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/probe"
)

// oneBucket is the number of slots of a flow table of a single bucket
// (bpf/flowtable.h: four ways), so that every flow of a test competes for
// the same slots; oneBucketSize is the --flow-map-size that gives it (two
// slots per flow: internal/loader/flowtable.go).
const oneBucket, oneBucketSize = 4, 2

// flowPath is the i-th connection of these tests: 10.9.0.i:2000+i ->
// 10.0.0.2:80, this host (a) sending.
func flowPath(i int) path {
	return path{a: ep(fmt.Sprintf("10.9.%d.%d", i/256, i%256), uint16(2000+i)), b: ep("10.0.0.2", 80)}
}

// A full bucket of established flows refuses a new flow and counts it;
// once one of them has been idle past its timeout, the next new flow
// replaces it.
func TestFlowTableFullBucketOfEstablishedFlows(t *testing.T) {
	if n := loader.FlowTableSlots(oneBucketSize); n != oneBucket {
		t.Fatalf("a table for %d flows has %d slots, want one bucket of %d", oneBucketSize, n, oneBucket)
	}
	cfg := testConfig()
	cfg.FlowMapSize, cfg.RateLimit = oneBucketSize, 0
	cfg.TCPFlowTimeout = time.Second
	h := newHarness(t, cfg)
	at := t0
	for i := range oneBucket {
		p := flowPath(i)
		h.feed(p.data(true, 1, 0, 100), at, true)
		h.feed(p.ack(false, 1, 1), at+5*ms, false)
		at += 10 * ms
	}
	if got := len(h.takeRTTs()); got != oneBucket {
		t.Fatalf("%d samples from the %d established flows, want one each", got, oneBucket)
	}
	late := flowPath(oneBucket)
	h.feed(late.data(true, 1, 0, 100), at, true)
	h.feed(late.ack(false, 1, 1), at+5*ms, false)
	st := h.stats()
	if st.FlowMapFull != 1 || st.Flows != oneBucket || st.FlowsEvicted != 0 {
		t.Errorf("a new flow beside %d established ones: %+v, want it refused (flow_map_full 1, flows %d, none evicted)", oneBucket, st, oneBucket)
	}
	if got := h.takeRTTs(); len(got) != 0 {
		t.Errorf("the refused flow gave samples: %v", got)
	}

	// Two seconds later every established flow is idle past its 1 s
	// timeout: the next new flow takes a slot.
	at += 2 * time.Second.Nanoseconds()
	h.feed(late.data(true, 2, 0, 100), at, true)
	h.feed(late.ack(false, 2, 2), at+5*ms, false)
	st = h.stats()
	if st.FlowMapFull != 1 || st.FlowsEvicted != 1 || st.Flows != oneBucket {
		t.Errorf("a new flow beside idle ones: %+v, want one evicted, none more refused", st)
	}
	if got := h.takeRTTs(); len(got) != 1 {
		t.Errorf("the new flow gave %d samples, want 1", len(got))
	}
	h.checkFlowUsed()
}

// A full bucket evicts, of its replaceable flows (none answered), the one
// seen least recently, and never an established one.
func TestFlowTableEvictsLeastRecentlySeen(t *testing.T) {
	cfg := testConfig()
	cfg.FlowMapSize, cfg.RateLimit = oneBucketSize, 0
	h := newHarness(t, cfg)
	for i := range oneBucket { // flow i seen at i ms
		h.feed(flowPath(i).data(true, 1, 0, 100), t0+int64(i)*ms, true)
	}
	h.feed(flowPath(1).data(true, 2, 0, 100), t0+4*ms, true) // flow 1 seen again

	// Flow 4 replaces flow 0, seen least recently.
	h.feed(flowPath(oneBucket).data(true, 1, 0, 100), t0+5*ms, true)
	h.feed(flowPath(0).ack(false, 1, 1), t0+6*ms, false)
	if got := h.takeRTTs(); len(got) != 0 {
		t.Errorf("flow 0 answered after its eviction: %v, want no sample", got)
	}
	// Flow 2 is answered: established, it stays.
	h.feed(flowPath(2).ack(false, 1, 1), t0+7*ms, false)
	if got := h.takeRTTs(); len(got) != 1 {
		t.Fatalf("flow 2 answered: %d samples, want 1", len(got))
	}
	// Flow 5 replaces flow 3 (seen at 3 ms), not flow 1 (4 ms) nor the
	// established flow 2 (7 ms).
	h.feed(flowPath(oneBucket+1).data(true, 1, 0, 100), t0+8*ms, true)
	h.feed(flowPath(3).ack(false, 1, 1), t0+9*ms, false)
	h.feed(flowPath(1).ack(false, 1, 2), t0+10*ms, false)
	got := h.takeRTTs()
	if len(got) != 1 || got[0].Flow != flowPath(1).tcpFlow(false) {
		t.Errorf("flows 3 and 1 answered after flow 5 came: %v, want one sample, of flow 1", got)
	}
	if st := h.stats(); st.FlowsEvicted != 2 || st.FlowMapFull != 0 || st.Flows != oneBucket {
		t.Errorf("stats %+v, want 2 flows evicted, none refused, %d in the table", st, oneBucket)
	}
	h.checkFlowUsed()
}

// Two CPUs that see the first packet of a flow at the same moment create
// it once: no key is ever in two slots. Each round releases the same new
// flow's first packet on two threads pinned to two CPUs at once.
func TestFlowTableConcurrentCreation(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skipf("skipping: needs two CPUs to race, this machine has %d", runtime.NumCPU())
	}
	cfg := testConfig()
	cfg.FlowMapSize, cfg.RateLimit = 16384, 0
	h := newHarness(t, cfg)
	const rounds = 3000
	frames := make([][]byte, rounds)
	for i := range frames {
		frames[i] = flowPath(i).data(true, 1, 0, 10)
	}
	// A two-thread barrier per round: each thread arrives, then spins
	// until the other has, and both run the round's packet at once.
	var arrived atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for cpu := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errs <- fmt.Errorf("pin to CPU %d: %w", cpu, err)
				arrived.Store(1 << 40) // release the other thread
				return
			}
			for round := range int64(rounds) {
				arrived.Add(1)
				for arrived.Load() < 2*(round+1) {
				}
				if arrived.Load() >= 1<<40 {
					return
				}
				if _, err := h.e.objs.RttscopeTcEgress.Run(&ebpf.RunOptions{Data: frames[round]}); err != nil {
					errs <- err
					arrived.Store(1 << 40)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	slots, err := flowSlots(h.e.objs.FlowMap)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[probe.RttscopeNetworkTuple]int{}
	lost := 0 // rounds where one thread met the other's creation under way
	for _, s := range slots {
		seen[s.Key]++
		if loader.DirPackets(s.State.Dir[0].SentPkts)+loader.DirPackets(s.State.Dir[1].SentPkts) == 1 {
			lost++
		}
	}
	for k, n := range seen {
		if n > 1 {
			var f events.Flow
			events.DecodeTuple(unsafe.Slice((*byte)(unsafe.Pointer(&k)), unsafe.Sizeof(k)), &f)
			t.Errorf("flow %v in %d slots", f, n)
		}
	}
	st := h.stats()
	if uint64(len(slots)) != st.Flows {
		t.Errorf("%d flows in the table, the counters say %d", len(slots), st.Flows)
	}
	h.checkFlowUsed()
	t.Logf("%d rounds: %d flows in the table, %d evicted, %d refused; %d rounds counted one packet only (the threads met during the creation)",
		rounds, len(slots), st.FlowsEvicted, st.FlowMapFull, lost)
}

// flowSlots returns the table's flows (published slots).
func flowSlots(m *ebpf.Map) ([]probe.RttscopeFlowSlot, error) {
	var out []probe.RttscopeFlowSlot
	var i uint32
	var s probe.RttscopeFlowSlot
	it := m.Iterate()
	for it.Next(&i, &s) {
		if s.Tag > 1 { // FLOW_TAG_CLAIMED
			out = append(out, s)
		}
	}
	return out, it.Err()
}

// checkFlowUsed fails the test unless flow_used marks exactly the slots
// that hold something, each slot knowing its own index (bpf/flowtable.h):
// the walks of the table (cleanup, summaries) only visit what flow_used
// marks. Call it when no packet is being processed.
func (h *harness) checkFlowUsed() {
	h.tb.Helper()
	want := map[uint32]uint64{}
	var i uint32
	var s probe.RttscopeFlowSlot
	it := h.e.objs.FlowMap.Iterate()
	for it.Next(&i, &s) {
		if s.Tag == 0 {
			continue
		}
		want[i/64] |= 1 << (i % 64) // FLOW_USED_BITS
		if s.Index != i {
			h.tb.Errorf("slot %d (tag %#x) says it is slot %d", i, s.Tag, s.Index)
		}
	}
	if err := it.Err(); err != nil {
		h.tb.Fatalf("read flow table: %v", err)
	}
	var word uint32
	var used uint64
	it = h.e.objs.FlowUsed.Iterate()
	for it.Next(&word, &used) {
		if used != want[word] {
			h.tb.Errorf("flow_used[%d] = %#x, the slots in use are %#x", word, used, want[word])
		}
	}
	if err := it.Err(); err != nil {
		h.tb.Fatalf("read flow_used: %v", err)
	}
}
