// Package shmcount keeps counters in memory shared between a parent and a
// child process: the child counts with atomic adds, the parent reads with
// atomic loads, and neither waits for the other.
//
// The benchmark's TCP load generator and sink are child processes with
// thousands of busy goroutines. A counter read that needs the child to
// answer waits for the child's scheduler to run the answering goroutine,
// and the parent's goroutine for its own; counters in shared memory need
// neither.
package shmcount

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// counterSize is the size of one counter: 8 bytes, 8-byte aligned (the
// mapping starts on a page), as atomic 64-bit operations need.
const counterSize = 8

// Counters are n 64-bit counters in a shared file mapping.
type Counters struct {
	f   *os.File
	mem []byte
}

// New creates n zeroed counters in an anonymous memory file (memfd); the
// child inherits File (e.g. through exec.Cmd.ExtraFiles) and maps it with
// Map.
func New(name string, n int) (*Counters, error) {
	if n < 1 {
		return nil, errors.New("shmcount: need at least one counter")
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shmcount: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Truncate(int64(n * counterSize)); err != nil {
		f.Close()
		return nil, fmt.Errorf("shmcount: size the memory file: %w", err)
	}
	c, err := mapFile(f, n)
	if err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// ChildFd is the descriptor on which a child process started with File as
// exec.Cmd.ExtraFiles[0] finds the counters.
const ChildFd = 3

// Inherited maps the n counters this process inherited on ChildFd.
func Inherited(n int) (*Counters, error) {
	return Map(os.NewFile(ChildFd, "counters"), n)
}

// Map maps the n counters of a file made by New (in another process);
// Close closes f.
func Map(f *os.File, n int) (*Counters, error) {
	if n < 1 {
		return nil, errors.New("shmcount: need at least one counter")
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shmcount: %w", err)
	}
	if st.Size() < int64(n*counterSize) {
		return nil, fmt.Errorf("shmcount: %s holds %d bytes, %d counters need %d", f.Name(), st.Size(), n, n*counterSize)
	}
	return mapFile(f, n)
}

func mapFile(f *os.File, n int) (*Counters, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, n*counterSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shmcount: mmap: %w", err)
	}
	return &Counters{f: f, mem: mem}, nil
}

// File is the memory file, for the child to inherit.
func (c *Counters) File() *os.File { return c.f }

// Len is the number of counters.
func (c *Counters) Len() int { return len(c.mem) / counterSize }

// Uint64 is counter i as an unsigned counter; it stays valid until Close.
func (c *Counters) Uint64(i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&c.mem[i*counterSize : (i+1)*counterSize][0]))
}

// Int64 is counter i as a signed counter (for counts that go down too).
func (c *Counters) Int64(i int) *atomic.Int64 {
	return (*atomic.Int64)(unsafe.Pointer(&c.mem[i*counterSize : (i+1)*counterSize][0]))
}

// Close unmaps the counters (pointers from Uint64 and Int64 must no
// longer be used) and closes the file.
func (c *Counters) Close() error {
	var errs []error
	if c.mem != nil {
		errs = append(errs, unix.Munmap(c.mem))
		c.mem = nil
	}
	errs = append(errs, c.f.Close())
	return errors.Join(errs...)
}
