package bpfprof

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/pktcraft"
	"github.com/rttscope/rttscope/internal/testutil"
)

// The egress program runs in a loop (BPF_PROG_TEST_RUN executes its JIT
// image) while the profile samples: its samples land on its own source
// lines, and a program loaded after the profile began is found too.
func TestProfileFindsProgramLines(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("perf"); err != nil {
		t.Fatal("perf not found: scripts/setup.sh installs linux-perf")
	}
	frame, err := pktcraft.Packet{
		Src: netip.MustParseAddr("10.9.0.1"), Dst: netip.MustParseAddr("10.9.0.2"), DF: true,
		TCP: &pktcraft.TCP{SrcPort: 40000, DstPort: 5201, ACK: true, Seq: 1, Ack: 1, Window: 502,
			TSval: 1000, TSecr: 500, Payload: make([]byte, 1000)},
	}.Bytes()
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Loaded after the profile's first look at the programs.
		time.Sleep(300 * time.Millisecond)
		objs, err := loader.Load(loader.DefaultConfig())
		if err != nil {
			t.Error(err)
			return
		}
		defer objs.Close()
		for ctx.Err() == nil {
			if _, _, err := objs.RttscopeTcEgress.Benchmark(frame, 20000, nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()

	o := DefaultOptions()
	o.Duration = 3 * time.Second
	o.Prefix = "rttscope_tc_egr" // the kernel keeps 15 bytes of the name
	prof, err := Run(ctx, o)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	// Other sessions on the machine may have rttscope programs loaded
	// too: this test's is the egress program with the most samples.
	var p *Program
	for i := range prof.Programs {
		q := &prof.Programs[i]
		if q.Name == "rttscope_tc_egress" && (p == nil || q.Samples > p.Samples) {
			p = q
		}
	}
	if p == nil {
		t.Fatalf("rttscope_tc_egress not among the programs: %+v", prof.Programs)
	}
	t.Logf("%d of %d samples in %s (%d B JIT)", p.Samples, prof.Samples, p.Name, p.JitedSize)
	if p.Loads < 1 || p.Samples < 100 {
		t.Fatalf("want a load with >= 100 samples: %d loads, %d samples", p.Loads, p.Samples)
	}
	var flow bool
	for _, l := range p.Lines {
		if !strings.HasPrefix(l.File, "bpf/") {
			t.Errorf("sample outside bpf/ sources: %+v", l)
		}
		flow = flow || l.File == "bpf/flowtable.h"
	}
	if !flow {
		t.Errorf("no sample in the flow lookup (bpf/flowtable.h): %+v", p.Lines)
	}
}
