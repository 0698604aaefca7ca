package flagval

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// parse defines v as --x on a fresh flag set and parses args; it returns
// the default --help shows and the one-line message of a refused argument
// ("" when parsing succeeded).
func parse(t *testing.T, v pflag.Value, args ...string) (def, msg string) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	fs.Var(v, "x", "usage")
	def = fs.Lookup("x").DefValue
	if err := fs.Parse(args); err != nil {
		m, ok := Message(err)
		if !ok {
			t.Fatalf("parse %q: %v is not a flagval error", args, err)
		}
		return def, m
	}
	return def, ""
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
		ok   bool
	}{
		{"100", 100 * time.Millisecond, true},
		{"0", 0, true},
		{"0.25", 250 * time.Microsecond, true},
		{"250us", 250 * time.Microsecond, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"1e9", 1e9 * time.Millisecond, true},
		{"abc", 0, false},
		{"-5", 0, false},
		{"-1ms", 0, false},
		{"2e9", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
	} {
		d := 100 * time.Millisecond
		def, msg := parse(t, NewMillis(&d), "--x", tc.arg)
		if def != "100" {
			t.Errorf("default shown as %q, want 100", def)
		}
		switch {
		case tc.ok && (msg != "" || d != tc.want):
			t.Errorf("--x %s: %v (%q), want %v", tc.arg, d, msg, tc.want)
		case !tc.ok && msg != `invalid --x "`+tc.arg+`": want milliseconds (e.g. 100) or a duration (e.g. 250us)`:
			t.Errorf("--x %s: message %q", tc.arg, msg)
		case !tc.ok && d != 100*time.Millisecond:
			t.Errorf("--x %s: refused, yet the value changed to %v", tc.arg, d)
		}
	}
	d := 250 * time.Microsecond
	if s := NewMillis(&d).String(); s != "0.25" {
		t.Errorf("String() = %q, want 0.25", s)
	}
}

func TestEnum(t *testing.T) {
	smoothed := false
	rttType := func() *Enum[bool] {
		return Choice(&smoothed, []string{"min", "smoothed"}, []bool{false, true}).Alias("srtt", true)
	}
	if def, msg := parse(t, rttType(), "--x", "smoothed"); def != "min" || msg != "" || !smoothed {
		t.Errorf("smoothed: default %q, message %q, value %v", def, msg, smoothed)
	}
	smoothed = false
	if _, msg := parse(t, rttType(), "--x", "srtt"); msg != "" || !smoothed {
		t.Errorf("alias srtt: message %q, value %v", msg, smoothed)
	}
	if _, msg := parse(t, rttType(), "--x", "foo"); msg != `invalid --x "foo": want min or smoothed` {
		t.Errorf("foo: message %q", msg)
	}

	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"tc", "xdp"}, `want tc or xdp`},
		{[]string{"auto", "tcx", "clsact"}, `want auto, tcx or clsact`},
		{[]string{"standard", "ppviz", "json", "jsonl"}, `want one of standard, ppviz, json, jsonl`},
	} {
		mode := tc.names[0]
		def, msg := parse(t, OneOf(&mode, tc.names...), "--x", "bogus")
		if def != tc.names[0] || msg != `invalid --x "bogus": `+tc.want || mode != tc.names[0] {
			t.Errorf("%v: default %q, message %q, value %q", tc.names, def, msg, mode)
		}
		_, msg = parse(t, OneOf(&mode, tc.names...), "--x", tc.names[1])
		if msg != "" || mode != tc.names[1] {
			t.Errorf("%v: --x %s: message %q, value %q", tc.names, tc.names[1], msg, mode)
		}
	}
}

func TestPrefixesAndMACs(t *testing.T) {
	var nets []netip.Prefix
	def, msg := parse(t, NewPrefixes(&nets), "--x", "10.1.2.3/8", "--x", "2001:db8::10")
	if def != "" || msg != "" || len(nets) != 2 || nets[0].String() != "10.0.0.0/8" || nets[1].String() != "2001:db8::10/128" {
		t.Errorf("default %q, message %q, prefixes %v", def, msg, nets)
	}
	for _, bad := range []string{"10.0.0.0/33", "nonsense", "fe80::1%eth0"} {
		if _, msg := parse(t, NewPrefixes(&nets), "--x", bad); msg != `invalid --x "`+bad+`": want a CIDR prefix such as 10.0.0.0/8 or 2001:db8::/32` {
			t.Errorf("%s: message %q", bad, msg)
		}
	}

	var macs [][6]byte
	def, msg = parse(t, NewMACs(&macs), "--x", "02:00:00:00:00:01")
	if def != "" || msg != "" || len(macs) != 1 || macs[0] != [6]byte{2, 0, 0, 0, 0, 1} {
		t.Errorf("default %q, message %q, addresses %v", def, msg, macs)
	}
	if s := NewMACs(&macs).String(); s != "02:00:00:00:00:01" {
		t.Errorf("String() = %q", s)
	}
	for _, bad := range []string{"02:00:00:00:00", "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"} {
		if _, msg := parse(t, NewMACs(&macs), "--x", bad); msg != `invalid --x "`+bad+`": want a 6-byte MAC address such as 02:00:00:00:00:01` {
			t.Errorf("%s: message %q", bad, msg)
		}
	}
}

// TestMessageLeavesOthers: errors that are not flagval's keep pflag's words.
func TestMessageLeavesOthers(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	fs.Duration("d", 0, "")
	for _, args := range [][]string{{"--d", "ten"}, {"--bogus"}} {
		err := fs.Parse(args)
		if err == nil {
			t.Fatalf("%q parsed", args)
		}
		if m, ok := Message(err); ok {
			t.Errorf("%q: Message took %v as its own: %q", args, err, m)
		}
	}
}

func TestBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "500000": 500000, "64M": 64 << 20, "1G": 1 << 30, "10KiB": 10 << 10, "2kb": 2 << 10, "3T": 3 << 40} {
		var v int64
		if err := NewBytes(&v).Set(in); err != nil || v != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, v, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5M", "M", "12X", "99999999999T"} {
		var v int64
		if err := NewBytes(&v).Set(in); err == nil {
			t.Errorf("Set(%q) accepted: %d", in, v)
		}
	}
	v := int64(64 << 20)
	if s := NewBytes(&v).String(); s != "64M" {
		t.Errorf("String() = %q", s)
	}
}
