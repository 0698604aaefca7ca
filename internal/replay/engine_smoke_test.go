package replay

import (
	"net/netip"
	"os"
	"testing"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

type collect struct {
	rtts  []events.RTT
	flows []events.FlowEvent
}

func (c *collect) RTT(e *events.RTT) error        { c.rtts = append(c.rtts, *e); return nil }
func (c *collect) Flow(e *events.FlowEvent) error { c.flows = append(c.flows, *e); return nil }

func TestSmokeTCP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	var c collect
	cfg := loader.DefaultConfig()
	cfg.RateLimit = 0
	e, err := NewEngine(cfg, &c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	data := pktcraft.Packet{Src: a, Dst: b, TCP: &pktcraft.TCP{SrcPort: 1000, DstPort: 80, ACK: true, TSval: 100, TSecr: 7, Payload: []byte("hello")}}.MustBytes()
	ack := pktcraft.Packet{Src: b, Dst: a, TCP: &pktcraft.TCP{SrcPort: 80, DstPort: 1000, ACK: true, TSval: 8, TSecr: 100}}.MustBytes()
	if err := e.Feed(data, 1_700_000_000_000_000_000, true); err != nil {
		t.Fatal(err)
	}
	if err := e.Feed(ack, 1_700_000_000_040_000_123, false); err != nil {
		t.Fatal(err)
	}
	var s events.Stats
	e.Stats(&s)
	t.Logf("rtts %+v flows %+v stats %+v", c.rtts, c.flows, s)
	if len(c.rtts) != 1 || c.rtts[0].RTT != 40_000_123 {
		t.Fatalf("want one 40.000123 ms sample, got %+v", c.rtts)
	}
}
