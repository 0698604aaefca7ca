package pdm

import (
	"context"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

const (
	bulkRounds   = 3               // rounds of PDM off then on (order alternating)
	bulkDuration = 2 * time.Second // per transfer
	bulkDelay    = 5 * time.Millisecond
	bulkRate     = 100_000_000 // bottleneck, bit/s
	bulkPacing   = 50_000_000  // sender pacing, below the bottleneck
	// bulkRouteMTU leaves room for the 16-byte PDM header in full-size
	// segments on the lab's 1500-byte links (docs/pdm.md).
	bulkRouteMTU = 1484
)

// TestLabBulkRetransmits: a TCP bulk transfer over IPv6 with PDM on both
// ends retransmits no more than the same transfer with PDM off, in
// interleaved rounds over one lab path. The lab's interfaces have
// segmentation offloads off and the client's route to the server has an
// MTU of 1484, so PDM goes into every full-size data segment: the test
// checks that it did (not a vacuous comparison of transfers without PDM).
// The sender paces below the bottleneck, so congestion alone loses
// nothing; a retransmission rise would be PDM's doing (oversized or
// corrupted packets). Tolerance for noise: on <= off + max(3, off/10),
// summed over the rounds. Throughput is logged, not asserted.
func TestLabBulkRetransmits(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := pdmLab(ctx, t, lab.Config{Prefix: "rspdmbulk", ForceUserspaceDelay: true,
		Paths: []lab.PathSpec{{DelayToServer: bulkDelay, DelayToClient: bulkDelay, RateBitsPerSec: bulkRate}}})
	srv, cli := l.Servers[0], l.Client
	if out, err := cli.Command(ctx, "ip", "-6", "route", "add", netip.PrefixFrom(l.ServerAddr6[0], 128).String(),
		"via", l.MiddleboxAddr6.String(), "dev", lab.ClientIf, "mtu", strconv.Itoa(bulkRouteMTU)).CombinedOutput(); err != nil {
		t.Fatalf("ip route: %v\n%s", err, out)
	}
	// TCP builds GSO packets whatever the device's offloads (the stack
	// segments them in software after tc): with at most one segment per
	// packet, each leaves tc as one packet that PDM can go into.
	if out, err := cli.Command(ctx, "ip", "link", "set", "dev", lab.ClientIf, "gso_max_segs", "1").CombinedOutput(); err != nil {
		t.Fatalf("ip link: %v\n%s", err, out)
	}
	sink, err := traffic.NewSink(srv, l.ServerAddr6[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()

	var retrans, bytes [2]uint64 // [off, on]
	var dur [2]time.Duration
	for round := range bulkRounds {
		for i := range 2 {
			on := (round+i)%2 == 1
			res, cc, sc := bulkTransfer(ctx, t, l, sink.Addr(), on)
			k := 0
			if on {
				k = 1
				ins := cc[probe.PdmPdmCounterPDM_C_INSERTED]
				t.Logf("round %d, PDM on: client inserted %d, skipped_mtu %d, skipped_gso %d; server pdm_seen %d",
					round, ins, cc[probe.PdmPdmCounterPDM_C_SKIP_MTU], cc[probe.PdmPdmCounterPDM_C_SKIP_GSO], sc[probe.PdmPdmCounterPDM_C_PDM_SEEN])
				// At least one header per 1500 bytes sent: the full-size
				// segments carried PDM.
				if ins < res.Bytes/1500 || cc[probe.PdmPdmCounterPDM_C_SKIP_MTU] != 0 || cc[probe.PdmPdmCounterPDM_C_SKIP_GSO] != 0 {
					t.Errorf("round %d: PDM not in the data segments: %d inserted for %d bytes, counters %v", round, ins, res.Bytes, cc.Map())
				}
				if sc[probe.PdmPdmCounterPDM_C_PDM_SEEN] < ins*9/10 {
					t.Errorf("round %d: the server saw %d PDM options of the %d the client inserted", round, sc[probe.PdmPdmCounterPDM_C_PDM_SEEN], ins)
				}
			}
			retrans[k] += uint64(res.Retransmits)
			bytes[k] += res.Bytes
			dur[k] += res.Duration
			t.Logf("round %d, PDM %s: %d bytes in %v (%.1f Mbit/s), %d retransmissions, srtt %v",
				round, onOff(on), res.Bytes, res.Duration.Round(time.Millisecond), mbps(res.Bytes, res.Duration), res.Retransmits, res.SRTT)
		}
	}
	t.Logf("PDM off: %.1f Mbit/s, %d retransmissions; PDM on: %.1f Mbit/s, %d retransmissions",
		mbps(bytes[0], dur[0]), retrans[0], mbps(bytes[1], dur[1]), retrans[1])
	if bytes[0] == 0 || bytes[1] == 0 {
		t.Fatalf("no data went through: %v bytes (off, on)", bytes)
	}
	if limit := retrans[0] + max(3, retrans[0]/10); retrans[1] > limit {
		t.Errorf("PDM on: %d retransmissions, more than PDM off (%d) + max(3, 10 %%) = %d", retrans[1], retrans[0], limit)
	}
}

func mbps(b uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(b) * 8 / d.Seconds() / 1e6
}

// bulkTransfer runs one paced bulk transfer from the client to dst, with
// rttscope pdm on the client and the server when on; it returns the
// transfer and the counters of the client's and the server's PDM
// programs.
func bulkTransfer(ctx context.Context, t *testing.T, l *lab.Lab, dst netip.AddrPort, on bool) (traffic.BulkResult, Counters, Counters) {
	t.Helper()
	var counters [2]Counters
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	if on {
		ready := make(chan struct{}, 2)
		for i, n := range []struct {
			node   *lab.Node
			ifname string
		}{{l.Client, lab.ClientIf}, {l.Servers[0], lab.ServerIf}} {
			w, _ := format.New("jsonl", io.Discard, format.Options{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = Run(runCtx, Options{Interfaces: []string{n.ifname}, Netns: n.node.Name, Output: w,
					Ready:  func() { ready <- struct{}{} },
					Done:   func(c Counters) { counters[i] = c },
					Config: Config{MapSize: DefaultMapSize, Lifetime: DefaultLifetime}})
			}()
		}
		for range 2 {
			select {
			case <-ready:
			case <-time.After(30 * time.Second):
				stop()
				wg.Wait()
				t.Fatalf("rttscope pdm not attached after 30 s: %v", errs)
			}
		}
	}
	res, err := traffic.BulkStats(ctx, l.Client, dst, bulkDuration, bulkPacing)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("bulk transfer (PDM %s): %v", onOff(on), err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rttscope pdm (%s): %v", []string{"client", "server"}[i], err)
		}
	}
	if !on {
		return res, Counters{}, Counters{}
	}
	return res, counters[0], counters[1]
}
