package output

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/rttscope/rttscope/internal/format"
)

// fakeClock is a settable clock for RotateOptions.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)}
}

// decompress returns the contents of a completed file, decompressed by its
// suffix.
func decompress(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	switch {
	case strings.HasSuffix(path, ".zst"):
		d, err := zstd.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		r = d
	case strings.HasSuffix(path, ".gz"):
		g, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = g
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// openRotatingJSON opens a rotating destination with a json writer on it.
func openRotatingJSON(t *testing.T, path, name string, opts RotateOptions) (*Rotating, format.Writer) {
	t.Helper()
	r, err := OpenRotating(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := format.New(name, r, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.SetRestarter(w)
	return r, w
}

// parseJSONFiles checks that each file is one complete json document and
// returns the RTTs of all of them, in order.
func parseJSONFiles(t *testing.T, files []string) []int64 {
	t.Helper()
	var rtts []int64
	for _, p := range files {
		var doc []map[string]any
		if err := json.Unmarshal(decompress(t, p), &doc); err != nil {
			t.Fatalf("%s is not a complete json document: %v", p, err)
		}
		for _, o := range doc {
			rtts = append(rtts, int64(o["rtt"].(float64)))
		}
	}
	return rtts
}

func checkSequence(t *testing.T, rtts []int64, n int) {
	t.Helper()
	if len(rtts) != n {
		t.Fatalf("%d records in the files, want %d", len(rtts), n)
	}
	for i, v := range rtts {
		if v != int64(i+1) {
			t.Fatalf("record %d has rtt %d, want %d: records lost, repeated or reordered", i, v, i+1)
		}
	}
}

func TestRotateBySize(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	r, w := openRotatingJSON(t, filepath.Join(dir, "rtt.json"), "json", RotateOptions{Size: 4096, Now: clk.Now})
	const n = 1000
	for i := range n {
		if err := w.WriteRTT(rtt(i)); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if r.Due() {
				if err := r.Rotate(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := r.Completed()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("%d files for ~%d bytes at 4096 per file: %v", len(files), n*200, files)
	}
	for _, p := range files[:len(files)-1] {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		// Checked every 50 records (< 12 KiB), so a file ends within that of the limit.
		if st.Size() < 4096 || st.Size() > 4096+50*300 {
			t.Errorf("%s: %d bytes, limit 4096 checked every 50 records", p, st.Size())
		}
	}
	checkSequence(t, parseJSONFiles(t, files), n)
	assertNoPartial(t, dir)
}

func assertNoPartial(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".partial") {
			t.Errorf("%s left after Close", e.Name())
		}
	}
}

func TestRotateByInterval(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	r, w := openRotatingJSON(t, filepath.Join(dir, "rtt.jsonl"), "jsonl", RotateOptions{Interval: time.Minute, Now: clk.Now})
	for i := range 10 {
		if err := w.WriteRTT(rtt(i)); err != nil {
			t.Fatal(err)
		}
		clk.Add(30 * time.Second)
		if due := r.Due(); due != (i%2 == 1) {
			t.Fatalf("after %d×30s: Due() = %v", i+1, due)
		}
		if r.Due() {
			if err := r.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := r.Completed()
	want := []string{
		"rtt-20261123T140000Z-000001.jsonl",
		"rtt-20261123T140100Z-000002.jsonl",
		"rtt-20261123T140200Z-000003.jsonl",
		"rtt-20261123T140300Z-000004.jsonl",
		"rtt-20261123T140400Z-000005.jsonl",
		"rtt-20261123T140500Z-000006.jsonl",
	}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files\n%v\nwant\n%v", got, want)
	}
	for i, f := range files[:5] {
		lines := strings.Count(string(decompress(t, f)), "\n")
		if lines != 2 {
			t.Errorf("file %d has %d lines, want 2 (one minute at 30 s per record)", i, lines)
		}
	}
	if b := decompress(t, files[5]); len(b) != 0 {
		t.Errorf("last file (opened at the last rotation, closed at once) holds %q", b)
	}
}

func TestRotateKeep(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	// A file of another destination in the same directory is left alone.
	other := filepath.Join(dir, "rtt-other.jsonl")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, w := openRotatingJSON(t, filepath.Join(dir, "rtt.jsonl"), "jsonl", RotateOptions{Keep: 3, Now: clk.Now})
	for i := range 8 {
		if err := w.WriteRTT(rtt(i)); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
		if err := r.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := r.Completed()
	if len(files) != 3 {
		t.Fatalf("%d files kept, want 3: %v", len(files), files)
	}
	// The newest three: records 6 and 7, then the empty last file.
	var all string
	for _, f := range files {
		all += string(decompress(t, f))
	}
	if strings.Count(all, "\n") != 2 || !strings.Contains(all, `"rtt":7,`) || !strings.Contains(all, `"rtt":8,`) {
		t.Errorf("kept files hold\n%s\nwant the records with rtt 7 and 8", all)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("--keep removed a file of another name: %v", err)
	}
}

// TestRotateAtomicNames lists the directory while a writer rotates under
// load: every file with a final name must be complete (a whole json
// document), and at most one temporary file exists at a time.
func TestRotateAtomicNames(t *testing.T) {
	dir := t.TempDir()
	r, w := openRotatingJSON(t, filepath.Join(dir, "rtt.json.gz"), "json", RotateOptions{Size: 8 << 10})
	stopRot := RunRotation(r, time.Millisecond, 0, nil, func(err error) { t.Error(err) })
	t.Cleanup(stopRot)
	const n = 30_000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			if err := w.WriteRTT(rtt(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	checked := map[string]bool{}
	listing := func() {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		partial := 0
		for _, e := range ents {
			name := e.Name()
			if strings.HasSuffix(name, ".partial") {
				partial++
				continue
			}
			if checked[name] {
				continue
			}
			checked[name] = true
			var doc []json.RawMessage
			if err := json.Unmarshal(decompress(t, filepath.Join(dir, name)), &doc); err != nil {
				t.Fatalf("%s has its final name but is not a complete document: %v", name, err)
			}
		}
		if partial > 1 {
			t.Fatalf("%d temporary files at once", partial)
		}
	}
loop:
	for {
		select {
		case <-done:
			break loop
		default:
			listing()
		}
	}
	stopRot()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	listing()
	files, _ := r.Completed()
	if len(files) < 2 {
		t.Fatalf("no rotation happened: %v", files)
	}
	checkSequence(t, parseJSONFiles(t, files), n)
	assertNoPartial(t, dir)
}

// TestCompressionRoundTrip writes jsonl compressed by flag and by suffix
// and reads it back with the standard decompressors.
func TestCompressionRoundTrip(t *testing.T) {
	for _, tc := range []struct{ name, path, compress, suffix string }{
		{"zstd by suffix", "rtt.jsonl.zst", "", ".jsonl.zst"},
		{"gzip by suffix", "rtt.jsonl.gz", "", ".jsonl.gz"},
		{"zstd by flag", "rtt.jsonl", CompressZstd, ".jsonl.zst"},
		{"gzip by flag", "rtt.jsonl", CompressGzip, ".jsonl.gz"},
		{"none", "rtt.jsonl", CompressNone, ".jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := tc.compress
			if c == "" {
				c = CompressionFromName(tc.path)
			}
			r, w := openRotatingJSON(t, filepath.Join(dir, tc.path), "jsonl", RotateOptions{Compress: c})
			var want bytes.Buffer
			ref, _ := format.New("jsonl", &want, format.Options{})
			for i := range 5000 {
				_ = ref.WriteRTT(rtt(i))
				if err := w.WriteRTT(rtt(i)); err != nil {
					t.Fatal(err)
				}
			}
			_ = ref.Close()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			files, _ := r.Completed()
			if len(files) != 1 || !strings.HasSuffix(files[0], tc.suffix) {
				t.Fatalf("files %v, want one ending in %s", files, tc.suffix)
			}
			got := decompress(t, files[0])
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("round trip differs: %d bytes back, %d written", len(got), want.Len())
			}
			if st, _ := os.Stat(files[0]); tc.compress != CompressNone && st.Size()*5 > int64(want.Len()) {
				t.Errorf("compressed to %d of %d bytes", st.Size(), want.Len())
			}
		})
	}
}

// TestRotatingFlushReadable checks that after Flush the temporary file of
// a compressed stream decompresses to every record written so far.
func TestRotatingFlushReadable(t *testing.T) {
	for _, c := range []string{CompressZstd, CompressGzip} {
		t.Run(c, func(t *testing.T) {
			r, w := openRotatingJSON(t, filepath.Join(t.TempDir(), "rtt.jsonl"), "jsonl", RotateOptions{Compress: c})
			defer func() { _ = r.Close() }()
			for i := range 100 {
				_ = w.WriteRTT(rtt(i))
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(r.Name())
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var dr io.Reader
			if c == CompressZstd {
				d, _ := zstd.NewReader(f)
				defer d.Close()
				dr = d
			} else {
				g, err := gzip.NewReader(f)
				if err != nil {
					t.Fatal(err)
				}
				dr = g
			}
			// The stream is not ended: read lines until the data runs out.
			sc := bufio.NewScanner(dr)
			lines := 0
			for sc.Scan() {
				lines++
			}
			if lines != 100 {
				t.Fatalf("%d lines readable from the flushed temporary file, want 100 (%v)", lines, sc.Err())
			}
		})
	}
}

// TestOpenRotatingRefusals checks the one-line refusals of OpenRotating,
// and that a refused destination creates no file.
func TestOpenRotatingRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		opts RotateOptions
		want string
	}{
		{"rtt.jsonl.gz", RotateOptions{Compress: CompressZstd}, "asks for gzip but --compress is zstd: make them agree"},
		{"rtt.jsonl.zst", RotateOptions{Compress: CompressNone}, "asks for zstd but --compress is none"},
		{"rtt.jsonl", RotateOptions{Compress: "lz4"}, `unknown compression "lz4"`},
		{"rtt.jsonl", RotateOptions{Size: -1}, "negative rotation limit"},
		{"", RotateOptions{}, "names a directory: give a file name"},
	} {
		_, err := OpenRotating(filepath.Join(dir, tc.path), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenRotating(%s, %+v): %v, want %q", tc.path, tc.opts, err, tc.want)
		}
	}
	if _, err := OpenRotating(dir+"/", RotateOptions{}); err == nil || !strings.Contains(err.Error(), "names a directory") {
		t.Errorf("OpenRotating(%s/): %v", dir, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused destinations created %v", ents)
	}
}
