// Package nsrun runs code inside a network namespace. Linux network
// namespaces belong to threads, so the code runs on a locked OS thread that
// is switched in and back out again.
package nsrun

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dir is where named namespaces live, as with `ip netns`.
const Dir = "/run/netns"

// Named runs fn inside the named namespace (under /run/netns); an empty name
// runs fn right here, in the current namespace.
func Named(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	fd, err := unix.Open(filepath.Join(Dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %q not found (see `ip netns list`): %w", name, err)
	}
	defer unix.Close(fd)
	return Fd(fd, name, fn)
}

// Fd runs fn on an OS thread switched into the namespace open at fd. Sockets
// and BPF links created by fn belong to that namespace and may be used from
// any goroutine afterwards; goroutines that fn starts do not run in it. If
// switching back fails the thread stays locked, so the Go runtime discards it
// instead of reusing a thread in the wrong namespace.
func Fd(fd int, label string, fn func() error) error {
	type result struct {
		err      error
		panicked bool
		pv       any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open current netns: %w", err)}
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("enter netns %s: %w", label, err)}
			return
		}
		var res result
		func() {
			defer func() {
				if r := recover(); r != nil {
					res = result{panicked: true, pv: r}
				}
			}()
			res.err = fn()
		}()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			res.err = errors.Join(res.err, fmt.Errorf("leave netns %s: %w", label, err))
			done <- res
			return
		}
		runtime.UnlockOSThread()
		done <- res
	}()
	res := <-done
	if res.panicked {
		panic(res.pv)
	}
	return res.err
}
