package anon

import (
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Mode
		key  int
	}{
		{"none", Mode{Kind: "none"}, 0},
		{"drop", Mode{Kind: "drop"}, 0},
		{"pfx", Mode{Kind: "pfx"}, 32},
		{"cryptopan", Mode{Kind: "cryptopan"}, 32},
		{"det", Mode{Kind: "det"}, 16},
		{"trunc:24,48", Mode{Kind: "trunc", V4Bits: 24, V6Bits: 48}, 0},
		{"trunc:0,0", Mode{Kind: "trunc"}, 0},
		{"trunc:32,128", Mode{Kind: "trunc", V4Bits: 32, V6Bits: 128}, 0},
	} {
		m, err := ParseMode(c.in)
		if err != nil || m != c.want {
			t.Errorf("ParseMode(%q) = %+v, %v; want %+v", c.in, m, err, c.want)
			continue
		}
		if m.String() != c.in {
			t.Errorf("ParseMode(%q).String() = %q", c.in, m.String())
		}
		if m.KeySize() != c.key {
			t.Errorf("ParseMode(%q).KeySize() = %d, want %d", c.in, m.KeySize(), c.key)
		}
	}
	const unknown = `(none, drop, pfx, cryptopan, det, trunc:V4BITS,V6BITS)`
	const truncHelp = "want trunc:V4BITS,V6BITS with V4BITS 0..32 and V6BITS 0..128, e.g. trunc:24,48"
	for _, c := range []struct{ in, want string }{
		{"x", `--anonymize: unknown mode "x" ` + unknown},
		{"", `--anonymize: unknown mode "" ` + unknown},
		{"PFX", `--anonymize: unknown mode "PFX" ` + unknown},
		{"pfx ", `--anonymize: unknown mode "pfx " ` + unknown},
		{"trunc", truncHelp},
		{"trunc:", truncHelp},
		{"trunc:24", truncHelp},
		{"trunc:24,", truncHelp},
		{"trunc:33,48", truncHelp},
		{"trunc:24,129", truncHelp},
		{"trunc:-1,48", truncHelp},
		{"trunc:24,48,1", truncHelp},
		{"trunc:a,b", truncHelp},
		{"trunc24,48", truncHelp},
	} {
		_, err := ParseMode(c.in)
		if err == nil {
			t.Errorf("ParseMode(%q) succeeded", c.in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("ParseMode(%q): %q, want one line with %q", c.in, msg, c.want)
		}
	}
}
