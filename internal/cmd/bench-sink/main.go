// Command bench-sink is the TCP sink of the load benchmark
// (internal/bench), which builds it with go build and runs it as a child
// process; it is not part of the rttscope binary.
//
//	bench-sink --netns NS --listen ADDR:PORT
//
// It listens on ADDR:PORT (port 0 picks one) inside the named network
// namespace, writes "port N" on stdout, and counts connections accepted,
// still open and bytes received into the shared memory file it inherits
// as descriptor 3 (internal/shmcount, slots traffic.SinkCountersAt), which
// the benchmark reads without asking, until stdin is closed.
//
// It is a process of its own because one process may hold only
// RLIMIT_NOFILE descriptors: where the hard limit cannot be raised (no
// CAP_SYS_RESOURCE), 10,000 client sockets plus the 10,000 accepted ones
// do not fit in the benchmark's. Its CPU time is its own too, so the
// benchmark's figure for itself does not include the sink.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"

	"github.com/rttscope/rttscope/internal/nsrun"
	"github.com/rttscope/rttscope/internal/shmcount"
	"github.com/rttscope/rttscope/internal/traffic"
)

func main() {
	netns := flag.String("netns", "", "network namespace to listen in (empty: this one)")
	listen := flag.String("listen", "", "ADDR:PORT to listen on")
	flag.Parse()
	addr, err := netip.ParseAddrPort(*listen)
	if err != nil || flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench-sink: want --listen ADDR:PORT and no arguments (--listen %q, arguments %q)\n", *listen, flag.Args())
		os.Exit(2)
	}
	c, err := shmcount.Inherited(traffic.SinkCounterSlots)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-sink: the counters (descriptor %d, from the benchmark): %v\n", shmcount.ChildFd, err)
		os.Exit(2)
	}
	if err := serve(*netns, addr, traffic.SinkCountersAt(c), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sink:", err)
		os.Exit(1)
	}
}

func serve(netns string, addr netip.AddrPort, counters traffic.SinkCounters, in io.Reader, out io.Writer) error {
	if err := traffic.RaiseNoFileToHard(0); err != nil {
		return err
	}
	var ln *net.TCPListener
	if err := nsrun.Named(netns, func() error {
		var err error
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		return fmt.Errorf("listen on %s in %q: %w", addr, netns, err)
	}
	s := traffic.ServeManySink(ln, counters)
	defer s.Close()
	if _, err := fmt.Fprintf(out, "port %d\n", s.Addr().Port()); err != nil {
		return err
	}
	// Until stdin is closed (EOF): nothing else is read from it.
	_, err := io.Copy(io.Discard, in)
	return err
}
