package pdm

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/pdm/pdmtest"
	"github.com/rttscope/rttscope/internal/pktcraft"
)

// ReaderResult is the cost of the records in user space, measured on the
// whole process while the ingress program sends records at about 15,000
// a second (20 test runs, then 0.5 ms of sleep) and the run loop reads
// them (jsonl to io.Discard): CPU time (the test runs' system calls
// included) and context switches per record. It shows what waking the
// reader and decoding, binning and writing cost. Mode "none" is the
// baseline: the empty program run at the same pace, no reader.
type ReaderResult struct {
	Mode                 string  `json:"mode"` // none, packet or interval
	Records              int     `json:"records"`
	CPUMicrosPerRecord   float64 `json:"cpu_us_per_record"`
	CtxSwitchesPerRecord float64 `json:"context_switches_per_record"`
}

// benchReader runs the run loop of objs in mode (every > 0: interval) for
// d while the ingress program sends records; with a baseline program
// instead it runs that at the same pace, without a reader.
func benchReader(objs *Objects, every, d time.Duration, baseline *ebpf.Program) (ReaderResult, error) {
	r := ReaderResult{Mode: ReportPacket}
	prog := objs.PdmTcIngress
	switch {
	case baseline != nil:
		r.Mode, prog = "none", baseline
	case every > 0:
		r.Mode = ReportInterval
	}
	reply := pktcraft.Packet{Src: pdmtest.HostB, Dst: pdmtest.HostA, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353}}
	frame := pdmtest.WithPDM(reply, 34, 0, 7, 0, 0xE35F, 0)
	ctx, cancel := context.WithCancel(context.Background())
	w, _ := format.New("jsonl", io.Discard, format.Options{})
	done := make(chan error, 1)
	if baseline == nil {
		go func() { _, err := objs.loop(ctx, w, every); done <- err }()
	} else {
		done <- nil
	}
	var r0, r1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &r0)
	var runErr error
	for start := time.Now(); time.Since(start) < d && runErr == nil; {
		for range 20 {
			if _, runErr = prog.Run(&ebpf.RunOptions{Data: frame, Repeat: 1}); runErr != nil {
				break
			}
			r.Records++
		}
		time.Sleep(500 * time.Microsecond)
	}
	_ = unix.Getrusage(unix.RUSAGE_SELF, &r1)
	cancel()
	if err := <-done; err != nil {
		return r, err
	}
	if runErr != nil {
		return r, fmt.Errorf("BPF_PROG_TEST_RUN: %w", runErr)
	}
	cpu := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
	r.CPUMicrosPerRecord = float64(cpu) / 1e3 / float64(r.Records)
	r.CtxSwitchesPerRecord = float64(r1.Nvcsw-r0.Nvcsw+r1.Nivcsw-r0.Nivcsw) / float64(r.Records)
	return r, nil
}
