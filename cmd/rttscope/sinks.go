package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/flagval"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/kafkasink"
	"github.com/rttscope/rttscope/internal/metrics"
	"github.com/rttscope/rttscope/internal/sink"
)

// sinkFlags add the Kafka and Prometheus sinks to the file output and say
// how every sink queues (docs/sinks.md).
type sinkFlags struct {
	kafka       string
	kafkaOpts   kafkasink.Options
	spoolSize   int64
	metricsAddr string
	maxPrefixes int
	queue       int
	policies    map[string]string
}

// metricsStatsInterval is monitor's --stats-interval with --metrics-addr,
// unless given: the self-telemetry series change with each stats record.
const metricsStatsInterval = 10 * time.Second

// sinkNames are the sinks, in the order of the stats record.
var sinkNames = []string{"files", "kafka", "metrics"}

// defaultPolicies: files never lose a record (as without sinks), Kafka
// spools what the brokers do not take, metrics drop rather than wait.
var defaultPolicies = map[string]sink.Policy{"files": sink.Block, "kafka": sink.Spool, "metrics": sink.Drop}

func (f *sinkFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.kafka, "kafka", "", "also produce every record to Kafka: "+kafkasink.SpecHelp+" (docs/sinks.md)")
	f.spoolSize = 1 << 30
	fl.Var(flagval.NewBytes(&f.spoolSize), "spool-size", "with --kafka: bound of the on-disk spool that keeps messages while the brokers are unreachable (0: no spool)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on ADDR/metrics, e.g. :9464: per-prefix RTT histograms with --aggregate, self-telemetry from the stats records (docs/sinks.md)")
	fl.IntVar(&f.maxPrefixes, "metrics-max-prefixes", metrics.DefaultMaxPrefixes, "with --metrics-addr: prefixes with series of their own; the records of others are added to prefix=\"overflow\"")
	fl.IntVar(&f.queue, "sink-queue", sink.DefaultQueue, "with more than one sink (or --sink-policy): records each sink's queue holds")
	fl.Var(policyFlag{&f.policies}, "sink-policy", "what a sink does when its queue is full: SINK=block|drop|spool for files, kafka, metrics, comma-separated (default files=block,kafka=spool,metrics=drop; spool: kafka only)")
}

// policyFlag is --sink-policy: SINK=POLICY pairs, comma-separated or
// repeated; names and policies are checked by validate.
type policyFlag struct{ m *map[string]string }

func (p policyFlag) Set(s string) error {
	if *p.m == nil {
		*p.m = map[string]string{}
	}
	for part := range strings.SplitSeq(s, ",") {
		name, pol, ok := strings.Cut(part, "=")
		if !ok {
			return &flagval.Error{Want: "SINK=POLICY, e.g. kafka=drop"}
		}
		(*p.m)[name] = pol
	}
	return nil
}

func (p policyFlag) String() string {
	var parts []string
	for _, n := range sinkNames {
		if v, ok := (*p.m)[n]; ok {
			parts = append(parts, n+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

func (p policyFlag) Type() string { return "SINK=POLICY" }

// wanted reports whether the records go through a sink.Fanout: another
// sink than the files, or a policy asked for.
func (f *sinkFlags) wanted() bool { return f.kafka != "" || f.metricsAddr != "" || len(f.policies) > 0 }

// policy returns the policy of the named sink.
func (f *sinkFlags) policy(name string) sink.Policy {
	if s, ok := f.policies[name]; ok {
		p, _ := sink.ParsePolicy(s) // validate checked it
		return p
	}
	return defaultPolicies[name]
}

// validate checks the sink flags before anything is opened.
func (f *sinkFlags) validate() error {
	for name, p := range f.policies {
		if !slices.Contains(sinkNames, name) {
			return usageError{fmt.Sprintf("--sink-policy %s=%s: unknown sink %q (valid: %s)", name, p, name, strings.Join(sinkNames, ", "))}
		}
		pol, err := sink.ParsePolicy(p)
		if err != nil {
			return usageError{"--sink-policy " + name + ": " + err.Error()}
		}
		if pol == sink.Spool && name != "kafka" {
			return usageError{fmt.Sprintf("--sink-policy %s=spool: only kafka spools (to disk, while the brokers are unreachable)", name)}
		}
	}
	if f.kafka != "" {
		o, err := kafkasink.ParseSpec(f.kafka)
		if err != nil {
			return usageError{"--kafka: " + err.Error()}
		}
		if f.policy("kafka") == sink.Spool {
			o.SpoolSize = f.spoolSize
			if f.spoolSize <= 0 {
				return usageError{"--sink-policy kafka=spool needs --spool-size > 0 (or choose kafka=block or kafka=drop)"}
			}
		}
		f.kafkaOpts = o
	} else if f.spoolSize != 1<<30 {
		return usageError{"--spool-size needs --kafka"}
	}
	if f.metricsAddr == "" && f.maxPrefixes != metrics.DefaultMaxPrefixes {
		return usageError{"--metrics-max-prefixes needs --metrics-addr"}
	}
	if f.maxPrefixes < 1 {
		return usageError{"--metrics-max-prefixes must be at least 1"}
	}
	if f.queue < 1 {
		return usageError{"--sink-queue must be at least 1"}
	}
	return nil
}

// open starts the Kafka and metrics sinks and returns, with files (the
// file or stdout writer, nil when --kafka replaces stdout), the Fanout
// to all of them. On error, what was started is closed.
func (f *sinkFlags) open(files format.Writer, fo format.Options) (*sink.Fanout, error) {
	var sinks []sink.Sink
	closeAll := func() {
		for _, s := range sinks {
			_ = s.Writer.Close() // the error that stopped the start is the one to report
		}
	}
	if files != nil {
		sinks = append(sinks, sink.Sink{Name: "files", Policy: f.policy("files"), Writer: files})
	}
	if f.kafka != "" {
		kw, err := kafkasink.New(f.kafkaOpts, fo, os.Stderr)
		if err != nil {
			closeAll()
			return nil, err
		}
		sinks = append(sinks, sink.Sink{Name: "kafka", Policy: f.policy("kafka"), Writer: kw, Counters: kw.Counters})
	}
	if f.metricsAddr != "" {
		m, err := metrics.New(metrics.Options{Addr: f.metricsAddr, MaxPrefixes: f.maxPrefixes})
		if err != nil {
			closeAll()
			return nil, err
		}
		sinks = append(sinks, sink.Sink{Name: "metrics", Policy: f.policy("metrics"), Writer: m, Kinds: sink.Stats | sink.Aggregates})
	}
	fan, err := sink.New(f.queue, sinks...)
	if err != nil {
		closeAll()
		return nil, err
	}
	return fan, nil
}
