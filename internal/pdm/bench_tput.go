package pdm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/rttscope/rttscope/internal/bench"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/probe"
	"github.com/rttscope/rttscope/internal/traffic"
)

// RouteMTUForPDM is the route MTU that leaves room for the 16-byte PDM
// header in full-size packets on a 1500-byte link.
const RouteMTUForPDM = 1500 - PDMHeaderLen

// PDMHeaderLen is the size of the header the egress program inserts.
const PDMHeaderLen = 16

// ThroughputResult is the throughput part of `rttscope pdm bench`: TCP
// bulk transfers over IPv6 between two lab namespaces without delay (CPU
// bound), with rttscope pdm off and on at both ends, interleaved.
type ThroughputResult struct {
	Rounds   int     `json:"rounds"`
	Duration float64 `json:"seconds_per_transfer"`
	// MbitPerSec and Retransmits per mode ("off", "on"): median and
	// spread over the rounds.
	MbitPerSec  map[string]bench.Summary `json:"mbit_per_sec"`
	Retransmits map[string]uint64        `json:"retransmits"`
	// Ratio is the median throughput on over off.
	Ratio float64 `json:"ratio_on_off"`
	// Inserted is how many PDM headers the client inserted over the on
	// rounds (the proof that bulk data carried PDM).
	Inserted uint64 `json:"pdm_inserted"`
	Setup    string `json:"setup"`
}

// throughputSetup is how the client is set up, in off and on rounds alike.
const throughputSetup = "client: gso_max_segs 1 and route MTU 1484 to the server (PDM fits every segment); " +
	"lab path without delay or rate limit; rttscope pdm on the client's and the server's eth0 in the on rounds"

// BenchThroughput runs rounds of one PDM-off and one PDM-on bulk transfer
// of d each (the order alternating) and summarizes them.
func BenchThroughput(ctx context.Context, rounds int, d time.Duration, log io.Writer) (*ThroughputResult, error) {
	l, err := lab.New(ctx, lab.Config{Prefix: "rspdmtp", Paths: []lab.PathSpec{{}}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = l.Close() }()
	cli, srv := l.Client, l.Servers[0]
	for _, n := range []*lab.Node{srv, cli} {
		if err := n.SetSysctl("net.ipv6.max_dst_opts_number", "8"); err != nil {
			return nil, err
		}
	}
	for _, args := range [][]string{
		{"link", "set", "dev", lab.ClientIf, "gso_max_segs", "1"},
		{"-6", "route", "add", netip.PrefixFrom(l.ServerAddr6[0], 128).String(), "via", l.MiddleboxAddr6.String(),
			"dev", lab.ClientIf, "mtu", strconv.Itoa(RouteMTUForPDM)},
	} {
		if out, err := cli.Command(ctx, "ip", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	sink, err := traffic.NewSink(srv, l.ServerAddr6[0], 0)
	if err != nil {
		return nil, err
	}
	defer sink.Close()

	r := &ThroughputResult{Rounds: rounds, Duration: d.Seconds(), MbitPerSec: map[string]bench.Summary{},
		Retransmits: map[string]uint64{}, Setup: throughputSetup}
	per := map[string][]float64{}
	// Warm-up: one transfer of each, not counted.
	for round := -1; round < rounds; round++ {
		for i := range 2 {
			on := (round+i)%2 != 0
			res, ins, err := throughputTransfer(ctx, l, sink.Addr(), d, on)
			if err != nil {
				return nil, err
			}
			mode := onOff(on)
			mb := float64(res.Bytes) * 8 / res.Duration.Seconds() / 1e6
			fmt.Fprintf(log, "throughput round %d, PDM %-3s: %7.1f Mbit/s, %d retransmissions, %d PDM inserted\n",
				round, mode, mb, res.Retransmits, ins)
			if round < 0 {
				continue
			}
			per[mode] = append(per[mode], mb)
			r.Retransmits[mode] += uint64(res.Retransmits)
			r.Inserted += ins
		}
	}
	for m, v := range per {
		r.MbitPerSec[m] = bench.Summarize(v)
	}
	if off := r.MbitPerSec["off"].Median; off > 0 {
		r.Ratio = r.MbitPerSec["on"].Median / off
	}
	fmt.Fprintf(log, "throughput: PDM off median %.1f Mbit/s, on %.1f Mbit/s (ratio %.3f); retransmissions off %d, on %d\n",
		r.MbitPerSec["off"].Median, r.MbitPerSec["on"].Median, r.Ratio, r.Retransmits["off"], r.Retransmits["on"])
	return r, nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// throughputTransfer runs one unpaced bulk transfer from the client to
// dst, with rttscope pdm on both ends when on; it returns the transfer and
// the number of PDM headers the client inserted.
func throughputTransfer(ctx context.Context, l *lab.Lab, dst netip.AddrPort, d time.Duration, on bool) (traffic.BulkResult, uint64, error) {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	var inserted uint64
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
					Ready: func() { ready <- struct{}{} },
					Done: func(c Counters) {
						if i == 0 {
							inserted = c[probe.PdmPdmCounterPDM_C_INSERTED]
						}
					},
					Config: Config{MapSize: DefaultMapSize, Lifetime: DefaultLifetime}})
			}()
		}
		for range 2 {
			select {
			case <-ready:
			case <-time.After(30 * time.Second):
				stop()
				wg.Wait()
				return traffic.BulkResult{}, 0, fmt.Errorf("rttscope pdm not attached after 30 s: %w", errors.Join(errs...))
			}
		}
	}
	res, err := traffic.BulkStats(ctx, l.Client, dst, d, 0)
	stop()
	wg.Wait()
	if err != nil {
		return res, 0, fmt.Errorf("bulk transfer (PDM %s): %w", onOff(on), err)
	}
	if err := errors.Join(errs...); err != nil {
		return res, 0, err
	}
	return res, inserted, nil
}
