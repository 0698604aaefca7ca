package shmcount

import (
	"os"
	"strconv"
	"testing"
)

// A second mapping of the file (as the child process makes) sees what the
// first one counts, both ways.
func TestSharedBetweenMappings(t *testing.T) {
	parent, err := New("test", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer closeCounters(t, parent)
	if parent.Len() != 3 {
		t.Fatalf("Len %d, want 3", parent.Len())
	}
	// A file of its own on the same memory, as the child inherits it.
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(parent.File().Fd())), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	child, err := Map(f, 3)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	defer closeCounters(t, child)
	child.Uint64(2).Add(1448)
	child.Uint64(2).Add(1448)
	child.Int64(1).Add(1)
	child.Int64(1).Add(-3)
	if got := parent.Uint64(2).Load(); got != 2*1448 {
		t.Errorf("counter 2: parent reads %d, want %d", got, 2*1448)
	}
	if got := parent.Int64(1).Load(); got != -2 {
		t.Errorf("counter 1: parent reads %d, want -2", got)
	}
	if got := parent.Uint64(0).Load(); got != 0 {
		t.Errorf("counter 0: parent reads %d, want 0", got)
	}
	parent.Uint64(0).Store(7)
	if got := child.Uint64(0).Load(); got != 7 {
		t.Errorf("counter 0: child reads %d, want 7", got)
	}
}

func TestMapRefusesShortFile(t *testing.T) {
	c, err := New("test", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer closeCounters(t, c)
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(c.File().Fd())), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, err := Map(f, 3); err == nil {
		closeCounters(t, m)
		t.Fatal("mapped 3 counters from a file of 2")
	}
}

func closeCounters(t *testing.T, c *Counters) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}
