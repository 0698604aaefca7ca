package pdm

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/rttscope/rttscope/internal/kernel"
	"github.com/rttscope/rttscope/internal/probe"
)

// Defaults of the command's flags.
const (
	DefaultMapSize  = 65536
	DefaultLifetime = time.Minute
)

// Config says how to load the PDM programs.
type Config struct {
	MapSize  uint32        // 5-tuples with state (--pdm-map-size)
	Lifetime time.Duration // idle state starts over after this (--pdm-lifetime)
	Passive  bool          // decode PDM only, never insert (--passive)

	// TstampClock makes the programs read the time from skb->tstamp
	// instead of the monotonic clock: BPF_PROG_TEST_RUN tests set the
	// time of each packet with it.
	TstampClock bool
}

// Report modes (--pdm-report).
const (
	ReportPacket   = "packet"
	ReportInterval = "interval"
)

// ReportModes are the values of --pdm-report, the default first.
var ReportModes = []string{ReportPacket, ReportInterval}

// Reporting says what is written: ReportPacket (a record per PDM option) or
// ReportInterval (a record per 5-tuple and Interval, the options' delays
// binned in user space).
type Reporting struct {
	Report   string
	Interval time.Duration
}

// Validate names the flag of a value that cannot work.
func (r Reporting) Validate() error {
	switch r.Report {
	case "", ReportPacket:
	case ReportInterval:
		if r.Interval <= 0 {
			return fmt.Errorf("invalid --interval %v: want a positive duration", r.Interval)
		}
	default:
		return fmt.Errorf("invalid --pdm-report %q: want packet or interval", r.Report)
	}
	return nil
}

// every is the interval length, 0 in packet mode.
func (r Reporting) every() time.Duration {
	if r.Report == ReportInterval {
		return r.Interval
	}
	return 0
}

// Validate names the flag of a value that cannot work.
func (c Config) Validate() error {
	if c.MapSize < 1 || c.MapSize > 1<<24 {
		return fmt.Errorf("invalid --pdm-map-size %d: want 1 .. %d", c.MapSize, 1<<24)
	}
	if c.Lifetime <= 0 {
		return fmt.Errorf("invalid --pdm-lifetime %v: want a positive duration", c.Lifetime)
	}
	return nil
}

// Objects are the loaded PDM maps and programs.
type Objects struct {
	probe.PdmObjects
	Config Config
}

// Load loads the PDM programs with cfg. The caller closes the result.
func Load(cfg Config) (*Objects, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := kernel.CheckRequired(); err != nil {
		return nil, err
	}
	_ = rlimit.RemoveMemlock() // not needed (and failing) on kernels >= 5.11
	spec, err := probe.LoadPdm()
	if err != nil {
		return nil, fmt.Errorf("parse embedded PDM BPF object: %w", err)
	}
	spec.Maps[probe.PdmMapPdmFlows].MaxEntries = cfg.MapSize
	bc := probe.PdmPdmConfig{LifetimeNs: uint64(cfg.Lifetime)}
	if cfg.Passive {
		bc.Passive = 1
	}
	if cfg.TstampClock {
		bc.TstampClock = 1
	}
	if err := spec.Variables[probe.PdmVarPdmCfg].Set(bc); err != nil {
		return nil, fmt.Errorf("configure PDM programs: %w", err)
	}
	o := &Objects{Config: cfg}
	if err := spec.LoadAndAssign(&o.PdmObjects, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel refused the PDM programs (see `rttscope doctor`): %w", ve)
		}
		return nil, fmt.Errorf("load PDM programs: %w", err)
	}
	return o, nil
}

// Counters are the kernel's PDM counters summed over CPUs, indexed by
// probe.PdmPdmCounter.
type Counters [probe.PdmPdmCounterPDM_C_NR]uint64

// counterNames name the counters in the stats record; a test checks that
// every counter has one.
var counterNames = [...]string{
	probe.PdmPdmCounterPDM_C_EGRESS:        "egress_packets",
	probe.PdmPdmCounterPDM_C_INGRESS:       "ingress_packets",
	probe.PdmPdmCounterPDM_C_INSERTED:      "inserted",
	probe.PdmPdmCounterPDM_C_SKIP_NOT_IPV6: "skipped_not_ipv6",
	probe.PdmPdmCounterPDM_C_SKIP_PROTO:    "skipped_protocol",
	probe.PdmPdmCounterPDM_C_SKIP_EXT_HDR:  "skipped_ext_header",
	probe.PdmPdmCounterPDM_C_SKIP_MTU:      "skipped_mtu",
	probe.PdmPdmCounterPDM_C_SKIP_GSO:      "skipped_gso",
	probe.PdmPdmCounterPDM_C_ADJUST_FAILED: "insert_failed",
	probe.PdmPdmCounterPDM_C_PDM_SEEN:      "pdm_seen",
	probe.PdmPdmCounterPDM_C_MALFORMED:     "malformed",
	probe.PdmPdmCounterPDM_C_FRAGMENT:      "fragments",
	probe.PdmPdmCounterPDM_C_STATE_CREATED: "state_created",
	probe.PdmPdmCounterPDM_C_STATE_RESET:   "state_reset",
	probe.PdmPdmCounterPDM_C_MAP_FULL:      "state_refused_map_full",
	probe.PdmPdmCounterPDM_C_EVENTS:        "events",
	probe.PdmPdmCounterPDM_C_RINGBUF_FULL:  "events_lost_ringbuf_full",
}

// Map returns the counters by name.
func (c Counters) Map() map[string]uint64 {
	m := make(map[string]uint64, len(c))
	for i, v := range c {
		m[counterNames[i]] = v
	}
	return m
}

// ReadCounters sums the per-CPU counters.
func (o *Objects) ReadCounters() (Counters, error) {
	var sum Counters
	var perCPU []uint64
	for c := range sum {
		if err := o.PdmCounters.Lookup(uint32(c), &perCPU); err != nil {
			return sum, fmt.Errorf("read PDM counter %d: %w", c, err)
		}
		for _, v := range perCPU {
			sum[c] += v
		}
	}
	return sum, nil
}

// Sweep deletes the state of 5-tuples idle longer than the lifetime at
// monotonic time now (ns), so that the map, which never evicts, makes room
// for new 5-tuples. It returns how many it deleted.
func (o *Objects) Sweep(now uint64) (int, error) {
	var (
		key   probe.PdmPdmKey
		st    probe.PdmPdmState
		stale []probe.PdmPdmKey
	)
	life := uint64(o.Config.Lifetime)
	it := o.PdmFlows.Iterate()
	for it.Next(&key, &st) {
		if now > st.Touched && now-st.Touched > life {
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("sweep PDM state: %w", err)
	}
	n := 0
	for i := range stale {
		if err := o.PdmFlows.Delete(&stale[i]); err == nil {
			n++
		} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, fmt.Errorf("sweep PDM state: %w", err)
		}
	}
	return n, nil
}
