package privacy

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/testutil"
)

// collect keeps a copy of every record it is given.
type collect struct {
	mu    sync.Mutex
	rtts  []events.RTT
	flows []events.FlowEvent
	stats []events.Stats
	aggs  []events.Aggregate
	sums  []events.FlowSummary
	keys  []events.AnonKey
	pdms  []events.PDM
	pdmIs []events.PDMInterval
}

func (c *collect) WriteRTT(e *events.RTT) error {
	c.mu.Lock()
	c.rtts = append(c.rtts, *e)
	c.mu.Unlock()
	return nil
}
func (c *collect) WriteFlow(e *events.FlowEvent) error {
	c.flows = append(c.flows, *e)
	return nil
}
func (c *collect) WriteStats(s *events.Stats) error         { c.stats = append(c.stats, *s); return nil }
func (c *collect) WriteAggregate(a *events.Aggregate) error { c.aggs = append(c.aggs, *a); return nil }
func (c *collect) WriteFlowSummary(s *events.FlowSummary) error {
	c.sums = append(c.sums, *s)
	return nil
}
func (c *collect) WriteAnonKey(k *events.AnonKey) error { c.keys = append(c.keys, *k); return nil }
func (c *collect) WritePDM(p *events.PDM) error         { c.pdms = append(c.pdms, *p); return nil }
func (c *collect) WritePDMInterval(p *events.PDMInterval) error {
	c.pdmIs = append(c.pdmIs, *p)
	return nil
}
func (c *collect) Flush() error                      { return nil }
func (c *collect) Close() error                      { return nil }
func (c *collect) Restart(reopen func() error) error { return reopen() }
func (c *collect) Capabilities() format.Capability   { return format.All }

const t0 = int64(1_700_000_000_000_000_000)

var (
	client4 = netip.MustParseAddr("10.1.2.3")
	server4 = netip.MustParseAddr("192.0.2.77")
	client6 = netip.MustParseAddr("2001:db8:1::42")
	server6 = netip.MustParseAddr("2001:db8:ff::1")
	real    = []netip.Addr{client4, server4, client6, server6}
)

func flow(src, dst netip.Addr, sport, dport uint16, p events.Protocol) events.Flow {
	return events.Flow{Src: events.Endpoint{IP: src, Port: sport}, Dst: events.Endpoint{IP: dst, Port: dport}, Proto: p}
}

// records is a run's worth of every record type, starting at t0+start.
func records(start int64) []any {
	tcp := flow(client4, server4, 40000, 443, events.ProtoTCP)
	icmp := flow(client6, server6, 77, 77, events.ProtoICMPv6)
	return []any{
		&events.FlowEvent{Time: t0 + start, Flow: tcp, Type: events.FlowOpening, Reason: events.ReasonSYN, TriggeredBySrc: true},
		&events.RTT{Time: t0 + start + 1_500_000_000, Flow: tcp.Reverse(), RTT: 40 * time.Millisecond, MinRTT: 40 * time.Millisecond,
			SentPackets: 3, SentBytes: 300, RecPackets: 2, RecBytes: 200},
		&events.RTT{Time: t0 + start + 2_000_000_000, Flow: icmp, RTT: 10 * time.Millisecond, MinRTT: 10 * time.Millisecond, SentPackets: 1},
		&events.Aggregate{Time: t0 + start + 3_000_000_000, Start: t0 + start, Prefix: netip.MustParsePrefix("10.1.2.0/24"),
			RX: events.Traffic{Packets: [4]uint64{5}}, Count: 1, Min: 40 * time.Millisecond},
		&events.Aggregate{Time: t0 + start + 3_000_000_000, Start: t0 + start, Prefix: netip.MustParsePrefix("2001:db8:1::/48")},
		&events.FlowSummary{Time: t0 + start + 4_000_000_000, Start: t0 + start, Flow: tcp, Reason: events.ReasonFIN,
			Src: events.FlowDirSummary{Packets: 3, Bytes: 300, Count: 1}},
		&events.FlowEvent{Time: t0 + start + 4_000_000_000, Flow: tcp.Reverse(), Type: events.FlowClosing, Reason: events.ReasonFIN},
		&events.Stats{Time: t0 + start + 5_000_000_000, Packets: 12},
	}
}

func write(t *testing.T, w format.Writer, recs []any) {
	t.Helper()
	for _, r := range recs {
		var err error
		switch r := r.(type) {
		case *events.RTT:
			err = w.WriteRTT(r)
		case *events.FlowEvent:
			err = w.WriteFlow(r)
		case *events.Stats:
			err = w.WriteStats(r)
		case *events.Aggregate:
			err = w.WriteAggregate(r)
		case *events.FlowSummary:
			err = w.WriteFlowSummary(r)
		case *events.PDM:
			err = w.WritePDM(r)
		case *events.PDMInterval:
			err = w.WritePDMInterval(r)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// run writes records through a privacy writer with o in front of a
// collector and of each format, returning the collector and every
// format's output (main stream and side lines) in one string.
func run(t *testing.T, o Options, recs []any) (*collect, string) {
	t.Helper()
	c := &collect{}
	pw, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	w := pw.Wrap(c)
	write(t, w, recs)
	var all strings.Builder
	for _, name := range format.Names() {
		pw, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		var fo format.Options
		o.FormatOptions(&fo)
		fo.StatsTo = &out
		fw, err := format.New(name, &out, fo)
		if err != nil {
			t.Fatal(err)
		}
		w := pw.Wrap(fw)
		write(t, w, recs)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		all.Write(out.Bytes())
	}
	return c, all.String()
}

// fixedKey writes a key file of size bytes (a fixed pattern) for mode and
// returns its path. Tests that check that no address is left use fixed
// keys: with Crypto-PAn a random key leaves a structured prefix such as
// 10.0.0.0/24 unchanged about once in 1,300 keys (docs/privacy.md), which
// would make them fail at random.
func fixedKey(t *testing.T, mode string) string {
	t.Helper()
	size := 16
	if mode == "pfx" || mode == "cryptopan" {
		size = 32
	}
	key := make([]byte, size)
	for i := range key {
		key[i] = byte(i*37 + 11)
	}
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNothingToDo(t *testing.T) {
	pw, err := New(Options{Anonymize: "none"})
	if err != nil || pw != nil {
		t.Fatalf("New(none) = %v, %v; want nil, nil", pw, err)
	}
	c := &collect{}
	if w := pw.Wrap(c); w != format.Writer(c) {
		t.Error("a nil Writer's Wrap does not return the next writer itself")
	}
	pw.SetOrigin(1) // no panic on nil
}

// TestModesHideEveryAddress: with every mode but none, no real address
// appears in any notation in any format, and the records keep their
// number, ports (unless mapped) and RTTs.
func TestModesHideEveryAddress(t *testing.T) {
	for _, mode := range []string{"pfx", "cryptopan", "det", "trunc:8,16", "drop"} {
		t.Run(mode, func(t *testing.T) {
			o := Options{Anonymize: mode}
			if mode == "pfx" || mode == "cryptopan" || mode == "det" {
				o.KeyFile = fixedKey(t, mode)
			}
			c, out := run(t, o, records(0))
			if leaks := testutil.Leaks(out, real...); len(leaks) > 0 {
				t.Errorf("real addresses in the output: %v\n%s", leaks, out)
			}
			if len(c.rtts) != 2 || len(c.flows) != 2 || len(c.aggs) != 2 || len(c.sums) != 1 || len(c.stats) != 1 {
				t.Fatalf("records lost: %d rtt %d flow %d agg %d sum %d stats", len(c.rtts), len(c.flows), len(c.aggs), len(c.sums), len(c.stats))
			}
			if c.rtts[0].RTT != 40*time.Millisecond || c.rtts[0].Flow.Src.Port != 443 || c.rtts[0].SentBytes != 300 {
				t.Errorf("sample changed beyond its addresses: %+v", c.rtts[0])
			}
			// The two directions of a connection stay one connection.
			if f, r := c.flows[0].Flow, c.flows[1].Flow; f.Reverse() != r {
				t.Errorf("opening %+v and closing %+v are not the same connection", f, r)
			}
			if mode == "drop" {
				if f := c.rtts[0].Flow; f.ID == 0 || f.Src.IP.IsValid() || f.Dst.IP.IsValid() {
					t.Errorf("drop: flow %+v", f)
				}
				if c.rtts[0].Flow.ID == c.rtts[1].Flow.ID {
					t.Error("drop: two connections share a number")
				}
				if a := c.aggs[0]; a.PrefixID == 0 || a.Prefix.IsValid() {
					t.Errorf("drop: aggregate %+v", a)
				}
			}
		})
	}
}

// TestPDMRecords: rttscope pdm's records lose their addresses in every
// mode and format (ppviz skips them), both directions of a 5-tuple keep
// one flow number, and --relative-time moves the interval start too.
func TestPDMRecords(t *testing.T) {
	udp := flow(client6, server6, 7007, 41234, events.ProtoUDP)
	recs := []any{
		&events.PDM{Time: t0 + 1e9, Flow: udp, DTLR: 2 * time.Millisecond, DeltaLastRecv: 1, RoundTrip: 17 * time.Millisecond, HasRoundTrip: true},
		&events.PDM{Time: t0 + 2e9, Flow: udp.Reverse(), Egress: true, DTLS: 17 * time.Millisecond, DeltaLastSent: 1},
		&events.PDMInterval{Time: t0 + 10e9, Start: t0, Flow: udp, DTLR: events.Distribution{Count: 1, Min: 1, Mean: 1, Max: 1}},
	}
	for _, mode := range []string{"pfx", "cryptopan", "det", "trunc:8,16", "drop"} {
		o := Options{Anonymize: mode, KeyFile: fixedKey(t, mode), AnonymizePorts: true, RelativeTime: true}
		c, out := run(t, o, recs)
		if leaks := testutil.Leaks(out, real...); len(leaks) > 0 {
			t.Errorf("%s: real addresses in the output: %v\n%s", mode, leaks, out)
		}
		if len(c.pdms) != 2 || len(c.pdmIs) != 1 || !strings.Contains(out, "pdm_interval") {
			t.Fatalf("%s: records lost: %d pdm, %d intervals\n%s", mode, len(c.pdms), len(c.pdmIs), out)
		}
		if f, r := c.pdms[0].Flow, c.pdms[1].Flow; f.Reverse() != r || f.Src.Port == 7007 {
			t.Errorf("%s: the two directions %+v and %+v are not one 5-tuple, or the port was kept", mode, f, r)
		}
		// The origin is the first record (no SetOrigin).
		if p, iv := c.pdms[0], c.pdmIs[0]; p.Time != 0 || iv.Start != -1e9 || iv.Time != 9e9 || p.DTLR != 2*time.Millisecond {
			t.Errorf("%s: times %d, [%d, %d) or delays changed: %+v", mode, p.Time, iv.Start, iv.Time, p)
		}
	}
}

// TestPrefixesStayPrefixes: prefix-preserving modes map a /24 to a /24
// inside the anonymized form of its addresses; trunc keeps the prefix when
// it is shorter than the kept bits.
func TestPrefixesStayPrefixes(t *testing.T) {
	for _, mode := range []string{"pfx", "cryptopan"} {
		c, _ := run(t, Options{Anonymize: mode, KeyFile: fixedKey(t, mode)}, records(0))
		p := c.aggs[0].Prefix
		if p.Bits() != 24 || !p.Addr().Is4() || p != p.Masked() {
			t.Errorf("%s: /24 became %v", mode, p)
		}
		if !p.Contains(c.rtts[0].Flow.Dst.IP) {
			t.Errorf("%s: anonymized prefix %v does not hold the anonymized address %v of 10.1.2.3", mode, p, c.rtts[0].Flow.Dst.IP)
		}
		if p6 := c.aggs[1].Prefix; p6.Bits() != 48 || !p6.Contains(c.rtts[1].Flow.Src.IP) {
			t.Errorf("%s: IPv6 /48 became %v (client %v)", mode, p6, c.rtts[1].Flow.Src.IP)
		}
	}
	c, _ := run(t, Options{Anonymize: "trunc:16,32"}, records(0))
	if got := c.aggs[0].Prefix.String(); got != "10.1.0.0/16" {
		t.Errorf("trunc:16,32 of 10.1.2.0/24 = %s", got)
	}
	if got := c.rtts[0].Flow.Dst.IP.String(); got != "10.1.0.0" {
		t.Errorf("trunc:16,32 of 10.1.2.3 = %s", got)
	}
}

// TestRelativeTime: times count from the first record, or from the origin
// set before it, and are rounded down to the resolution; RTTs are not.
func TestRelativeTime(t *testing.T) {
	c, _ := run(t, Options{RelativeTime: true}, records(7))
	if c.flows[0].Time != 0 || c.rtts[0].Time != 1_500_000_000 || c.stats[0].Time != 5_000_000_000 || c.aggs[0].Start != 0 {
		t.Errorf("relative times: flow %d rtt %d stats %d agg start %d", c.flows[0].Time, c.rtts[0].Time, c.stats[0].Time, c.aggs[0].Start)
	}
	pw, err := New(Options{RelativeTime: true, TimeResolution: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pw.SetOrigin(t0 - 250_000_000)
	c = &collect{}
	write(t, pw.Wrap(c), records(0))
	if c.flows[0].Time != 0 || c.rtts[0].Time != time.Second.Nanoseconds() || c.rtts[1].Time != 2*time.Second.Nanoseconds() {
		t.Errorf("origin 0.25 s before, 1 s resolution: flow %d rtt %d %d", c.flows[0].Time, c.rtts[0].Time, c.rtts[1].Time)
	}
	if c.rtts[0].RTT != 40*time.Millisecond {
		t.Errorf("the resolution changed an RTT: %v", c.rtts[0].RTT)
	}
	pw.SetOrigin(0) // too late: records were written
	write(t, pw.Wrap(c), records(10_000_000_000))
	if got := c.rtts[2].Time; got != 11*time.Second.Nanoseconds() {
		t.Errorf("SetOrigin after the first record changed the origin: %d", got)
	}
	// Absolute times are only rounded.
	c, _ = run(t, Options{TimeResolution: time.Minute}, records(0))
	if got := c.rtts[0].Time; got != t0-t0%int64(time.Minute) {
		t.Errorf("absolute time rounded to the minute: %d", got)
	}
}

// TestMinimal: no flow events, no counters, relative time.
func TestMinimal(t *testing.T) {
	c, out := run(t, Options{Minimal: true, Anonymize: "pfx"}, records(0))
	if len(c.flows) != 0 {
		t.Errorf("%d flow events written", len(c.flows))
	}
	if r := c.rtts[0]; r.SentPackets|r.SentBytes|r.RecPackets|r.RecBytes != 0 || r.RTT != 40*time.Millisecond {
		t.Errorf("sample %+v", r)
	}
	if a := c.aggs[0]; a.RX.TotalPackets() != 0 || a.Count != 1 {
		t.Errorf("aggregate %+v", a)
	}
	if s := c.sums[0]; s.Src.Packets != 0 || s.Src.Count != 1 {
		t.Errorf("summary %+v", s)
	}
	if c.rtts[0].Time != 1_500_000_000 {
		t.Errorf("minimal output is not in relative time: %d", c.rtts[0].Time)
	}
	for _, word := range []string{"opening", `"flow_event":`, "sent_bytes", "rx_stats"} {
		if strings.Contains(out, word) {
			t.Errorf("minimal output contains %q", word)
		}
	}
}

// TestPorts: --anonymize-ports maps ports per protocol, the same way in
// both directions, and keeps an ICMP echo id equal on both sides.
func TestPorts(t *testing.T) {
	c, _ := run(t, Options{AnonymizePorts: true}, records(0))
	open, rtt := c.flows[0].Flow, c.rtts[0].Flow
	if open.Src.Port == 40000 && open.Dst.Port == 443 {
		t.Error("ports unchanged")
	}
	if open.Src.Port != rtt.Dst.Port || open.Dst.Port != rtt.Src.Port {
		t.Errorf("the directions disagree: %+v vs %+v", open, rtt)
	}
	if icmp := c.rtts[1].Flow; icmp.Src.Port != icmp.Dst.Port {
		t.Errorf("ICMP echo id mapped differently on the two sides: %+v", icmp)
	}
	if open.Src.IP != client4 {
		t.Error("--anonymize-ports alone changed an address")
	}
	if len(c.keys) != 1 || c.keys[0].Scheme != "ports" {
		t.Errorf("key records %+v", c.keys)
	}
}

// TestKeyRotation: a new key after KeyRotate of traffic time, announced by
// an AnonKey record with another id, and addresses mapped differently from
// then on; with a key file, two runs give the same output.
func TestKeyRotation(t *testing.T) {
	recs := append(records(0), records(int64(time.Hour))...)
	c, _ := run(t, Options{Anonymize: "pfx", KeyRotate: time.Minute}, recs)
	if len(c.keys) != 2 || c.keys[0].Rotated || !c.keys[1].Rotated || c.keys[0].KeyID == c.keys[1].KeyID {
		t.Fatalf("key records %+v", c.keys)
	}
	if c.keys[1].Time != t0+int64(time.Hour) {
		t.Errorf("rotation at %d, want at the first record after an hour", c.keys[1].Time)
	}
	if c.rtts[0].Flow.Src.IP == c.rtts[2].Flow.Src.IP {
		t.Error("the same address before and after rotation")
	}

	dir := t.TempDir()
	key := bytes.Repeat([]byte{0x5a, 0x17}, 16)
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{Anonymize: "cryptopan", KeyFile: path, KeyRotate: time.Minute, AnonymizePorts: true}
	c1, out1 := run(t, o, recs)
	c2, out2 := run(t, o, recs)
	if out1 != out2 || c1.rtts[2].Flow != c2.rtts[2].Flow {
		t.Error("two runs with the same key file differ")
	}
	if c1.keys[1].KeyID == c1.keys[0].KeyID || c1.rtts[0].Flow.Src.IP == c1.rtts[2].Flow.Src.IP {
		t.Error("a key file's rotated key is the same as the first")
	}
	for _, secret := range []string{hex.EncodeToString(key), strings.ToUpper(hex.EncodeToString(key)), string(key)} {
		if strings.Contains(out1, secret) {
			t.Error("the key appears in the output")
		}
	}
}

// TestKeyFileErrors: a readable key file is refused with the chmod to run,
// a key for a mode without one and bad modes with one line.
func TestKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	secret := strings.Repeat("ab", 32)
	if err := os.WriteFile(path, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{Anonymize: "pfx", KeyFile: path})
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) || strings.Contains(err.Error(), secret) {
		t.Errorf("world-readable key file: %v", err)
	}
	for o, want := range map[Options]string{
		{Anonymize: "trunc:8,16", KeyFile: path}:  "takes no key",
		{Anonymize: "drop", KeyRotate: time.Hour}: "no key to rotate",
		{Anonymize: "bogus"}:                      "bogus",
		{TimeResolution: -1}:                      "--time-resolution",
	} {
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", o, err, want)
		}
	}
}

// TestCallerRecordsUnchanged: the privacy writer changes copies.
func TestCallerRecordsUnchanged(t *testing.T) {
	recs := records(0)
	before := *recs[1].(*events.RTT)
	run(t, Options{Anonymize: "drop", Minimal: true, AnonymizePorts: true}, recs)
	if after := *recs[1].(*events.RTT); after != before {
		t.Errorf("record changed: %+v -> %+v", before, after)
	}
}

// TestConcurrentWrites: records written from several goroutines (replay's
// workers) all arrive, each anonymized (run with -race).
func TestConcurrentWrites(t *testing.T) {
	pw, err := New(Options{Anonymize: "cryptopan", KeyFile: fixedKey(t, "cryptopan"), RelativeTime: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &collect{}
	w := pw.Wrap(c)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				e := events.RTT{Time: t0 + int64(i), Flow: flow(netip.AddrFrom4([4]byte{10, byte(g), byte(i >> 8), byte(i)}), server4, 1, 2, events.ProtoTCP)}
				if err := w.WriteRTT(&e); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(c.rtts) != 2000 {
		t.Fatalf("%d of 2000 samples arrived", len(c.rtts))
	}
	for _, r := range c.rtts {
		if r.Flow.Dst.IP == server4 {
			t.Fatal("an address passed unchanged")
		}
	}
}

// TestNumbersBounded: numbers stay the same for keys in use, and memory
// holds two generations at most.
func TestNumbersBounded(t *testing.T) {
	n := newNumbers[int](2)
	if n.get(10) != 1 || n.get(20) != 2 || n.get(10) != 1 {
		t.Fatal("first numbers")
	}
	n.get(30) // generation full: 10 and 20 become old
	if n.get(10) != 1 {
		t.Error("a key of the old generation lost its number")
	}
	n.get(40)
	n.get(50)
	n.get(60) // 20 has now been unseen for two generations
	if got := n.get(20); got == 2 {
		t.Error("a forgotten key kept its number")
	}
	if len(n.cur)+len(n.old) > 4 {
		t.Errorf("%d keys held, limit 2 per generation", len(n.cur)+len(n.old))
	}
}

// TestDNSNames: the question's name of a DNS sample (--dns-names) names a
// host as its address does: address anonymization and minimal output drop
// it, the other privacy options keep it.
func TestDNSNames(t *testing.T) {
	dns := &events.RTT{Time: t0 + 1, Flow: flow(client4, server4, 40053, 53, events.ProtoUDP).Reverse(), RTT: time.Millisecond,
		Source: events.SourceDNS, DNS: events.DNSInfo{QType: 1, Name: "www.example.com."}}
	for _, c := range []struct {
		o    Options
		keep bool
	}{
		{Options{Anonymize: "pfx"}, false},
		{Options{Anonymize: "drop"}, false},
		{Options{Minimal: true}, false},
		{Options{RelativeTime: true}, true},
		{Options{AnonymizePorts: true}, true},
	} {
		got, out := run(t, c.o, []any{dns})
		if kept := got.rtts[0].DNS.Name != ""; kept != c.keep || strings.Contains(out, "example") != c.keep {
			t.Errorf("%+v: name kept %v (output %q), want %v", c.o, kept, out, c.keep)
		}
		if got.rtts[0].DNS.QType != 1 {
			t.Errorf("%+v: qtype lost", c.o)
		}
	}
}
