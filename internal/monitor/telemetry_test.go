package monitor

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/telemetry"
	"github.com/rttscope/rttscope/internal/testutil"
)

// pingLoopback sends ICMP echo requests to 127.0.0.1 every interval until
// ctx is done; the kernel answers them, so every request is two packets
// on lo. Replies are not read.
func pingLoopback(ctx context.Context, t *testing.T, interval time.Duration) {
	t.Helper()
	c, err := net.ListenPacket("ip4:icmp", "127.0.0.1")
	if err != nil {
		t.Errorf("raw ICMP socket: %v", err)
		return
	}
	defer c.Close()
	dst := &net.IPAddr{IP: net.IPv4(127, 0, 0, 1)}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	pkt := make([]byte, 8+32)
	for seq := uint16(1); ; seq++ {
		pkt[0], pkt[1] = 8, 0 // echo request
		binary.BigEndian.PutUint16(pkt[2:], 0)
		binary.BigEndian.PutUint16(pkt[4:], 0x7465) // "te"
		binary.BigEndian.PutUint16(pkt[6:], seq)
		binary.BigEndian.PutUint16(pkt[2:], icmpChecksum(pkt))
		if _, err := c.WriteTo(pkt, dst); err != nil {
			t.Errorf("send echo request: %v", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func icmpChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// runLoopback monitors lo for 1.5 s with a stats record every 300 ms while
// pinging 127.0.0.1, and returns the stats records (the last one written
// at exit).
func runLoopback(t *testing.T, hook string, bpfStats bool) []events.Stats {
	t.Helper()
	opts := Options{
		Interfaces:    []string{"lo"},
		BPF:           bpfConfig(true, true, 0),
		StatsInterval: 300 * time.Millisecond,
		Duration:      1500 * time.Millisecond,
		BPFStats:      bpfStats,
	}
	if hook == loader.IngressXDP {
		opts.Attach = loader.AttachOptions{IngressHook: loader.IngressXDP, XDPMode: loader.XDPModeGeneric}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	r := startMonitor(t, opts)
	wg.Go(func() { pingLoopback(ctx, t, 10*time.Millisecond) })
	if err := r.wait(t, 10*time.Second); err != nil {
		t.Fatalf("monitor: %v\nlog:\n%s", err, r.log)
	}
	r.out.mu.Lock()
	defer r.out.mu.Unlock()
	if len(r.out.stats) < 2 {
		t.Fatalf("%d stats records, want periodic ones and one at exit\nlog:\n%s", len(r.out.stats), r.log)
	}
	return append([]events.Stats(nil), r.out.stats...)
}

// checkProcess checks the process part of every record.
func checkProcess(t *testing.T, recs []events.Stats) {
	t.Helper()
	for i, s := range recs {
		p := s.Process
		if p == nil {
			t.Fatalf("record %d has no process telemetry", i)
		}
		if p.CPUUser+p.CPUSystem <= 0 || p.RSS == 0 || p.MaxRSS == 0 || p.CPUShare < 0 {
			t.Errorf("record %d: process %+v", i, *p)
		}
		if i > 0 && p.CPUUser+p.CPUSystem < recs[i-1].Process.CPUUser+recs[i-1].Process.CPUSystem {
			t.Errorf("record %d: CPU time went down: %+v after %+v", i, *p, *recs[i-1].Process)
		}
	}
}

// TestStatsTelemetryLoopback runs the monitor on lo with BPF run time
// statistics enabled for the run (--bpf-stats) and checks that every stats
// record carries the process's CPU time and RSS and the accounting of
// exactly the attached programs: run counts that add up over the
// intervals and a positive run time per packet.
func TestStatsTelemetryLoopback(t *testing.T) {
	testutil.RequireRoot(t)
	for _, c := range []struct {
		hook  string
		names []string
	}{
		{loader.IngressTC, []string{telemetry.TCEgress, telemetry.TCIngress}},
		{loader.IngressXDP, []string{telemetry.TCEgress, telemetry.XDPIngress}},
	} {
		t.Run(c.hook, func(t *testing.T) {
			recs := runLoopback(t, c.hook, true)
			checkProcess(t, recs)
			sums := make([]uint64, len(c.names))
			for i, s := range recs {
				b := s.BPF
				if b == nil || !b.Enabled || len(b.Programs) != len(c.names) {
					t.Fatalf("record %d: bpf %+v, want enabled with %v", i, b, c.names)
				}
				for j, p := range b.Programs {
					if p.Name != c.names[j] {
						t.Errorf("record %d: program %d is %q, want %q", i, j, p.Name, c.names[j])
					}
					sums[j] += p.IntervalRunCount
					if p.IntervalRunCount > 0 {
						if ns, ok := p.IntervalNsPerPacket(); !ok || ns <= 0 {
							t.Errorf("record %d: %s ran %d times in the interval, %v ns per packet", i, p.Name, p.IntervalRunCount, ns)
						}
					}
				}
			}
			last := recs[len(recs)-1]
			if last.Packets == 0 {
				t.Errorf("no packets counted: %+v", last)
			}
			for j, p := range last.BPF.Programs {
				ns, ok := p.NsPerPacket()
				if p.RunCount == 0 || !ok || ns <= 0 || p.RunTime <= 0 {
					t.Errorf("%s at exit: %+v (%v ns per packet)", p.Name, p, ns)
				}
				if sums[j] != p.RunCount {
					t.Errorf("%s: interval run counts add up to %d, total %d", p.Name, sums[j], p.RunCount)
				}
				t.Logf("%s: %d runs, %.1f ns per packet", p.Name, p.RunCount, ns)
			}
			t.Logf("process at exit: %+v", *last.Process)
		})
	}
}

// TestStatsTelemetryDisabled runs without --bpf-stats: the records say
// the accounting is off instead of reporting zeros.
func TestStatsTelemetryDisabled(t *testing.T) {
	testutil.RequireRoot(t)
	if on, err := telemetry.SysctlEnabled(); err != nil || on {
		t.Skipf("kernel.bpf_stats_enabled is on or unreadable (%v, %v): accounting cannot be off", on, err)
	}
	recs := runLoopback(t, loader.IngressTC, false)
	checkProcess(t, recs)
	for i, s := range recs {
		b := s.BPF
		if b == nil {
			t.Fatalf("record %d has no BPF section", i)
		}
		if b.Enabled {
			// Only growing run counts (someone else holding a
			// BPF_ENABLE_STATS fd meanwhile, e.g. a concurrent
			// benchmark) may say enabled.
			var runs uint64
			for _, p := range b.Programs {
				runs += p.RunCount
			}
			if runs == 0 {
				t.Fatalf("record %d says enabled without any run counted: %+v", i, b)
			}
			t.Skipf("another process enabled BPF run time statistics during the test: %+v", b)
		}
		if len(b.Programs) != 0 {
			t.Errorf("record %d: accounting off but programs listed: %+v", i, b.Programs)
		}
	}
	if recs[len(recs)-1].Packets == 0 {
		t.Error("no packets counted")
	}
}
