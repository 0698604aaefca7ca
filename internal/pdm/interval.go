package pdm

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"

	"github.com/rttscope/rttscope/internal/probe"
)

// Stat summarizes the samples of one delay over an interval, in ns. Min
// and Max are 0 when Count is.
type Stat struct {
	Count uint64 `json:"count"`
	Sum   uint64 `json:"sum"`
	Min   uint64 `json:"min"`
	Max   uint64 `json:"max"`
}

func (s *Stat) add(a probe.PdmPdmStat) {
	if a.Count == 0 {
		return
	}
	if s.Count == 0 || a.Min < s.Min {
		s.Min = a.Min
	}
	s.Max = max(s.Max, a.Max)
	s.Count += a.Count
	s.Sum += a.Sum
}

// Accum is what the kernel folded for one 5-tuple and direction in one
// interval (--pdm-report interval), summed over CPUs.
type Accum struct {
	Key        probe.PdmPdmAccKey
	DTLR, DTLS Stat
	NetworkRTT Stat
}

// IntervalRecord is the record of an Accum, as written in json/jsonl
// (docs/pdm.md lists the fields).
type IntervalRecord struct {
	Timestamp  int64  `json:"timestamp"` // Unix ns, end of the interval
	IntervalNs int64  `json:"interval"`  // its length
	SrcIP      string `json:"src_ip"`
	SrcPort    uint16 `json:"src_port"`
	DestIP     string `json:"dest_ip"`
	DestPort   uint16 `json:"dest_port"`
	Protocol   string `json:"protocol"`
	Direction  string `json:"direction"`
	DTLR       Stat   `json:"dtlr"`
	DTLS       Stat   `json:"dtls"`
	NetworkRTT Stat   `json:"network_rtt"`
}

// NewIntervalRecord names the sender of the packets as the source, as the
// per-packet records do.
func NewIntervalRecord(a *Accum, end time.Time, length time.Duration) IntervalRecord {
	k := &a.Key.Tuple
	r := IntervalRecord{
		Timestamp: end.UnixNano(), IntervalNs: int64(length),
		SrcIP: netip.AddrFrom16(k.Remote).String(), SrcPort: k.Rport, DestIP: netip.AddrFrom16(k.Local).String(), DestPort: k.Lport,
		Protocol: protoName(k.Proto), Direction: "ingress",
		DTLR: a.DTLR, DTLS: a.DTLS, NetworkRTT: a.NetworkRTT,
	}
	if a.Key.Egress != 0 {
		r.Direction = "egress"
		r.SrcIP, r.SrcPort, r.DestIP, r.DestPort = r.DestIP, r.DestPort, r.SrcIP, r.SrcPort
	}
	return r
}

// Collect starts a new interval and returns what the kernel folded in the
// earlier ones, deleting it. settle is how long to wait after switching
// epochs before reading, for programs that read the old epoch just before
// the switch to finish (a program run takes well under a microsecond).
func (o *Objects) Collect(settle time.Duration) ([]Accum, error) {
	var epoch uint32
	if err := o.PdmEpoch.Lookup(uint32(0), &epoch); err != nil {
		return nil, fmt.Errorf("read PDM interval epoch: %w", err)
	}
	epoch++
	if err := o.PdmEpoch.Update(uint32(0), epoch, ebpf.UpdateAny); err != nil {
		return nil, fmt.Errorf("start PDM interval: %w", err)
	}
	if settle > 0 {
		time.Sleep(settle)
	}
	var (
		key  probe.PdmPdmAccKey
		vals []probe.PdmPdmAccVal
		out  []Accum
	)
	it := o.PdmAcc.Iterate()
	for it.Next(&key, &vals) {
		if key.Epoch == epoch {
			continue
		}
		a := Accum{Key: key}
		for i := range vals {
			a.DTLR.add(vals[i].Dtlr)
			a.DTLS.add(vals[i].Dtls)
			a.NetworkRTT.add(vals[i].Net)
		}
		out = append(out, a)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read PDM accumulators: %w", err)
	}
	for i := range out {
		if err := o.PdmAcc.Delete(&out[i].Key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, fmt.Errorf("reset PDM accumulators: %w", err)
		}
	}
	return out, nil
}
