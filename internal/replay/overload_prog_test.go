package replay

import (
	"fmt"
	"testing"

	"github.com/rttscope/rttscope/internal/loader"
)

// A flood of new flows fills the flow and timestamp maps: unanswered flows
// and their timestamps are replaced, the established flow keeps its state
// and its samples, and nothing is refused while replaceable entries exist.
func TestOverloadEviction(t *testing.T) {
	cfg := testConfig()
	cfg.FlowMapSize, cfg.TimestampMapSize, cfg.RateLimit = 64, 64, 0
	h := newHarness(t, cfg)
	est := pathV4
	at := t0
	sample := func(id uint32) {
		h.feed(est.data(true, id, 0, 100), at, true)
		h.feed(est.ack(false, 1, id), at+10*ms, false)
		at += 20 * ms
	}
	sample(1)
	const flood = 5000
	for i := range flood {
		p := path{a: ep(fmt.Sprintf("198.18.%d.%d", i/256, i%256), uint16(1000+i)), b: ep("10.0.0.2", 80)}
		h.feed(p.data(true, 7, 0, 10), at, false)
		at += 1000
		if i%500 == 0 {
			sample(uint32(100 + i))
		}
	}
	sample(99999)
	got := h.takeRTTs()
	if want := 2 + flood/500; len(got) != want {
		t.Errorf("established flow gave %d samples during the flood, want %d", len(got), want)
	}
	st := h.stats()
	t.Logf("stats %+v", st)
	if st.FlowMapFull != 0 || st.TimestampMapFull != 0 {
		t.Errorf("refused inserts although replaceable entries existed: %+v", st)
	}
	if slots := int(loader.FlowTableSlots(64)); st.FlowsEvicted < uint64(flood-slots) || st.TimestampsEvicted < flood-64 {
		t.Errorf("too few evictions: %+v", st)
	}
	if st.Flows > uint64(loader.FlowTableSlots(64)) || st.Timestamps > 64 {
		t.Errorf("occupancy above the flow table's slots or the timestamp map's size: %+v", st)
	}
	h.checkFlowUsed()
}
