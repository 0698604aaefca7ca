package lab

import (
	"testing"
	"time"
)

func TestParsePath(t *testing.T) {
	ms := time.Millisecond
	for in, want := range map[string]PathSpec{
		"20ms":              {DelayToServer: 20 * ms, DelayToClient: 20 * ms},
		"20ms/10ms":         {DelayToServer: 20 * ms, DelayToClient: 10 * ms},
		"5ms@50mbit":        {DelayToServer: 5 * ms, DelayToClient: 5 * ms, RateBitsPerSec: 50e6},
		"20ms/10ms@1.5Gbit": {DelayToServer: 20 * ms, DelayToClient: 10 * ms, RateBitsPerSec: 1.5e9},
		"0@100kbit":         {RateBitsPerSec: 100e3},
		" 1.5ms ":           {DelayToServer: 1500 * time.Microsecond, DelayToClient: 1500 * time.Microsecond},
	} {
		got, err := ParsePath(in)
		if err != nil || got != want {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if err == nil {
			back, err := ParsePath(got.String())
			if err != nil || back != got {
				t.Errorf("round trip of %q via %q: %+v %v", in, got.String(), back, err)
			}
		}
	}
	for _, in := range []string{"", "20", "20xs", "-5ms", "20ms/", "20ms@", "20ms@0", "20ms@fast", "20ms@5mbitz", "11s", "1ms/2ms/3ms"} {
		if got, err := ParsePath(in); err == nil {
			t.Errorf("ParsePath(%q) = %+v, want an error", in, got)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]uint64{
		"1000": 1000, "8kbit": 8000, "50mbit": 50e6, "50M": 50e6, "1gbit": 1e9,
		"1mbps": 8e6, "2.5Gbit": 2.5e9, "100 kbit": 100e3,
	} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "mbit", "1.2.3mbit", "5 furlongs", "-1mbit"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
	for r, want := range map[uint64]string{0: "unlimited", 50e6: "50mbit", 1.5e9: "1.5gbit", 800e3: "800kbit", 12: "12bit"} {
		if got := FormatRate(r); got != want {
			t.Errorf("FormatRate(%d) = %q, want %q", r, got, want)
		}
	}
}
