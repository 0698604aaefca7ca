package output

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rttscope/rttscope/internal/events"
	"github.com/rttscope/rttscope/internal/format"
)

func rtt(i int) *events.RTT {
	return &events.RTT{
		Time: int64(1700000000_000000000 + i),
		Flow: events.Flow{
			Src:   events.Endpoint{IP: netip.MustParseAddr("10.0.0.2"), Port: 443},
			Dst:   events.Endpoint{IP: netip.MustParseAddr("10.0.0.1"), Port: 40000},
			Proto: events.ProtoTCP,
		},
		RTT: time.Duration(i + 1), MinRTT: 1, SmoothedRTT: time.Duration(i + 1),
		SentPackets: uint64(i),
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOpenAppendsAndCreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.txt")
	for _, s := range []string{"one\n", "two\n"} {
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, path); got != "one\ntwo\n" {
		t.Errorf("content %q", got)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0)
	syscall.Umask(old)
	if want := os.FileMode(0o644) &^ os.FileMode(old); st.Mode().Perm() != want {
		t.Errorf("mode %v, want %v", st.Mode().Perm(), want)
	}
}

func TestStdout(t *testing.T) {
	for _, p := range []string{"", "-"} {
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if !f.IsStdout() || f.Name() != "-" {
			t.Errorf("Open(%q): not stdout", p)
		}
		if err := f.Reopen(); err != nil {
			t.Errorf("Reopen on stdout: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Closing the File must not close the process's stdout.
	if _, err := os.Stdout.Stat(); err != nil {
		t.Errorf("stdout after Close: %v", err)
	}
}

func TestReopenRaw(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	rotated := filepath.Join(dir, "out.txt.1")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "before")
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "still old")
	if err := f.Reopen(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "after")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, rotated); got != "before\nstill old\n" {
		t.Errorf("rotated file %q", got)
	}
	if got := read(t, path); got != "after\n" {
		t.Errorf("new file %q", got)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := f.Reopen(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Reopen after Close: %v", err)
	}
}

func TestReopenFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "out.txt")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}()
	// Move the directory away and put a file in its place: reopening fails.
	if err := os.Rename(sub, filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Reopen(); err == nil {
		t.Fatal("Reopen succeeded")
	}
	if _, err := f.Write([]byte("kept\n")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "moved", "out.txt")); got != "kept\n" {
		t.Errorf("old file %q", got)
	}
}

// rotate writes n events, renames the file away, reopens and writes n
// more, returning the contents of the rotated and of the new file.
func rotate(t *testing.T, name string, n int) (oldContent, newContent string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "rtt."+name)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := format.New(name, f, format.Options{Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	f.SetRestarter(w)
	for i := range n {
		if err := w.WriteRTT(rtt(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Some output is still buffered in w: Reopen must put it in the old file.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Reopen(); err != nil {
		t.Fatal(err)
	}
	for i := n; i < 2*n; i++ {
		if err := w.WriteRTT(rtt(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return read(t, path+".1"), read(t, path)
}

func TestReopenFormats(t *testing.T) {
	const n = 50
	for _, name := range []string{"standard", "ppviz", "jsonl"} {
		t.Run(name, func(t *testing.T) {
			o, nw := rotate(t, name, n)
			for i, c := range []string{o, nw} {
				lines := strings.Split(strings.TrimSuffix(c, "\n"), "\n")
				if len(lines) != n {
					t.Fatalf("file %d has %d lines, want %d", i, len(lines), n)
				}
				for _, l := range lines {
					if name == "jsonl" && !json.Valid([]byte(l)) {
						t.Fatalf("file %d: invalid line %q", i, l)
					}
				}
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		o, nw := rotate(t, "json", n)
		for i, c := range []string{o, nw} {
			var arr []struct {
				SentPackets int `json:"sent_packets"`
			}
			if err := json.Unmarshal([]byte(c), &arr); err != nil {
				t.Fatalf("file %d is not one json document: %v\n%s", i, err, c)
			}
			if len(arr) != n {
				t.Fatalf("file %d has %d elements, want %d", i, len(arr), n)
			}
			for j, e := range arr {
				if e.SentPackets != i*n+j {
					t.Fatalf("file %d element %d is event %d", i, j, e.SentPackets)
				}
			}
		}
	})
}

// TestConcurrentReopen rotates repeatedly while another goroutine writes:
// every file must hold one complete json document and, together, every
// event exactly once and in order.
func TestConcurrentReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rtt.json")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := format.New("json", f, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.SetRestarter(w)

	const total = 20000
	var wg sync.WaitGroup
	var writing atomic.Bool
	writing.Store(true)
	wg.Go(func() {
		defer writing.Store(false)
		for i := range total {
			if err := w.WriteRTT(rtt(i)); err != nil {
				t.Error(err)
				return
			}
			if i%1000 == 0 {
				_ = w.Flush()
			}
		}
	})
	rotations := 0
	for writing.Load() && rotations < 50 {
		rotations++
		if err := os.Rename(path, fmt.Sprintf("%s.%03d", path, rotations)); err != nil {
			t.Fatal(err)
		}
		if err := f.Reopen(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Microsecond)
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	next := 0
	for r := 1; r <= rotations+1; r++ {
		p := fmt.Sprintf("%s.%03d", path, r)
		if r == rotations+1 {
			p = path
		}
		var arr []struct {
			SentPackets int `json:"sent_packets"`
		}
		if err := json.Unmarshal([]byte(read(t, p)), &arr); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, e := range arr {
			if e.SentPackets != next {
				t.Fatalf("%s: event %d, want %d", p, e.SentPackets, next)
			}
			next++
		}
	}
	if next != total {
		t.Fatalf("found %d events in %d files, want %d", next, rotations+1, total)
	}
}

func TestNotifyReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}()
	var errs atomic.Int32
	stop := NotifyReopen(f, func(error) { errs.Add(1) })
	defer stop()

	fmt.Fprintln(f, "old")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reopen the file")
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Fprintln(f, "new")
	stop()
	stop() // idempotent
	if got := read(t, path+".1"); got != "old\n" {
		t.Errorf("rotated file %q", got)
	}
	if got := read(t, path); got != "new\n" {
		t.Errorf("new file %q", got)
	}
	if errs.Load() != 0 {
		t.Errorf("%d reopen errors", errs.Load())
	}
}
