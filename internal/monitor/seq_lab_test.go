package monitor

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/stats"
	"github.com/rttscope/rttscope/internal/traffic"
)

// TestLabTCPWithoutTimestamps: with TCP timestamps off on the client
// (net.ipv4.tcp_timestamps=0, as Windows hosts and many middleboxes send),
// the median TCP sample of a paced bulk transfer, measured by sequence and
// ACK numbers (tcp_seq) on the middlebox, is within 2 ms of the path's RTT,
// as TestLabTCPBulkMedian requires of the timestamp source. The path RTT
// is the configured one plus the lab's base RTT, measured by a ping right
// before. The handshake gives one SYN -> SYN-ACK sample per connection (the
// server side of the middlebox: at least the configured RTT; one sample
// through the user-space delay line varies by several ms, so it is not
// held to 2 ms) and one SYN-ACK -> ACK sample (the client side: a small
// part of it).
func TestLabTCPWithoutTimestamps(t *testing.T) {
	l := sharedLab(t)
	old, err := l.Client.Sysctl("net.ipv4.tcp_timestamps")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Client.SetSysctl("net.ipv4.tcp_timestamps", "0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Client.SetSysctl("net.ipv4.tcp_timestamps", old); err != nil {
			t.Errorf("restore tcp_timestamps: %v", err)
		}
	})
	const port = 5202
	for i, s := range l.Servers {
		for _, a := range []netip.Addr{l.ServerAddr4[i], l.ServerAddr6[i]} {
			sk, err := traffic.NewSink(s, a, port)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sk.Close() })
		}
	}
	var base []*pingTarget
	for i := range l.Servers {
		base = append(base, &pingTarget{dst: l.ServerAddr4[i], id: uint16(0x4400 + i)})
	}
	pingAll(l, base, 10, 30*time.Millisecond)

	cfg := bpfConfig(true, false, 0) // --tcp-mode auto, the default
	cfg.TrackTCPHandshake = true
	r := startMonitor(t, Options{Interfaces: l.MiddleboxServerIf, Netns: l.Middlebox.Name, BPF: cfg})
	const dur, pacing = 3 * time.Second, 15_000_000
	type flow struct {
		path int
		dst  netip.Addr
		res  traffic.BulkResult
		err  error
	}
	var flows []*flow
	for i := range l.Servers {
		flows = append(flows, &flow{path: i, dst: l.ServerAddr4[i]}, &flow{path: i, dst: l.ServerAddr6[i]})
	}
	var wg sync.WaitGroup
	for _, f := range flows {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), dur+20*time.Second)
			defer cancel()
			f.res, f.err = traffic.BulkStats(ctx, l.Client, netip.AddrPortFrom(f.dst, port), dur, pacing)
		})
	}
	wg.Wait()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	for _, f := range flows {
		if f.err != nil {
			t.Errorf("bulk to %s: %v", f.dst, f.err)
			continue
		}
		if f.res.Timestamps {
			t.Errorf("bulk to %s: TCP timestamps negotiated although the client has them off", f.dst)
		}
		from := isTCPFrom(f.dst)
		var seq, syn, other []events.RTT
		for _, e := range r.out.RTTs(from) {
			switch e.Source {
			case events.SourceTCPSeq:
				seq = append(seq, e)
			case events.SourceTCPSYN:
				syn = append(syn, e)
			default:
				other = append(other, e)
			}
		}
		if len(other) > 0 {
			t.Errorf("bulk to %s: %d samples of other sources: %v", f.dst, len(other), other[0])
		}
		if len(seq) < 20 || len(syn) != 1 {
			t.Errorf("bulk to %s: %d tcp_seq samples (want >= 20), %d SYN -> SYN-ACK samples (want 1)", f.dst, len(seq), len(syn))
			continue
		}
		conf := sharedRTT[f.path]
		var baseRTT time.Duration
		if b := base[f.path]; b.err == nil && len(b.replies) > 0 {
			baseRTT = max(0, stats.Median(pingRTTs(b.replies))-conf)
		} else {
			t.Errorf("base ping of path %d: %v (%d replies)", f.path, b.err, len(b.replies))
		}
		want := conf + baseRTT
		got := stats.Median(sampleRTTs(seq))
		t.Logf("path %d %s: %d bytes acked, %d retransmits, kernel srtt %v; %d tcp_seq samples, median %s, min %s; handshake %s; configured %v + base %s = %s",
			f.path, f.dst, f.res.Bytes, f.res.Retransmits, f.res.SRTT, len(seq), ms(got), ms(slicesMin(sampleRTTs(seq))),
			ms(syn[0].RTT), conf, ms(baseRTT), ms(want))
		if absDur(got-want) > 2*time.Millisecond {
			t.Errorf("path %d %s: tcp_seq median %s, want %s ± 2 ms", f.path, f.dst, ms(got), ms(want))
		}
		if syn[0].RTT < conf {
			t.Errorf("path %d %s: SYN -> SYN-ACK %s, shorter than the configured %v", f.path, f.dst, ms(syn[0].RTT), conf)
		}
		near := r.out.RTTs(func(e *events.RTT) bool {
			return e.Source == events.SourceTCPSYN && e.Flow.Proto == events.ProtoTCP && e.Flow.Dst.IP == f.dst
		})
		if len(near) != 1 || near[0].RTT > conf/2 {
			t.Errorf("path %d %s: SYN-ACK -> ACK samples %v, want one, below %v", f.path, f.dst, sampleRTTs(near), conf/2)
		}
	}
	if st, ok := r.out.lastStats(); ok {
		t.Logf("stats: samples per source %v, retransmissions %d, timings dropped by Karn's rule %d",
			st.Samples, st.TCPSeqRetransmissions, st.TCPSeqAmbiguous)
	}
}
