// Package output is the destination of --write FILE: a file opened for
// appending that can be reopened after log rotation (SIGHUP), or stdout
// (File); or, with rotation, compression or Parquet, a series of files
// each renamed to its final name once complete (Rotating, rotate.go,
// docs/files.md).
//
// Log rotation and documents: a json document ("[" ... "]") must not span
// two files. The format writer is registered with File.SetRestarter; Reopen
// then lets it (with capability format.Restarts, as every writer from
// format.New) flush and finish its document in the old file, switches files
// while the format writer holds its lock, and lets it start a new document
// in the new file:
//
//	f, _ := output.Open(path)
//	w, _ := format.New(name, f, opts)
//	f.SetRestarter(w)
//	stop := output.NotifyReopen(f, func(err error) { log.Print(err) })
//	defer stop()
//
// Without a registered writer (or with one that cannot restart), Reopen
// only switches files; writes already buffered by the format writer then
// land in the new file.
package output

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/rttscope/rttscope/internal/format"
)

// File is an io.Writer onto a file opened with O_APPEND|O_CREATE, or onto
// stdout. Write, Reopen and Close are safe for concurrent use.
type File struct {
	path string // "" for stdout

	reopenMu sync.Mutex // serializes Reopen and Close
	mu       sync.Mutex // guards f, restarter, closed; held during Write
	f        *os.File
	restart  format.Writer
	closed   bool
}

// IsStdoutPath reports whether path names stdout for Open ("-" or "").
func IsStdoutPath(path string) bool { return path == "" || path == "-" }

// Open opens path for appending, creating it with mode 0644 if needed.
// "-" or "" means stdout, which Reopen leaves alone and Close does not
// close.
func Open(path string) (*File, error) {
	if IsStdoutPath(path) {
		return &File{f: os.Stdout}, nil
	}
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &File{path: path, f: f}, nil
}

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}

// Name returns the path given to Open, or "-" for stdout.
func (f *File) Name() string {
	if f.path == "" {
		return "-"
	}
	return f.path
}

// IsStdout reports whether f writes to stdout.
func (f *File) IsStdout() bool { return f.path == "" }

// Write writes p to the current file.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	return f.f.Write(p)
}

// SetRestarter registers the format writer that writes to f, so that
// Reopen starts a new document in the new file (see the package comment).
// nil unregisters it.
func (f *File) SetRestarter(r format.Writer) {
	f.mu.Lock()
	f.restart = r
	f.mu.Unlock()
}

// Reopen opens the path again (after the old file was renamed away by log
// rotation) and switches writes to it. The new file is opened first, so on
// error the old one stays in use. For stdout Reopen does nothing.
//
// With a registered writer, the switch happens inside its Restart: the
// old file gets everything buffered and the end of the document, the new
// one starts a new document.
func (f *File) Reopen() error {
	if f.path == "" {
		return nil
	}
	f.reopenMu.Lock()
	defer f.reopenMu.Unlock()
	f.mu.Lock()
	closed, r := f.closed, f.restart
	f.mu.Unlock()
	if closed {
		return os.ErrClosed
	}
	nf, err := openAppend(f.path)
	if err != nil {
		return err
	}
	swap := func() error {
		f.mu.Lock()
		old := f.f
		f.f = nf
		f.mu.Unlock()
		return old.Close()
	}
	if r == nil {
		return swap()
	}
	// Lock order: the format writer's lock, then f.mu (as in Write).
	return r.Restart(swap)
}

// Close closes the file (not stdout). Finish the format writer (Close)
// first. Writes after Close fail with os.ErrClosed.
func (f *File) Close() error {
	f.reopenMu.Lock()
	defer f.reopenMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	if f.path == "" {
		return nil
	}
	return f.f.Close()
}

// NotifyRotate rotates r on every SIGHUP, reporting errors to onErr (if
// not nil), until stop is called.
func NotifyRotate(r *Rotating, onErr func(error)) (stop func()) {
	return onSIGHUP(r.Rotate, onErr)
}

// NotifyReopen reopens f on every SIGHUP, reporting errors to onErr (if
// not nil), until stop is called. stop may be called more than once.
func NotifyReopen(f *File, onErr func(error)) (stop func()) {
	return onSIGHUP(f.Reopen, onErr)
}

// onSIGHUP calls do on every SIGHUP until stop is called.
func onSIGHUP(do func() error, onErr func(error)) (stop func()) {
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	exited := make(chan struct{})
	signal.Notify(sig, syscall.SIGHUP)
	go func() {
		defer close(exited)
		for {
			select {
			case <-sig:
				if err := do(); err != nil && onErr != nil {
					onErr(err)
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
			<-exited
		})
	}
}

var _ io.Writer = (*File)(nil)
