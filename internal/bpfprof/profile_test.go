package bpfprof

import (
	"strings"
	"testing"
)

// Two loads of one program at the same address, one after the other, and
// another program that takes the address once the second is gone: each
// sample counts for the load that held its address at its time.
func TestAttributeByAddressAndTime(t *testing.T) {
	const slack = 100
	img := func(first, unload int64) *loadedProg {
		return &loadedProg{
			name: "rttscope_tc_egress", tag: "aa", jitedSize: 0x100,
			funcs:     []jitFunc{{addr: 0x1000, size: 0x80}, {addr: 0x2000, size: 0x40}},
			lines:     []jitLine{{0x1000, "bpf/a.c", 1, "entry"}, {0x1040, "bpf/b.h", 7, "hash"}, {0x2000, "bpf/c.h", 3, "sub"}},
			firstSeen: first, unloadSeen: unload,
		}
	}
	other := &loadedProg{
		name: "rttscope_tc_ingress", tag: "bb", jitedSize: 0x80,
		funcs:     []jitFunc{{addr: 0x1000, size: 0x80}},
		lines:     []jitLine{{0x1000, "bpf/a.c", 2, "other"}},
		firstSeen: 3000,
	}
	progs := []*loadedProg{img(0, 1000), img(1500, 2500), other}
	samples := []sample{
		{500, 0x1010},  // load 1, entry
		{900, 0x1050},  // load 1, hash
		{1450, 0x1050}, // load 2, within one poll before it was seen
		{2000, 0x2010}, // load 2, subprogram
		{2700, 0x1010}, // nothing loaded there then
		{3100, 0x1010}, // other
		{3200, 0x9999}, // no image
	}
	got := attribute(progs, samples, slack)
	if len(got) != 2 {
		t.Fatalf("programs: %+v", got)
	}
	eg, in := got[0], got[1]
	if eg.Name != "rttscope_tc_egress" || eg.Loads != 2 || eg.Samples != 4 {
		t.Errorf("egress: %+v", eg)
	}
	if in.Name != "rttscope_tc_ingress" || in.Loads != 1 || in.Samples != 1 {
		t.Errorf("ingress: %+v", in)
	}
	if len(eg.Lines) != 3 || eg.Lines[0].File != "bpf/b.h" || eg.Lines[0].Line != 7 || eg.Lines[0].Samples != 2 {
		t.Errorf("egress lines: %+v", eg.Lines)
	}
	sum := 0
	for _, f := range eg.Files {
		sum += f.Samples
	}
	if sum != eg.Samples {
		t.Errorf("files add up to %d, want %d", sum, eg.Samples)
	}
}

func TestParseSamples(t *testing.T) {
	in := `  43808.590531123:  ffffffffc00275cf
junk line
  43808.600195:  ffffffffc002ad92
      1.000000001:  7f00aa
  bad:  ffff
`
	got, err := parseSamples(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []sample{
		{43808590531123, 0xffffffffc00275cf},
		{43808600195000, 0xffffffffc002ad92},
		{1000000001, 0x7f00aa},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSourcePath(t *testing.T) {
	for in, want := range map[string]string{
		"./../../bpf/rttscope.c": "bpf/rttscope.c",
		"bpf/flow.h":             "bpf/flow.h",
		"/abs/bpf/x.h":           "/abs/bpf/x.h",
	} {
		if got := sourcePath(in); got != want {
			t.Errorf("sourcePath(%q) = %q, want %q", in, got, want)
		}
	}
}
