package monitor

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/sampling"
	"github.com/rttscope/rttscope/internal/testutil"
	"github.com/rttscope/rttscope/internal/traffic"
)

// TestFloodKeepsEstablishedFlows: a raw-socket sender in the client
// namespace floods the middlebox with hundreds of thousands of TCP data
// packets (timestamp option, payload) from random spoofed sources, each a
// new flow, while a TCP bulk transfer runs from client to server. The
// monitor on the middlebox runs in aggregated mode with small maps. The
// transfer must keep being measured in every interval of the flood, the
// counters must show evictions, the occupancy must stay within the maps,
// and nothing may crash.
func TestFloodKeepsEstablishedFlows(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("skipping flood test in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := lab.New(ctx, lab.Config{Prefix: "rtt-fl", Paths: []lab.PathSpec{
		{DelayToServer: 5 * time.Millisecond, DelayToClient: 5 * time.Millisecond, RateBitsPerSec: 50_000_000},
	}, ForceUserspaceDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab: %v", err)
		}
	}()

	srvAddr := netip.AddrPortFrom(l.ServerAddr4[0], 5201)
	stopSink, err := traffic.StartSink(l.Servers[0], srvAddr.Addr(), srvAddr.Port())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stopSink() }()

	const flowMap, tsMap = 2048, 2048
	cfg := loader.DefaultConfig()
	cfg.FlowMapSize, cfg.TimestampMapSize = flowMap, tsMap
	cfg.RateLimit = 10 * time.Millisecond
	cfg.Aggregate = true

	var out, log testutil.Buffer
	w, err := format.New("jsonl", &out, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	attached := make(chan struct{})
	monErr := make(chan error, 1)
	go func() {
		monErr <- Run(ctx, Options{
			Interfaces:      []string{l.MiddleboxClientIf, l.MiddleboxServerIf[0]},
			Netns:           l.Middlebox.Name,
			BPF:             cfg,
			Report:          sampling.Report{AggregateInterval: time.Second},
			CleanupInterval: time.Second,
			StatsInterval:   time.Second,
			Duration:        9 * time.Second,
			Output:          w,
			Log:             &log,
			OnAttached:      func() { close(attached) },
		})
	}()
	select {
	case <-attached:
	case err := <-monErr:
		t.Fatalf("monitor: %v\n%s", err, log.String())
	}

	var wg sync.WaitGroup
	var bulkBytes uint64
	var bulkErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		bulkBytes, bulkErr = traffic.Bulk(ctx, l.Client, srvAddr, 7*time.Second, 10_000_000)
	}()
	time.Sleep(1500 * time.Millisecond)

	// The flood: 4 s of distinct spoofed 5-tuples toward an absent host
	// on the server's subnet (the middlebox drops them for want of a
	// neighbour entry, after its hooks saw and timestamped them).
	var sent atomic.Uint64
	floodStart := time.Now()
	err = l.Client.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		absent := l.ServerAddr4[0].As4()
		absent[3] = 200
		pk := pktcraft.Packet{NoEthernet: true, Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.AddrFrom4(absent),
			TCP: &pktcraft.TCP{SrcPort: 1, DstPort: 80, ACK: true, PSH: true, TSval: 1, TSecr: 1, Payload: []byte("flood data")}}
		frame := pk.MustBytes()
		dst := &unix.SockaddrInet4{Addr: absent}
		r := rand.New(rand.NewPCG(7, 8))
		for time.Since(floodStart) < 4*time.Second {
			for range 256 {
				binary.BigEndian.PutUint32(frame[12:], 0xc6120000|r.Uint32()&0x1ffff) // 198.18.0.0/15
				binary.BigEndian.PutUint16(frame[20:], uint16(r.Uint32()))
				if err := unix.Sendto(fd, frame, 0, dst); err != nil && err != unix.ENOBUFS {
					return err
				}
				sent.Add(1)
			}
		}
		return nil
	})
	floodEnd := time.Now()
	if err != nil {
		t.Fatalf("flood: %v", err)
	}
	wg.Wait()
	if err := <-monErr; err != nil {
		t.Fatalf("monitor: %v\n%s", err, log.String())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if bulkErr != nil {
		t.Fatalf("bulk: %v", bulkErr)
	}
	t.Logf("flood: %d packets in %v (%.0f/s); bulk %d bytes", sent.Load(), floodEnd.Sub(floodStart),
		float64(sent.Load())/floodEnd.Sub(floodStart).Seconds(), bulkBytes)
	t.Logf("monitor log:\n%s", log.String())
	if sent.Load() < 200_000 {
		t.Errorf("flood sent only %d packets", sent.Load())
	}

	srvPrefix := netip.PrefixFrom(l.ServerAddr4[0], 24).Masked().String()
	type rec struct {
		Timestamp     int64  `json:"timestamp"`
		Type          string `json:"type"`
		IntervalStart int64  `json:"interval_start"`
		Prefix        string `json:"ip_prefix"`
		Count         uint64 `json:"count_rtt"`
		Median        int64  `json:"median_rtt"`
		RX            struct {
			Packets uint64 `json:"packets"`
		} `json:"rx_stats"`
		// stats
		Flows             uint64 `json:"flows"`
		Timestamps        uint64 `json:"timestamps"`
		FlowsEvicted      uint64 `json:"flows_evicted"`
		TimestampsEvicted uint64 `json:"timestamps_evicted"`
		FlowMapFull       uint64 `json:"flow_map_full"`
		TimestampMapFull  uint64 `json:"timestamp_map_full"`
		RingbufFull       uint64 `json:"ringbuf_full"`
		RTTEvents         uint64 `json:"rtt_events"`
		Packets           uint64 `json:"packets"`
	}
	var last rec
	floodIntervals, measured, prefixes := 0, 0, 0
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		switch r.Type {
		case "stats":
			last = r
			if r.Flows > uint64(loader.FlowTableSlots(flowMap)) || r.Timestamps > tsMap {
				t.Errorf("occupancy above the map sizes: %+v", r)
			}
		case "aggregate":
			prefixes++
			// Intervals entirely inside the flood.
			if r.Prefix == srvPrefix && r.IntervalStart >= floodStart.UnixNano() && r.Timestamp <= floodEnd.UnixNano() {
				t.Logf("server prefix during flood: %d samples, median %v", r.Count, time.Duration(r.Median))
				if r.Count > 0 {
					measured++
				}
			}
			if r.IntervalStart >= floodStart.UnixNano() && r.Timestamp <= floodEnd.UnixNano() {
				floodIntervals++
			}
		}
	}
	t.Logf("final stats: %+v; %d aggregate records", last, prefixes)
	if measured < 2 {
		t.Errorf("the transfer's prefix got samples in only %d intervals inside the flood", measured)
	}
	if last.FlowsEvicted == 0 && last.TimestampsEvicted == 0 {
		t.Errorf("no evictions counted: %+v", last)
	}
	if last.FlowMapFull+last.TimestampMapFull > (last.FlowsEvicted+last.TimestampsEvicted)/100 {
		t.Errorf("more than 1%% of inserts refused although unanswered entries could be replaced: %+v", last)
	}
	if last.RTTEvents != 0 {
		t.Errorf("aggregated mode sent %d RTT events", last.RTTEvents)
	}
}
