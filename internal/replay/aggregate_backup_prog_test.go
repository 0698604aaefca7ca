package replay

// The backup entries (0.0.0.0/0, ::/0, an array of their own) and the
// per-CPU cache of prefixes without an entry (agg_absent; both in
// bpf/agg.h): untracked traffic of a prefix goes to its family's backup
// entry until a tracked packet creates the prefix's entry in the map of
// the current interval, and to the prefix from then on, also on a CPU
// that cached the prefix as absent (in that map: the epoch's bit of the
// cache's tag).

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

func TestAggregateBackupAndAbsentCache(t *testing.T) {
	paths := map[string]struct {
		p              path
		backup, pa, pb string
	}{
		"v4": {path{a: ep("192.168.1.7", 1000), b: ep("10.1.2.3", 80)}, "0.0.0.0/0", "192.168.1.0/24", "10.1.2.0/24"},
		"v6": {path{a: ep("2001:db8:1:2::1", 1000), b: ep("2001:db8:aaaa:bbbb::5", 443)}, "::/0", "2001:db8:1::/48", "2001:db8:aaaa::/48"},
	}
	for name, tc := range paths {
		t.Run(name, func(t *testing.T) {
			pinToOneCPU(t)
			h := newAggHarness(t, aggConfig(), time.Second)
			base := t0 - t0%int64(time.Second)
			udp := func(at int64) { h.untrackedUDP(tc.p, base+at) }
			// Interval 0 (map 0): twice before any entry (the second
			// through the cache), then a tracked packet creates both
			// prefixes' entries, then once more.
			udp(100 * ms)
			udp(110 * ms)
			h.feed(tc.p.data(true, 1000, 0, 100), base+200*ms, true)
			udp(300 * ms)
			// Interval 1 (map 1): no entries there yet.
			udp(1100 * ms)
			// Interval 2 (map 0 again): its entries were kept.
			udp(2100 * ms)
			if err := h.a.Finish(); err != nil {
				t.Fatal(err)
			}
			type key = intervalPrefix
			got := recordsByInterval(t, h.recs, base, time.Second)
			want := []struct {
				key
				rxUDP, txUDP, rxTCP, txTCP uint64
			}{
				{key{0, tc.backup}, 2, 2, 0, 0},
				{key{0, tc.pb}, 1, 0, 0, 1},
				{key{0, tc.pa}, 0, 1, 1, 0},
				{key{1, tc.backup}, 1, 1, 0, 0},
				{key{2, tc.pb}, 1, 0, 0, 0},
				{key{2, tc.pa}, 0, 1, 0, 0},
			}
			if len(got) != len(want) {
				t.Errorf("%d records, want %d: %v", len(got), len(want), got)
			}
			for _, w := range want {
				g, ok := got[w.key]
				if !ok {
					t.Errorf("no record for %v", w.key)
					continue
				}
				if g.RX.Packets[events.ClassUDP] != w.rxUDP || g.TX.Packets[events.ClassUDP] != w.txUDP ||
					g.RX.Packets[events.ClassTCP] != w.rxTCP || g.TX.Packets[events.ClassTCP] != w.txTCP {
					t.Errorf("%v: rx udp %d tcp %d, tx udp %d tcp %d; want %d %d, %d %d", w.key,
						g.RX.Packets[events.ClassUDP], g.RX.Packets[events.ClassTCP],
						g.TX.Packets[events.ClassUDP], g.TX.Packets[events.ClassTCP],
						w.rxUDP, w.rxTCP, w.txUDP, w.txTCP)
				}
			}
		})
	}
}

// The absent cache is per CPU: a prefix entry created on another CPU
// leaves this CPU's cached "absent" in place, and only the tag (agg_gen)
// then sends the prefix's untracked traffic to its new entry.
func TestAggregateAbsentCacheOtherCPU(t *testing.T) {
	cpus := allowedCPUs(t)
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs to run the programs on, this process may use %v", cpus)
	}
	p := path{a: ep("192.168.1.7", 1000), b: ep("10.1.2.3", 80)}
	h := newAggHarness(t, aggConfig(), time.Second)
	base := t0 - t0%int64(time.Second)
	udp := func(at int64) { h.untrackedUDP(p, base+at) }
	runOnCPU(t, cpus[0])
	udp(100 * ms) // no entries: the backup, cached as absent on cpus[0]
	runOnCPU(t, cpus[1])
	h.feed(p.data(true, 1000, 0, 100), base+200*ms, true) // creates both entries
	runOnCPU(t, cpus[0])
	udp(300 * ms) // cpus[0]'s cache is stale: to the prefixes
	if err := h.a.Finish(); err != nil {
		t.Fatal(err)
	}
	got := recordsByInterval(t, h.recs, base, time.Second)
	want := map[string][2]uint64{ // rx, tx UDP packets
		"0.0.0.0/0":      {1, 1},
		"10.1.2.0/24":    {1, 0},
		"192.168.1.0/24": {0, 1},
	}
	for prefix, w := range want {
		g, ok := got[intervalPrefix{0, prefix}]
		if !ok {
			t.Errorf("no record for %s", prefix)
			continue
		}
		if rx, tx := g.RX.Packets[events.ClassUDP], g.TX.Packets[events.ClassUDP]; rx != w[0] || tx != w[1] {
			t.Errorf("%s: UDP rx %d tx %d, want %d %d", prefix, rx, tx, w[0], w[1])
		}
	}
}

// A prefix without an entry whose prefix slot another prefix holds (the
// same agg_slots index) leaves the slot alone: it goes to the backup
// entry, and the holder keeps counting in its slot.
func TestAggregateAbsentSlotTaken(t *testing.T) {
	pinToOneCPU(t)
	p := path{a: ep("192.168.1.7", 1000), b: ep("10.1.2.3", 80)}
	c := collidingV4(t, p.b.ip, 24)
	h := newAggHarness(t, aggConfig(), time.Second)
	base := t0 - t0%int64(time.Second)
	udp := func(at int64) { h.untrackedUDP(path{a: p.a, b: ep(c.String(), 5353)}, base+at) }
	h.feed(p.data(true, 1000, 0, 100), base+100*ms, true) // fills a's and b's slots
	udp(110 * ms)
	h.feed(p.data(true, 1001, 0, 100), base+120*ms, true)
	udp(130 * ms)
	if err := h.a.Finish(); err != nil {
		t.Fatal(err)
	}
	got := recordsByInterval(t, h.recs, base, time.Second)
	want := map[string][4]uint64{ // rx UDP, tx UDP, rx TCP, tx TCP
		"0.0.0.0/0":      {2, 0, 0, 0},
		"192.168.1.0/24": {0, 2, 2, 0},
		"10.1.2.0/24":    {0, 0, 0, 2},
	}
	if len(got) != len(want) {
		t.Errorf("%d records, want %d: %v", len(got), len(want), got)
	}
	for prefix, w := range want {
		g, ok := got[intervalPrefix{0, prefix}]
		if !ok {
			t.Errorf("no record for %s", prefix)
			continue
		}
		n := [4]uint64{g.RX.Packets[events.ClassUDP], g.TX.Packets[events.ClassUDP],
			g.RX.Packets[events.ClassTCP], g.TX.Packets[events.ClassTCP]}
		if n != w {
			t.Errorf("%s: rx/tx UDP, rx/tx TCP %v, want %v", prefix, n, w)
		}
	}
}

// untrackedUDP feeds a datagram no RTT source tracks from p's b to its a,
// on ingress at t.
func (h *aggHarness) untrackedUDP(p path, t int64) {
	h.tb.Helper()
	pk := p.packet(false)
	pk.UDP = &pktcraft.UDP{SrcPort: 53, DstPort: 5353, Payload: payload(20)}
	h.feed(pk.MustBytes(), t, false)
}

// collidingV4 returns an address in 10.0.0.0/8 outside addr's /plen whose
// prefix has the same agg_slots index as addr's (bpf/agg.h,
// agg_index_of over the v4-mapped key's words as the programs load them).
func collidingV4(t *testing.T, addr netip.Addr, plen int) netip.Addr {
	t.Helper()
	index := func(a netip.Addr) uint32 {
		b := netip.PrefixFrom(a, plen).Masked().Addr().As4()
		mapped := binary.LittleEndian.Uint32([]byte{0, 0, 0xff, 0xff})
		x := mapped ^ binary.LittleEndian.Uint32(b[:]) ^ uint32(plen)
		return (x * 0x9e3779b1) >> 24
	}
	own := netip.PrefixFrom(addr, plen).Masked()
	for i := 1; i < 1<<16; i++ {
		c := netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 9})
		if !own.Contains(c) && index(c) == index(addr) {
			return c
		}
	}
	t.Fatalf("no address in 10.0.0.0/8 shares %v's slot", own)
	return netip.Addr{}
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for cpu := range 1024 {
		if all.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

// runOnCPU keeps the test's goroutine on one thread and moves that thread
// to cpu (BPF_PROG_TEST_RUN runs the program on the caller's CPU, so the
// per-CPU maps written are cpu's) until the test ends or the next call.
func runOnCPU(t *testing.T, cpu int) {
	t.Helper()
	var all, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.SchedSetaffinity(0, &all) })
}

// pinToOneCPU keeps the test's goroutine on one thread and that thread on
// one CPU until the test ends, so that every program run shares one CPU's
// per-CPU maps.
func pinToOneCPU(t *testing.T) {
	t.Helper()
	runOnCPU(t, allowedCPUs(t)[0])
}

// intervalPrefix names one prefix record: its interval's index and prefix.
type intervalPrefix struct {
	interval int64
	prefix   string
}

// recordsByInterval indexes prefix records by interval (counted from base
// in steps of interval) and prefix; two records for one key are an error.
func recordsByInterval(t *testing.T, recs []events.Aggregate, base int64, interval time.Duration) map[intervalPrefix]events.Aggregate {
	t.Helper()
	got := map[intervalPrefix]events.Aggregate{}
	for _, g := range recs {
		k := intervalPrefix{(g.Start - base) / int64(interval), g.Prefix.String()}
		if _, dup := got[k]; dup {
			t.Errorf("two records for %v", k)
		}
		got[k] = g
	}
	return got
}
