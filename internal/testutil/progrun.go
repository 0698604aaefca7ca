package testutil

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
)

// RunConcurrently runs prog on frame (BPF_PROG_TEST_RUN) from
// max(2, NumCPU) goroutines as fast as they can, until stop is called.
// stop waits for them and returns how many runs completed and the first
// error. Each call runs the program once: a longer run interrupted by a
// signal (EINTR) is retried whole by cilium/ebpf, though the kernel
// already ran part of it, and the count would be wrong.
func RunConcurrently(prog *ebpf.Program, frame []byte) (stop func() (runs uint64, err error)) {
	var n atomic.Uint64
	var wg sync.WaitGroup
	done := make(chan struct{})
	workers := max(2, runtime.NumCPU())
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := prog.Run(&ebpf.RunOptions{Data: frame, Repeat: 1}); err != nil {
					errs <- err
					return
				}
				n.Add(1)
			}
		})
	}
	return func() (uint64, error) {
		close(done)
		wg.Wait()
		close(errs)
		return n.Load(), <-errs // nil when no worker failed
	}
}
