// Command bench-flows is the many-flows TCP load generator of the load
// benchmark (internal/bench), which builds it with go build and runs it as
// a child process; it is not part of the rttscope binary.
//
//	bench-flows --netns NS --connect ADDR:PORT --flows N [--write-size B] [--rate BYTES/S]
//
// It opens N connections from the named network namespace (whose
// ephemeral port range the benchmark has widened) to ADDR:PORT
// (traffic.StartManyFlowsIn) and keeps them sending. It counts the
// connections opened, the bytes written and the flows that stopped on a
// write error into the shared memory file it inherits as descriptor 3
// (internal/shmcount, slots traffic.FlowCountersAt); the benchmark knows
// it is ready when every connection is counted. It fails (exit 1, the
// reason on stderr) if they do not all open. The benchmark stops it with
// SIGKILL: every connection has SO_LINGER 0, so the kernel resets them
// all as the process ends (it also exits when stdin is closed, if its
// goroutine gets to run).
//
// It is a process of its own so that its thousands of always-busy sender
// goroutines do not share a Go scheduler with the benchmark: there, every
// time the benchmark's own goroutine blocked (a pipe read, a slow system
// call) it queued behind them to run again, for seconds each time with
// 10,000 flows, and a window could take minutes to end. For the same
// reason nothing the benchmark needs from it waits for one of its own
// goroutines: with 10,000 flows sending, a line written after the senders
// started took minutes to come.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/rttscope/rttscope/internal/shmcount"
	"github.com/rttscope/rttscope/internal/traffic"
)

func main() {
	netns := flag.String("netns", "", "network namespace to connect from (empty: this one)")
	connect := flag.String("connect", "", "ADDR:PORT of the sink")
	flows := flag.Int("flows", 1, "number of TCP connections")
	writeSize := flag.Int("write-size", 1448, "bytes per write")
	rate := flag.Uint64("rate", 0, "aggregate rate of all flows in bytes/s (0: as fast as TCP goes)")
	flag.Parse()
	dst, err := netip.ParseAddrPort(*connect)
	if err != nil || flag.NArg() > 0 || *flows < 1 || *writeSize < 1 {
		fmt.Fprintf(os.Stderr, "bench-flows: want --connect ADDR:PORT, --flows >= 1, --write-size >= 1 and no arguments (--connect %q, --flows %d, --write-size %d, arguments %q)\n",
			*connect, *flows, *writeSize, flag.Args())
		os.Exit(2)
	}
	c, err := shmcount.Inherited(traffic.FlowCounterSlots)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-flows: the counters (descriptor %d, from the benchmark): %v\n", shmcount.ChildFd, err)
		os.Exit(2)
	}
	opened, written, writeErrors := traffic.FlowCountersAt(c)
	o := traffic.ManyFlowsOptions{Flows: *flows, WriteSize: *writeSize, RateBytesPerSec: *rate, Opened: opened, Written: written, WriteErrors: writeErrors}
	if err := run(*netns, dst, o, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "bench-flows:", err)
		os.Exit(1)
	}
}

func run(netns string, dst netip.AddrPort, o traffic.ManyFlowsOptions, in io.Reader) error {
	if err := traffic.RaiseNoFileToHard(uint64(o.Flows) + 100); err != nil {
		return err
	}
	m, err := traffic.StartManyFlowsIn(context.Background(), netns, dst, o)
	if err != nil {
		return err
	}
	// Until stdin is closed (EOF) or the benchmark kills the process.
	_, err = io.Copy(io.Discard, in)
	return errors.Join(err, m.Stop())
}
