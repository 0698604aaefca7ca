package sampling

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/loader"
)

// parse defines the flags of Default() options (those keep picks) and
// parses args.
func parse(t *testing.T, keep func(string) bool, args ...string) (Options, error) {
	t.Helper()
	o := Default()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	o.AddFlags(fs, keep)
	err := fs.Parse(args)
	return o, err
}

func mustParse(t *testing.T, args ...string) Options {
	t.Helper()
	o, err := parse(t, nil, args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return o
}

// TestDefaults: defining the flags changes nothing; the defaults are the
// loader's, per-sample.
func TestDefaults(t *testing.T) {
	if o := mustParse(t); o != (Options{BPF: loader.DefaultConfig()}) {
		t.Errorf("after AddFlags: %+v", o)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

// TestEveryFlagSetsSomething: each flag, given a value other than its
// default, changes the options (so none is bound to the wrong variable or
// to nothing), and no two flags change the same field the same way.
func TestEveryFlagSetsSomething(t *testing.T) {
	args := map[string]string{
		"rate-limit": "7", "rtt-rate": "2", "rtt-type": "smoothed", "tcp": "true", "icmp": "true",
		"tcp-mode": "seq", "tcp-handshake": "true", "dns": "true", "dns-ports": "53,5353", "dns-names": "true",
		"quic": "true", "quic-ports": "443,8443",
		"include-syn": "true", "include-local": "true", "tcp-flow-timeout": "7s", "icmp-flow-timeout": "7s",
		"timestamp-timeout": "7s", "flow-map-size": "7", "timestamp-map-size": "7", "ringbuf-size": "8192",
		"aggregate": "7s", "aggregate-subnets-v4": "7", "aggregate-subnets-v6": "7", "aggregate-reverse": "true",
		"flow-summary": "true", "flow-summary-interval": "7s", "prefix-map-size": "7",
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o := Default()
	o.AddFlags(fs, nil)
	seen := map[Options]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		v, ok := args[f.Name]
		if !ok {
			t.Errorf("flag --%s has no case in this test", f.Name)
			return
		}
		got := mustParse(t, "--"+f.Name+"="+v)
		if got == Default() && f.Name != "tcp" { // -T alone is the default
			t.Errorf("--%s=%s changed nothing", f.Name, v)
		}
		if other, dup := seen[got]; dup && f.Name != "tcp" {
			t.Errorf("--%s and --%s set the same", f.Name, other)
		}
		seen[got] = f.Name
	})
	if n := len(args); len(seen) != n {
		t.Errorf("%d flags defined, %d in this test", len(seen), n)
	}
}

// TestSources: the sources given true are tracked; with none, TCP.
func TestSources(t *testing.T) {
	for _, tc := range []struct {
		args                 []string
		tcp, icmp, handshake bool
	}{
		{nil, true, false, false},
		{[]string{"--tcp-handshake"}, false, false, true},
		{[]string{"--tcp-handshake", "-T"}, true, false, true},
		{[]string{"-T"}, true, false, false},
		{[]string{"-C"}, false, true, false},
		{[]string{"-T", "-C"}, true, true, false},
		{[]string{"-C", "-T"}, true, true, false},
		{[]string{"--tcp=false"}, true, false, false},
		{[]string{"--icmp=false"}, true, false, false},
		{[]string{"-T", "--tcp=false"}, true, false, false},
		{[]string{"-C", "--tcp=false"}, false, true, false},
		{[]string{"-T", "-C", "--icmp=false"}, true, false, false},
	} {
		c := mustParse(t, tc.args...).BPF
		if c.TrackTCP != tc.tcp || c.TrackICMP != tc.icmp || c.TrackTCPHandshake != tc.handshake {
			t.Errorf("%q: TCP %v ICMP %v handshake %v, want %v %v %v", tc.args, c.TrackTCP, c.TrackICMP,
				c.TrackTCPHandshake, tc.tcp, tc.icmp, tc.handshake)
		}
	}
	if _, err := parse(t, nil, "--tcp=maybe"); err == nil {
		t.Error("--tcp=maybe accepted")
	}
	if _, err := parse(t, nil, "--tcp-mode=both"); err == nil {
		t.Error("--tcp-mode=both accepted")
	}
	for _, bad := range []string{"0", "65536", "1,2,3,4,5", "53,", "x"} {
		if _, err := parse(t, nil, "--dns-ports="+bad); err == nil {
			t.Errorf("--dns-ports=%s accepted", bad)
		}
	}
	if c := mustParse(t, "--dns", "--dns-ports", "5353,53").BPF; !c.TrackDNS || c.TrackTCP || c.DNSPorts != [loader.DNSPortSlots]uint16{5353, 53} {
		t.Errorf("--dns --dns-ports 5353,53: %+v", c)
	}
}

func TestConversions(t *testing.T) {
	o := mustParse(t, "-r", "0", "-t", "srtt", "--aggregate", "10s")
	if o.BPF.RateLimit != 0 || !o.BPF.RTTRateUseSRTT || !o.BPF.Aggregate || o.Report.AggregateInterval != 10*time.Second {
		t.Errorf("-r 0 -t srtt --aggregate 10s: %+v", o)
	}
	o = mustParse(t, "--aggregate", "10s", "--aggregate", "0")
	if o.BPF.Aggregate || o.Report.AggregateInterval != 0 {
		t.Errorf("--aggregate 0 after 10s: still aggregating: %+v", o)
	}
	if o := mustParse(t, "-r", "250us"); o.BPF.RateLimit != 250*time.Microsecond {
		t.Errorf("-r 250us: %v", o.BPF.RateLimit)
	}
}

// TestKeep: a command gets the flags it picks, no others.
func TestKeep(t *testing.T) {
	demo := func(name string) bool { return name == "rate-limit" }
	if o, err := parse(t, demo, "-r", "0"); err != nil || o.BPF.RateLimit != 0 {
		t.Errorf("demo -r 0: %v, %v", err, o.BPF.RateLimit)
	}
	if _, err := parse(t, demo, "-C"); err == nil {
		t.Error("demo took -C")
	}
	replay := func(name string) bool { return name != "include-local" }
	if _, err := parse(t, replay, "--include-local"); err == nil {
		t.Error("replay took --include-local")
	}
	if o, err := parse(t, replay, "-C", "-s"); err != nil || !o.BPF.TrackICMP || !o.BPF.IncludeSYN {
		t.Errorf("replay -C -s: %v, %+v", err, o.BPF)
	}
}

// TestValidate: what depends on several flags is refused after parsing,
// in the words of the command line; the library's inconsistencies too.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--aggregate", "-1s"}, "--aggregate must be >= 0"},
		{[]string{"--flow-summary-interval", "1s"}, "--flow-summary-interval needs --flow-summary"},
		{[]string{"--flow-summary", "--flow-summary-interval", "-1s"}, "--flow-summary-interval needs --flow-summary"},
		{[]string{"--aggregate", "1s", "--prefix-map-size", "0"}, "prefix map size must be > 0"},
		{[]string{"--ringbuf-size", "5000"}, "ring buffer size must be a power of two"},
		{[]string{"--rtt-rate", "-1"}, "rtt rate must be between 0 and 1e6"},
	} {
		err := mustParse(t, tc.args...).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"--prefix-map-size", "0"},
		{"--flow-summary", "--flow-summary-interval", "1s"},
		{"--aggregate", "1s", "-C", "-T", "-r", "0"},
	} {
		if err := mustParse(t, args...).Validate(); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
	lib := Default()
	lib.BPF.Aggregate = true
	if err := lib.Validate(); err == nil || !strings.Contains(err.Error(), "aggregation interval must be > 0") {
		t.Errorf("aggregating without an interval: %v", err)
	}
}

func TestNeeds(t *testing.T) {
	c := loader.DefaultConfig()
	if Needs(c) != 0 {
		t.Errorf("per-sample needs %v", Needs(c))
	}
	c.Aggregate, c.FlowSummary = true, true
	if Needs(c) != format.Aggregates|format.FlowSummaries {
		t.Errorf("aggregated with summaries needs %v", Needs(c))
	}
}
