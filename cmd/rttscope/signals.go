package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopContext returns a context that ends on the signals after which a
// command that changes the system (attaches hooks, builds namespaces)
// must still stop in order: SIGINT, SIGTERM, SIGPIPE (the reader of
// stdout or stderr went away, as with `| head`) and, when hup is true,
// SIGHUP (the terminal or ssh session went away). Go's default action for
// SIGPIPE on stdout/stderr and for SIGHUP is to exit on the spot, which
// leaves a clsact attach (kernels before 6.6, where hooks are not links
// held by the process) and a lab's namespaces behind. With SIGPIPE caught,
// the write that met the closed pipe returns EPIPE instead.
//
// hup is false where SIGHUP has another meaning: a --write file is
// reopened or rotated on it (outputFlags.hupReopens).
func stopContext(parent context.Context, hup bool) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE}
	if hup {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return signal.NotifyContext(parent, sigs...)
}
