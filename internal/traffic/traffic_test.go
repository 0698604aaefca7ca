package traffic

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/testutil"
)

func newLab(t *testing.T, paths ...lab.PathSpec) *lab.Lab {
	t.Helper()
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := lab.New(ctx, lab.Config{Prefix: "rtt-tt", Paths: paths, ForceUserspaceDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
	})
	return l
}

func median(rs []PingReply) time.Duration {
	d := make([]time.Duration, len(rs))
	for i, r := range rs {
		d[i] = r.RTT
	}
	slices.Sort(d)
	return d[len(d)/2]
}

func TestPingDelayAccuracy(t *testing.T) {
	l := newLab(t, lab.PathSpec{DelayToServer: 20 * time.Millisecond, DelayToClient: 30 * time.Millisecond})
	ctx := context.Background()
	for _, dst := range []netip.Addr{l.ServerAddr4[0], l.ServerAddr6[0]} {
		const n = 40
		rs, err := Ping(ctx, l.Client, dst, n, 20*time.Millisecond)
		if err != nil {
			t.Fatalf("ping %s: %v", dst, err)
		}
		if len(rs) < n*9/10 {
			t.Fatalf("ping %s: only %d of %d replies", dst, len(rs), n)
		}
		for _, r := range rs {
			if r.ID != EchoID {
				t.Fatalf("reply %d has echo ID %#x, want %#x", r.Seq, r.ID, EchoID)
			}
			if r.RTT <= 0 || !r.RecvAt.After(r.SentAt) {
				t.Fatalf("reply %d: bad times %+v", r.Seq, r)
			}
		}
		med := median(rs)
		t.Logf("%s: %d replies, median RTT %v (first %v, min %v, max %v)", dst, len(rs), med, rs[0].RTT,
			slices.MinFunc(rs, func(a, b PingReply) int { return int(a.RTT - b.RTT) }).RTT,
			slices.MaxFunc(rs, func(a, b PingReply) int { return int(a.RTT - b.RTT) }).RTT)
		if med < 49500*time.Microsecond || med > 55*time.Millisecond {
			t.Errorf("%s: median RTT %v, want 49.5..55 ms", dst, med)
		}
	}
	st := l.DelayStats()[0]
	t.Logf("delay line: to server %+v; to client %+v", st.ToServer, st.ToClient)
}

func TestPingCustomIDAndLoss(t *testing.T) {
	l := newLab(t, lab.PathSpec{})
	// Nothing answers in the middlebox's server-side subnet at .99: all lost.
	rs, err := PingWith(context.Background(), l.Client, netip.MustParseAddr("10.20.0.99"),
		PingOptions{Count: 2, Interval: 5 * time.Millisecond, Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 0 {
		t.Fatalf("got %d replies from a host that does not exist", len(rs))
	}
	rs, err = PingWith(context.Background(), l.Client, l.ServerAddr4[0], PingOptions{Count: 3, Interval: 5 * time.Millisecond, ID: 0x1234})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].ID != 0x1234 || rs[0].Seq != 1 || rs[2].Seq != 3 {
		t.Fatalf("unexpected replies %+v", rs)
	}
}

func TestBulkThroughDelayLine(t *testing.T) {
	l := newLab(t, lab.PathSpec{DelayToServer: 5 * time.Millisecond, DelayToClient: 5 * time.Millisecond})
	for _, v := range []string{"tcp_timestamps"} {
		for _, n := range []*lab.Node{l.Client, l.Servers[0]} {
			got, err := n.Sysctl("net.ipv4." + v)
			if err != nil || got != "1" {
				t.Fatalf("%s: net.ipv4.%s = %q, %v; want 1", n.Name, v, got, err)
			}
		}
	}
	// Unpaced over IPv4 (the delay line itself is the bottleneck then),
	// paced at 100 Mbit/s over IPv6.
	for i, dst := range []netip.Addr{l.ServerAddr4[0], l.ServerAddr6[0]} {
		sink, err := NewSink(l.Servers[0], dst, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := BulkStats(context.Background(), l.Client, sink.Addr(), time.Second, uint64(i)*100_000_000)
		if err != nil {
			sink.Close()
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		got := sink.Bytes()
		sink.Close()
		t.Logf("%s: acked %d bytes (%.1f Mbit/s), sink got %d, srtt %v, retrans %d, timestamps %v",
			dst, res.Bytes, float64(res.Bytes)*8/res.Duration.Seconds()/1e6, got, res.SRTT, res.Retransmits, res.Timestamps)
		if res.Bytes == 0 || got == 0 {
			t.Fatalf("%s: no data delivered (acked %d, received %d)", dst, res.Bytes, got)
		}
		if got < res.Bytes {
			t.Errorf("%s: sink received %d bytes but %d were acknowledged", dst, got, res.Bytes)
		}
		if !res.Timestamps {
			t.Errorf("%s: TCP timestamps were not negotiated", dst)
		}
	}
	st := l.DelayStats()[0]
	t.Logf("delay line: to server %+v; to client %+v", st.ToServer, st.ToClient)
	if st.ToServer.Oversize != 0 || st.ToClient.Oversize != 0 {
		t.Errorf("delay line saw GSO/GRO-sized frames: %d to server, %d to client", st.ToServer.Oversize, st.ToClient.Oversize)
	}
	if st.ToServer.Forwarded < 100 || st.ToClient.Forwarded < 100 {
		t.Errorf("delay line forwarded too little: %+v", st)
	}
}

func TestBulkRateLimit(t *testing.T) {
	const rate = 20_000_000
	l := newLab(t, lab.PathSpec{DelayToServer: 5 * time.Millisecond, DelayToClient: 5 * time.Millisecond, RateBitsPerSec: rate, QueuePackets: 100})
	sink, err := NewSink(l.Servers[0], l.ServerAddr4[0], 5001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	for _, pacing := range []uint64{0, 10_000_000} {
		res, err := BulkStats(context.Background(), l.Client, sink.Addr(), 2*time.Second, pacing)
		if err != nil {
			t.Fatal(err)
		}
		mbps := float64(res.Bytes) * 8 / res.Duration.Seconds()
		t.Logf("pacing %d bit/s: %.2f Mbit/s acked, srtt %v, retrans %d", pacing, mbps/1e6, res.SRTT, res.Retransmits)
		if mbps > 1.5*rate {
			t.Errorf("pacing %d: %.2f Mbit/s through a %d bit/s bottleneck", pacing, mbps/1e6, rate)
		}
		limit := float64(rate)
		if pacing > 0 {
			limit = float64(pacing)
			if mbps > 1.5*limit {
				t.Errorf("paced at %d bit/s but sent %.2f Mbit/s", pacing, mbps/1e6)
			}
		}
		if mbps < 0.2*limit {
			t.Errorf("pacing %d: only %.2f Mbit/s", pacing, mbps/1e6)
		}
	}
	st := l.DelayStats()[0]
	t.Logf("delay line: to server %+v; to client %+v", st.ToServer, st.ToClient)
}

func TestSinkStop(t *testing.T) {
	l := newLab(t, lab.PathSpec{})
	stop, err := StartSink(l.Servers[0], l.ServerAddr6[0], 5002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Bulk(context.Background(), l.Client, netip.AddrPortFrom(l.ServerAddr6[0], 5002), 200*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := Bulk(context.Background(), l.Client, netip.AddrPortFrom(l.ServerAddr6[0], 5002), 100*time.Millisecond, 0); err == nil {
		t.Fatal("bulk to a stopped sink succeeded")
	}
}
