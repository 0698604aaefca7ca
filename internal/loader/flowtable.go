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

// sparseSlots: Summaries.walk reads the flow table slot by slot while
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
