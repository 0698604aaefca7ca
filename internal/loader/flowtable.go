package loader

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/probe"
)

// The flow table (bpf/flowtable.h) is an array of buckets of flowWays
// slots each: a flow lives in one of the slots of the bucket its key
// hashes to, so a bucket can be full while others have room. The table
// has flowSlack slots per flow of --flow-map-size: with random placement
// (a Poisson count of flows per bucket), --flow-map-size flows leave about
// 4 % of them in a full bucket (20 % with one slot per flow), half as many
// flows 0.4 %. Such a flow replaces a replaceable neighbour or is refused
// (flow_map_full), as every flow beyond the hash map's size was.
const (
	flowWays  = 4 // FLOW_WAYS
	flowSlack = 2
)

// flowTagClaimed is FLOW_TAG_CLAIMED: a slot's tag above it is a flow.
const flowTagClaimed = 1

// replayFlowSeed is the hash seed of replay: fixed, so that which flows
// share a bucket, and so which one a full bucket evicts, is the same from
// run to run and the output with it.
const replayFlowSeed = 0x7274747363_6f7065 // "rttscope"

// flowBuckets is the bucket count of a table for n flows.
func flowBuckets(n uint32) uint32 {
	return uint32((uint64(n)*flowSlack + flowWays - 1) / flowWays)
}

// flowUsedBits is FLOW_USED_BITS: the slots one word of flow_used, the
// bitmap of slots in use, covers.
const flowUsedBits = 64

// flowUsedWords is the size of flow_used for a table of this many slots.
func flowUsedWords(slots uint32) uint32 { return (slots + flowUsedBits - 1) / flowUsedBits }

// sparseSlots: walkFlowSlots reads the flow table slot by slot while
// fewer than 1/sparseSlots of its slots are in use, and in batches of
// every slot otherwise: one lookup (~2 us here) costs about as much as
// reading 8 slots in a batch (~0.25 us each; BenchmarkSummaryWalk).
const sparseSlots = 8

// usedSlots returns the indexes of the slots flow_used marks in use, in
// order: the bitmap is read in one batch (1 bit per slot).
func (o *Objects) usedSlots() ([]uint32, error) {
	n := o.FlowUsed.MaxEntries()
	keys, words := make([]uint32, n), make([]uint64, n)
	var cursor ebpf.MapBatchCursor
	got := 0
	for got < len(keys) {
		k, err := o.FlowUsed.BatchLookup(&cursor, keys[got:], words[got:], nil)
		got += k
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break // that was the last batch
		}
		if err != nil {
			return nil, fmt.Errorf("read flow_used: %w", err)
		}
	}
	var out []uint32
	for i := range words[:got] {
		for w := words[i]; w != 0; w &= w - 1 {
			out = append(out, keys[i]*flowUsedBits+uint32(bits.TrailingZeros64(w)))
		}
	}
	return out, nil
}

// walkFlowSlots calls visit with the slots of the flow table that may hold
// a flow (visit checks the tag: a slot can be emptied or claimed between
// the bitmap's read and its own). A sparse table is read slot by slot,
// only the slots flow_used marks; a fuller one in batches of every slot.
func (o *Objects) walkFlowSlots(visit func(*probe.RttscopeFlowSlot) error) error {
	used, err := o.usedSlots()
	if err != nil {
		return err
	}
	if uint64(len(used))*sparseSlots < uint64(o.FlowMap.MaxEntries()) {
		var slot probe.RttscopeFlowSlot
		for _, i := range used {
			if err := o.FlowMap.Lookup(i, &slot); err != nil {
				return fmt.Errorf("read flow table: %w", err)
			}
			if err := visit(&slot); err != nil {
				return err
			}
		}
		return nil
	}
	const batch = 1024
	idx := make([]uint32, batch)
	slots := make([]probe.RttscopeFlowSlot, batch)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := o.FlowMap.BatchLookup(&cursor, idx, slots, nil)
		for i := range slots[:n] {
			if err := visit(&slots[i]); err != nil {
				return err
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil // that was the last batch
		}
		if err != nil {
			return fmt.Errorf("read flow table: %w", err)
		}
	}
}

// sentPktsBits is SENT_PKTS_BITS (bpf/flow.h): a flow direction's
// sent_pkts holds its packet count below it and, above it, the fast path's
// packets not yet added to COUNTER_FAST_PATH.
const sentPktsBits = 48

// DirPackets is a flow direction's packet count (dir_pkts). A drift from
// the C constant fails TestFastPathCountsInBatches (internal/replay).
func DirPackets(sentPkts uint64) uint64 { return sentPkts & (1<<sentPktsBits - 1) }

// dirFastUnflushed is what dir_fast_unflushed reads of the same word.
func dirFastUnflushed(sentPkts uint64) uint64 { return sentPkts >> sentPktsBits }

// unflushedFastPackets returns the fast path's packets that the flows in
// the table keep and have not yet added to COUNTER_FAST_PATH (bpf/flow.h,
// dir_fast_unflushed: up to FAST_COUNT_BATCH-1 per direction).
func (o *Objects) unflushedFastPackets() (uint64, error) {
	var n uint64
	err := o.walkFlowSlots(func(slot *probe.RttscopeFlowSlot) error {
		if slot.Tag > flowTagClaimed {
			n += dirFastUnflushed(slot.State.Dir[0].SentPkts) + dirFastUnflushed(slot.State.Dir[1].SentPkts)
		}
		return nil
	})
	return n, err
}

// FlowTableSlots is how many flows a table sized for n (--flow-map-size)
// can hold at most: its slots.
func FlowTableSlots(n uint32) uint32 { return flowBuckets(n) * flowWays }

// flowSeed is the flow table's hash seed: random at each live load, so
// that the tuples that share a bucket cannot be chosen from outside.
func flowSeed(replay bool) (uint64, error) {
	if replay {
		return replayFlowSeed, nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("flow table seed: %w", err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// tupleBytes is the key's memory as the kernel wrote it (struct
// network_tuple: the generated type has the C layout), for the decoders
// that read the events' tuples.
func tupleBytes(k *probe.RttscopeNetworkTuple) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(k)), unsafe.Sizeof(*k))
}
