package monitor

import (
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/lab"
)

// TestLabTCPWithoutTimestamps: with TCP timestamps off on the client
// (net.ipv4.tcp_timestamps=0, as Windows hosts and many middleboxes send),
// the median TCP sample of a paced bulk transfer, measured by sequence and
// ACK numbers (tcp_seq) on the middlebox, is within 2 ms of the path's RTT
// at that time (25 ms under emulation: pairTolerance), as
// TestLabTCPBulkMedian requires of the timestamp source (checkBulkMedian).
// The handshake gives one SYN -> SYN-ACK sample per connection (the
// server side of the middlebox: at least the configured RTT, less the
// delay lines' early-release margin (lab.ShortestRoundTrip); one sample
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
	sinkOnEveryServer(t, l, port)

	cfg := bpfConfig(true, false, 0) // --tcp-mode auto, the default
	cfg.TrackTCPHandshake = true
	r := startMonitor(t, Options{Interfaces: l.MiddleboxServerIf, Netns: l.Middlebox.Name, BPF: cfg})
	flows, probes := bulkToEveryServer(l, port, 0x4400)
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
		t.Logf("path %d %s: %d bytes acked, %d retransmits; %d tcp_seq samples, min %s; handshake %s",
			f.path, f.dst, f.res.Bytes, f.res.Retransmits, len(seq), ms(slicesMin(sampleRTTs(seq))), ms(syn[0].RTT))
		checkBulkMedian(t, f, probes, "tcp_seq", sampleRTTs(seq), pairTolerance(2*time.Millisecond))
		if syn[0].RTT < lab.ShortestRoundTrip(conf) {
			t.Errorf("path %d %s: SYN -> SYN-ACK %s, shorter than the configured %v allows (%v)", f.path, f.dst, ms(syn[0].RTT), conf, lab.ShortestRoundTrip(conf))
		}
		near := r.out.RTTs(func(e *events.RTT) bool {
			return e.Source == events.SourceTCPSYN && e.Flow.Proto == events.ProtoTCP && e.Flow.Dst.IP == f.dst
		})
		if len(near) != 1 || near[0].RTT > conf/2 {
			t.Errorf("path %d %s: SYN-ACK -> ACK samples %v, want one, below %v", f.path, f.dst, sampleRTTs(near), conf/2)
		}
	}
	logDelayLines(t, l)
	if st, ok := r.out.lastStats(); ok {
		t.Logf("stats: samples per source %v, retransmissions %d, timings dropped by Karn's rule %d",
			st.Samples, st.TCPSeqRetransmissions, st.TCPSeqAmbiguous)
	}
}
