package loader

import (
	"fmt"
	"strings"
)

// How stale state is expired (Variant.Cleanup).
const (
	CleanupIterator = "iterator" // map-element iterators
	CleanupProgRun  = "prog-run" // tc program with bpf_for_each_map_elem, run by BPF_PROG_TEST_RUN
	CleanupNone     = "none"     // no timed expiry; eviction when maps fill
)

// How snapshots of per-flow summaries are taken (Variant.Summaries).
const (
	SummariesIterator = "iterator" // iterator writes records to its stream
	SummariesMapWalk  = "map-walk" // user space reads flow_map and summary_map
)

// Variant records which variant of each optional part is in use, and why
// a fallback was taken. Every run's start line and stats record carry it.
type Variant struct {
	Cleanup   string // CleanupIterator, CleanupProgRun or CleanupNone; "" before NewCleaner
	Summaries string // SummariesIterator or SummariesMapWalk; "" without flow summaries
	Replay    string // replay only: "xdp-batch", "xdp" or "tc"
	// Notes say, one line each, what the kernel refused and what is used
	// instead.
	Notes []string
}

func (v *Variant) note(format string, args ...any) {
	v.Notes = append(v.Notes, fmt.Sprintf(format, args...))
}

// String is the short form, e.g. "cleanup=prog-run summaries=map-walk".
func (v Variant) String() string {
	var parts []string
	for _, kv := range [][2]string{{"cleanup", v.Cleanup}, {"summaries", v.Summaries}, {"replay", v.Replay}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, " ")
}
