package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopContext returns a context that ends on the signals after which a
// command that changes the system (attaches hooks, builds namespaces)
// must still stop in order: SIGINT, SIGTERM and, when hup is true, SIGHUP
// (the terminal or ssh session went away). Go's default action for SIGHUP
// is to exit on the spot, which leaves a clsact attach (kernels before
// 6.6, where hooks are not links held by the process) and a lab's
// namespaces behind. hup is false where SIGHUP has another meaning: a
// --write file is reopened or rotated on it (outputFlags.hupReopens),
// and the offline commands (replay, pdm --read), which attach nothing,
// keep SIGHUP's default.
func stopContext(parent context.Context, hup bool) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if hup {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return signal.NotifyContext(parent, sigs...)
}

// ignoreSIGPIPE makes a write to a closed stdout or stderr pipe (`| head`)
// fail with EPIPE, which ends a live command's output and so the command,
// in order (main then exits quietly with 141), where Go's default kills
// the process on the spot, with the consequences stopContext names. A
// command that writes only at its start (lab) does not notice that its
// reader left and runs on until a signal.
//
// Not signal.Notify: that delivers SIGPIPE from every file descriptor, so
// a Prometheus scraper or a Kafka broker closing its connection mid-write
// would stop the monitor. The ignored disposition is inherited by the
// programs a command starts, which then see EPIPE too: the lab's ip and tc
// do not mind; the bench's tools (tcpdump, external monitors) are left
// with the default.
func ignoreSIGPIPE() { signal.Ignore(syscall.SIGPIPE) }
