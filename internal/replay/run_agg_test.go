package replay_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/capture"
	"github.com/rttscope/rttscope/internal/replay"
	"github.com/rttscope/rttscope/internal/sampling"
	"github.com/rttscope/rttscope/internal/testutil"
)

// TestRunAggregate: replaying a capture in aggregated mode (intervals in
// capture time) gives, per prefix and interval, exactly as many samples as
// the per-sample replay of the same capture has in that interval; the
// per-flow summaries count exactly the samples of their flows; sequential
// and parallel replays agree.
func TestRunAggregate(t *testing.T) {
	testutil.RequireRoot(t)
	path := filepath.Join(t.TempDir(), "multi.pcapng")
	if err := capture.WritePcapng(path, []uint16{capture.LinkTypeEthernet}, multiFlow(t)); err != nil {
		t.Fatal(err)
	}
	cfg := runConfig()
	cfg.TCPFlowTimeout, cfg.OtherFlowTimeout = time.Second, time.Second
	perSample, _, err := replayFile(t, path, "jsonl", replay.Options{BPF: cfg, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	const interval = int64(200 * time.Millisecond)
	type key struct {
		start  int64
		prefix string
	}
	wantAgg := map[key]uint64{}
	perFlow := map[string]uint64{}
	type rec struct {
		Type          string `json:"type"`
		Timestamp     int64  `json:"timestamp"`
		IntervalStart int64  `json:"interval_start"`
		Prefix        string `json:"ip_prefix"`
		Count         uint64 `json:"count_rtt"`
		SrcIP         string `json:"src_ip"`
		SrcPort       int    `json:"src_port"`
		DstIP         string `json:"dest_ip"`
		DstPort       int    `json:"dest_port"`
		RTT           int64  `json:"rtt"`
		Reason        string `json:"reason"`
		SrcStats      struct {
			Count uint64 `json:"count_rtt"`
		} `json:"src_stats"`
		DstStats struct {
			Count uint64 `json:"count_rtt"`
		} `json:"dest_stats"`
	}
	flowKey := func(r *rec) string {
		a, b := fmt.Sprintf("%s:%d", r.SrcIP, r.SrcPort), fmt.Sprintf("%s:%d", r.DstIP, r.DstPort)
		if a > b {
			a, b = b, a
		}
		return a + "+" + b
	}
	each := func(out []byte, fn func(*rec)) {
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var r rec
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			fn(&r)
		}
	}
	samples := 0
	each(perSample, func(r *rec) {
		if r.RTT == 0 {
			return
		}
		samples++
		bits := 24
		if netip.MustParseAddr(r.SrcIP).Is6() {
			bits = 48
		}
		p := netip.PrefixFrom(netip.MustParseAddr(r.SrcIP), bits).Masked().String()
		wantAgg[key{r.Timestamp - r.Timestamp%interval, p}]++
		perFlow[flowKey(r)]++
	})

	agg := cfg
	agg.Aggregate, agg.FlowSummary = true, true
	var first []byte
	for _, workers := range []int{1, 3} {
		out, _, err := replayFile(t, path, "jsonl", replay.Options{BPF: agg, Report: sampling.Report{AggregateInterval: time.Duration(interval)}, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		got := map[key]uint64{}
		summaries, timedOut := 0, 0
		each(out, func(r *rec) {
			switch r.Type {
			case "aggregate":
				if r.IntervalStart%interval != 0 {
					t.Errorf("interval start %d not aligned", r.IntervalStart)
				}
				if r.Count > 0 {
					got[key{r.IntervalStart, r.Prefix}] += r.Count
				}
			case "flow_summary":
				summaries++
				if r.Reason == "flow timeout" {
					timedOut++
				}
				if n := r.SrcStats.Count + r.DstStats.Count; n != perFlow[flowKey(r)] {
					t.Errorf("workers %d: summary of %s counts %d samples, per-sample output %d", workers, flowKey(r), n, perFlow[flowKey(r)])
				}
			case "":
				t.Fatalf("per-sample record in aggregated mode: %+v", r)
			}
		})
		if len(got) != len(wantAgg) {
			t.Errorf("workers %d: %d (interval, prefix) pairs with samples, per-sample output has %d", workers, len(got), len(wantAgg))
		}
		for k, n := range wantAgg {
			if got[k] != n {
				t.Errorf("workers %d: %+v: %d samples aggregated, %d per sample", workers, k, got[k], n)
			}
		}
		if timedOut == 0 {
			t.Errorf("workers %d: no flow summary at a timeout (%d summaries)", workers, summaries)
		}
		t.Logf("workers %d: %d samples in %d (interval, prefix) records, %d flow summaries", workers, samples, len(got), summaries)
		// Same records; the order of summaries of flows that time out
		// in one cleanup follows the hash map's (randomly seeded) order.
		lines := bytes.Split(out, []byte("\n"))
		slices.SortFunc(lines, bytes.Compare)
		out = bytes.Join(lines, []byte("\n"))
		if first == nil {
			first = out
		} else if !bytes.Equal(first, out) {
			t.Errorf("parallel aggregated replay differs from the sequential one")
		}
	}
}
