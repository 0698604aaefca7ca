package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rttscope/rttscope/internal/events"
)

// Metric names and help (docs/sinks.md lists them). Counters end in
// _total, times are in seconds, sizes in bytes.
var (
	rttDesc = prometheus.NewDesc("rttscope_rtt_seconds",
		"RTT samples of the prefix since start, from the kernel's per-prefix histograms (aggregated mode): native buckets (schema 4) and classic buckets; each kernel bin counted in the bucket of its midpoint",
		[]string{"prefix"}, nil)
	packetsDesc = prometheus.NewDesc("rttscope_prefix_packets_total",
		"Packets of the prefix (direction rx: from it, seen on ingress; tx: to it, seen on egress) by protocol class",
		[]string{"prefix", "direction", "protocol"}, nil)
	bytesDesc = prometheus.NewDesc("rttscope_prefix_bytes_total",
		"Bytes (IP header and payload) of the prefix by direction and protocol class",
		[]string{"prefix", "direction", "protocol"}, nil)
	ecnDesc = prometheus.NewDesc("rttscope_prefix_ecn_packets_total",
		"Packets of the prefix by direction and ECN codepoint",
		[]string{"prefix", "direction", "ecn"}, nil)
	samplesDesc = prometheus.NewDesc("rttscope_prefix_samples_total",
		"RTT samples of the prefix by the source that measured them (tcp_ts, tcp_seq, tcp_syn, icmp, dns, quic_spin: docs/sources.md)",
		[]string{"prefix", "source"}, nil)
	prefixesDesc = prometheus.NewDesc("rttscope_metrics_prefixes",
		"Prefixes with series of their own (at most --metrics-max-prefixes)", nil, nil)
	overflowDesc = prometheus.NewDesc("rttscope_metrics_overflow_records_total",
		"Aggregated records of prefixes beyond --metrics-max-prefixes, added to the series of prefix=\"overflow\"", nil, nil)

	cpuDesc      = prometheus.NewDesc("rttscope_process_cpu_seconds_total", "CPU time used by rttscope", []string{"mode"}, nil)
	rssDesc      = prometheus.NewDesc("rttscope_process_resident_memory_bytes", "Resident set size of rttscope", nil, nil)
	maxRSSDesc   = prometheus.NewDesc("rttscope_process_max_resident_memory_bytes", "Peak resident set size of rttscope", nil, nil)
	cpuShareDesc = prometheus.NewDesc("rttscope_process_cpu_ratio", "CPU time over wall time between the last two stats records (1 = one CPU busy)", nil, nil)

	bpfEnabledDesc = prometheus.NewDesc("rttscope_bpf_stats_enabled", "1 while the kernel accounts BPF run time (--bpf-stats or kernel.bpf_stats_enabled)", nil, nil)
	bpfRunsDesc    = prometheus.NewDesc("rttscope_bpf_runs_total", "Runs (packets) of each attached BPF program while accounting is on", []string{"program"}, nil)
	bpfTimeDesc    = prometheus.NewDesc("rttscope_bpf_run_seconds_total", "Run time of each attached BPF program while accounting is on; rate(run_seconds)/rate(runs) is the time per packet", []string{"program"}, nil)
	bpfNsDesc      = prometheus.NewDesc("rttscope_bpf_ns_per_packet", "Mean run time per packet of each BPF program over the last stats interval", []string{"program"}, nil)

	sinkRecordsDesc   = prometheus.NewDesc("rttscope_sink_records_total", "Records handed to each output sink", []string{"sink"}, nil)
	sinkDroppedDesc   = prometheus.NewDesc("rttscope_sink_dropped_total", "Records each output sink lost (queue full under the drop policy, spool full, refused or unacknowledged Kafka messages)", []string{"sink"}, nil)
	sinkQueuedDesc    = prometheus.NewDesc("rttscope_sink_queued", "Records waiting in each output sink's queue", []string{"sink"}, nil)
	kafkaProducedDesc = prometheus.NewDesc("rttscope_kafka_produced_total", "Messages handed to the Kafka client", nil, nil)
	kafkaAckedDesc    = prometheus.NewDesc("rttscope_kafka_acked_total", "Messages the Kafka brokers acknowledged", nil, nil)
	kafkaSpooledDesc  = prometheus.NewDesc("rttscope_kafka_spooled_total", "Messages written to the on-disk spool while the brokers took no more", nil, nil)
)

// counterDescs describe the stats record's counters, in
// events.StatsCounters order: rttscope_NAME_total, or the gauge
// rttscope_NAME for the occupancies (flows, timestamps).
var counterDescs = func() []*prometheus.Desc {
	d := make([]*prometheus.Desc, len(events.StatsCounters))
	for i, c := range events.StatsCounters {
		if isGauge(c.Name) {
			d[i] = prometheus.NewDesc("rttscope_"+c.Name, "Current occupancy: stats record field "+c.Name, nil, nil)
		} else {
			d[i] = prometheus.NewDesc("rttscope_"+c.Name+"_total", "Stats record counter "+c.Name+"", nil, nil)
		}
	}
	return d
}()

// isGauge reports the stats record's values that are not totals.
func isGauge(name string) bool { return name == "flows" || name == "timestamps" }

// collector makes the series of a Sink at each scrape.
type collector struct{ s *Sink }

// Describe sends nothing: the collector is unchecked, since the set of
// series depends on the records seen.
func (collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for l, p := range s.prefixes {
		s.collectPrefix(ch, l, p)
	}
	if s.overflow != nil {
		s.collectPrefix(ch, OverflowPrefix, s.overflow)
	}
	ch <- prometheus.MustNewConstMetric(prefixesDesc, prometheus.GaugeValue, float64(len(s.prefixes)))
	ch <- prometheus.MustNewConstMetric(overflowDesc, prometheus.CounterValue, float64(s.overflowRecords))
	if s.stats != nil {
		collectStats(ch, s.stats)
	}
}

func (s *Sink) collectPrefix(ch chan<- prometheus.Metric, l string, p *prefixState) {
	ch <- p.rtt.metric(rttDesc, DefaultBuckets, s.started, l)
	for dir, t := range map[string]*events.Traffic{"rx": &p.rx, "tx": &p.tx} {
		for i, class := range events.ClassNames {
			ch <- prometheus.MustNewConstMetric(packetsDesc, prometheus.CounterValue, float64(t.Packets[i]), l, dir, class)
			ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(t.Bytes[i]), l, dir, class)
		}
		for i, e := range events.ECNNames {
			ch <- prometheus.MustNewConstMetric(ecnDesc, prometheus.CounterValue, float64(t.ECN[i]), l, dir, e)
		}
	}
	for i, n := range p.bySource {
		if n > 0 { // a source that never measured this prefix has no series
			ch <- prometheus.MustNewConstMetric(samplesDesc, prometheus.CounterValue, float64(n), l, events.Source(i).String())
		}
	}
}

// collectStats sends the self-telemetry of stats record st.
func collectStats(ch chan<- prometheus.Metric, st *events.Stats) {
	for i := range events.StatsCounters {
		c := &events.StatsCounters[i]
		vt := prometheus.CounterValue
		if isGauge(c.Name) {
			vt = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(counterDescs[i], vt, float64(*c.Field(st)))
	}
	if p := st.Process; p != nil {
		ch <- prometheus.MustNewConstMetric(cpuDesc, prometheus.CounterValue, p.CPUUser.Seconds(), "user")
		ch <- prometheus.MustNewConstMetric(cpuDesc, prometheus.CounterValue, p.CPUSystem.Seconds(), "system")
		ch <- prometheus.MustNewConstMetric(rssDesc, prometheus.GaugeValue, float64(p.RSS))
		ch <- prometheus.MustNewConstMetric(maxRSSDesc, prometheus.GaugeValue, float64(p.MaxRSS))
		ch <- prometheus.MustNewConstMetric(cpuShareDesc, prometheus.GaugeValue, p.CPUShare)
	}
	if b := st.BPF; b != nil {
		on := 0.0
		if b.Enabled {
			on = 1
		}
		ch <- prometheus.MustNewConstMetric(bpfEnabledDesc, prometheus.GaugeValue, on)
		for i := range b.Programs {
			g := &b.Programs[i]
			ch <- prometheus.MustNewConstMetric(bpfRunsDesc, prometheus.CounterValue, float64(g.RunCount), g.Name)
			ch <- prometheus.MustNewConstMetric(bpfTimeDesc, prometheus.CounterValue, g.RunTime.Seconds(), g.Name)
			if ns, ok := g.IntervalNsPerPacket(); ok {
				ch <- prometheus.MustNewConstMetric(bpfNsDesc, prometheus.GaugeValue, ns, g.Name)
			}
		}
	}
	sinks := st.SinkList()
	for i := range sinks {
		k := &sinks[i]
		ch <- prometheus.MustNewConstMetric(sinkRecordsDesc, prometheus.CounterValue, float64(k.Records), k.Name)
		ch <- prometheus.MustNewConstMetric(sinkDroppedDesc, prometheus.CounterValue, float64(k.Dropped), k.Name)
		ch <- prometheus.MustNewConstMetric(sinkQueuedDesc, prometheus.GaugeValue, float64(k.Queued), k.Name)
		if k.Name == "kafka" {
			ch <- prometheus.MustNewConstMetric(kafkaProducedDesc, prometheus.CounterValue, float64(k.Produced))
			ch <- prometheus.MustNewConstMetric(kafkaAckedDesc, prometheus.CounterValue, float64(k.Acked))
			ch <- prometheus.MustNewConstMetric(kafkaSpooledDesc, prometheus.CounterValue, float64(k.Spooled))
		}
	}
}
