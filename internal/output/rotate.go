package output

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/rttscope/rttscope/internal/format"
)

// Compression algorithms of RotateOptions.Compress.
const (
	CompressNone = "none"
	CompressZstd = "zstd"
	CompressGzip = "gzip"
)

// compressSuffix is the file name suffix of each algorithm.
var compressSuffix = map[string]string{CompressZstd: ".zst", CompressGzip: ".gz"}

// CompressionFromName returns the algorithm a file name's suffix asks for
// (".zst": zstd, ".gz": gzip), or "" when it names none.
func CompressionFromName(path string) string {
	for alg, suf := range compressSuffix {
		if strings.HasSuffix(path, suf) {
			return alg
		}
	}
	return ""
}

// RotateOptions configure a Rotating destination.
type RotateOptions struct {
	// Size starts a new file once this many bytes (before compression)
	// were written to the current one; 0: no limit.
	Size int64
	// Interval starts a new file when the current one is this old; 0: no
	// limit.
	Interval time.Duration
	// Keep deletes the oldest completed files of this destination beyond
	// the newest Keep; 0 keeps all.
	Keep int
	// Compress is CompressNone, CompressZstd or CompressGzip; "" chooses
	// by the file name's suffix (CompressionFromName). The suffix of the
	// algorithm is added to file names that lack it.
	Compress string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Rotating is the destination of --write FILE when files are rotated,
// compressed or written whole (docs/files.md): a series of files named
// STEM-YYYYMMDDTHHMMSSZ-SEQ.EXT after FILE = DIR/STEM.EXT. The file being
// written is named .NAME.partial (hidden, in the same directory) and renamed
// to NAME once it is complete (closed, compressed stream ended, synced): a
// file with a final name is never partial.
//
// A new file is started by Rotate, which a caller runs when Due says so
// (RunRotation does both on a timer) and on SIGHUP. With a registered
// format writer (SetRestarter) the switch happens inside its Restart, so
// every file holds whole records and a complete document.
//
// Write, Flush, Rotate and Close are safe for concurrent use.
type Rotating struct {
	dir, stem, ext string
	opts           RotateOptions

	rotMu   sync.Mutex // serializes Rotate and Close
	mu      sync.Mutex // guards the fields below; held during Write
	cur     *segment
	seq     int
	restart format.Writer
	closed  bool
	// due gets a value when a Write reaches the size limit, so that
	// RunRotation rotates at once rather than at its next tick.
	due chan struct{}
}

// segment is one file of the series.
type segment struct {
	f       *os.File
	enc     io.WriteCloser // compressor over f, or nil
	w       io.Writer      // enc or f
	tmp     string         // temporary path
	final   string         // the name it gets when complete
	opened  time.Time
	written int64
	err     error // a write error, sticky for this file
}

// OpenRotating starts the first file of the series named after path.
func OpenRotating(path string, opts RotateOptions) (*Rotating, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	byName := CompressionFromName(path)
	switch {
	case opts.Compress == "":
		opts.Compress = byName
	case opts.Compress == CompressNone && byName != "":
		return nil, fmt.Errorf("--write %s asks for %s but --compress is none: drop the suffix or the flag", path, byName)
	case opts.Compress == CompressNone:
		opts.Compress = ""
	case compressSuffix[opts.Compress] == "":
		return nil, fmt.Errorf("unknown compression %q (valid: %s, %s, %s)", opts.Compress, CompressZstd, CompressGzip, CompressNone)
	case byName != "" && byName != opts.Compress:
		return nil, fmt.Errorf("--write %s asks for %s but --compress is %s: make them agree", path, byName, opts.Compress)
	}
	if opts.Size < 0 || opts.Interval < 0 || opts.Keep < 0 {
		return nil, errors.New("output: negative rotation limit")
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if st, err := os.Stat(path); base == "" || (err == nil && st.IsDir()) {
		return nil, fmt.Errorf("--write %s names a directory: give a file name such as %s", path, filepath.Join(path, "rtt.jsonl"))
	}
	stem, ext := base, ""
	if i := strings.IndexByte(base[1:], '.'); i >= 0 {
		stem, ext = base[:i+1], base[i+1:]
	}
	if suf := compressSuffix[opts.Compress]; suf != "" && !strings.HasSuffix(ext, suf) {
		ext += suf
	}
	r := &Rotating{dir: dir, stem: stem, ext: ext, opts: opts, due: make(chan struct{}, 1)}
	seg, err := r.openNext()
	if err != nil {
		return nil, err
	}
	r.cur = seg
	return r, nil
}

// openNext creates the next temporary file and its compressor.
func (r *Rotating) openNext() (*segment, error) {
	now := r.opts.Now().UTC()
	for {
		r.seq++
		name := fmt.Sprintf("%s-%s-%06d%s", r.stem, now.Format("20060102T150405Z"), r.seq, r.ext)
		final := filepath.Join(r.dir, name)
		if _, err := os.Lstat(final); err == nil {
			continue // an earlier run's file of the same second
		}
		tmp := filepath.Join(r.dir, "."+name+".partial")
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var enc io.WriteCloser
		switch r.opts.Compress {
		case CompressZstd:
			enc, err = zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		case CompressGzip:
			enc, err = gzip.NewWriterLevel(f, gzip.DefaultCompression)
		}
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
			return nil, err
		}
		seg := &segment{f: f, enc: enc, w: f, tmp: tmp, final: final, opened: now}
		if enc != nil {
			seg.w = enc
		}
		return seg, nil
	}
}

// finish completes the file: ends the compressed stream, syncs, closes
// and gives it its final name.
func (r *segment) finish() error {
	if r.f == nil {
		return nil // a failed openNext left no file
	}
	var errs []error
	if r.enc != nil {
		if err := r.enc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.f.Sync(); err != nil {
		errs = append(errs, err)
	}
	if err := r.f.Close(); err != nil {
		errs = append(errs, err)
	}
	if r.err != nil {
		errs = append(errs, r.err)
	}
	if len(errs) > 0 {
		// Keep what was written under the temporary name: it is incomplete.
		return fmt.Errorf("output file %s left incomplete: %w", r.tmp, errors.Join(errs...))
	}
	return os.Rename(r.tmp, r.final)
}

// Name returns the path of the file being written (its temporary name).
func (r *Rotating) Name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.tmp
}

// Write writes p to the current file.
func (r *Rotating) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, os.ErrClosed
	}
	c := r.cur
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.written += int64(n)
	if err != nil {
		c.err = err
	}
	if r.opts.Size > 0 && c.written >= r.opts.Size {
		select {
		case r.due <- struct{}{}:
		default:
		}
	}
	return n, err
}

// Flush writes what the compressor holds to the file, so that a reader of
// the temporary file can decompress everything written so far.
func (r *Rotating) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.cur.enc == nil || r.cur.err != nil {
		return nil
	}
	if fl, ok := r.cur.enc.(interface{ Flush() error }); ok {
		return fl.Flush()
	}
	return nil
}

// SetRestarter registers the format writer that writes to r, so that
// Rotate finishes its document in the old file and starts one in the new.
func (r *Rotating) SetRestarter(w format.Writer) {
	r.mu.Lock()
	r.restart = w
	r.mu.Unlock()
}

// Due reports whether the current file reached the size or age limit.
func (r *Rotating) Due() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dueLocked()
}

func (r *Rotating) dueLocked() bool {
	if r.closed {
		return false
	}
	if r.cur.f == nil {
		return true // retry creating a file
	}
	if r.opts.Size > 0 && r.cur.written >= r.opts.Size {
		return true
	}
	return r.opts.Interval > 0 && !r.opts.Now().Before(r.cur.opened.Add(r.opts.Interval))
}

// Rotate completes the current file and starts the next one, then deletes
// the oldest completed files beyond RotateOptions.Keep. If the next file
// cannot be created, writes fail until a later Rotate creates one.
func (r *Rotating) Rotate() error {
	r.rotMu.Lock()
	defer r.rotMu.Unlock()
	r.mu.Lock()
	closed, w := r.closed, r.restart
	r.mu.Unlock()
	if closed {
		return os.ErrClosed
	}
	swap := func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		// The old file is completed before the next is created, so that a
		// reader never sees two temporary files.
		ferr := r.cur.finish()
		next, err := r.openNext()
		if err != nil {
			// No file to write to: writes fail until a Rotate succeeds
			// (Due says to retry).
			next = &segment{err: fmt.Errorf("no output file: %w", err)}
		}
		r.cur = next
		return errors.Join(ferr, err)
	}
	var err error
	if w == nil {
		err = swap()
	} else {
		// Lock order: the format writer's lock, then r.mu (as in Write).
		err = w.Restart(swap)
	}
	return errors.Join(err, r.prune())
}

// prune deletes the oldest completed files beyond Keep.
func (r *Rotating) prune() error {
	if r.opts.Keep == 0 {
		return nil
	}
	done, err := r.Completed()
	if err != nil {
		return err
	}
	var errs []error
	for len(done) > r.opts.Keep {
		if err := os.Remove(done[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		done = done[1:]
	}
	return errors.Join(errs...)
}

// Completed lists the completed files of this destination (any run's),
// oldest first.
func (r *Rotating) Completed() ([]string, error) {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, r.stem+"-") || !strings.HasSuffix(n, r.ext) {
			continue
		}
		mid := n[len(r.stem)+1 : len(n)-len(r.ext)]
		// YYYYMMDDTHHMMSSZ-SEQ
		if len(mid) < 18 || mid[8] != 'T' || mid[15] != 'Z' || mid[16] != '-' {
			continue
		}
		out = append(out, filepath.Join(r.dir, n))
	}
	slices.Sort(out) // the names sort by time, then sequence
	return out, nil
}

// Close completes the current file. Finish the format writer (Close)
// first. Writes after Close fail with os.ErrClosed.
func (r *Rotating) Close() error {
	r.rotMu.Lock()
	defer r.rotMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	err := r.cur.finish()
	r.mu.Unlock()
	return errors.Join(err, r.prune())
}

// RunRotation rotates r whenever it is due: at once when a write reaches
// the size limit, at the first tick after the age limit. It calls flush
// every flushEvery (if both are not zero) and reports errors to onErr (if
// not nil), until stop is called. A file exceeds Size by what is written
// while the rotation waits for the format writer's lock.
func RunRotation(r *Rotating, tick, flushEvery time.Duration, flush func() error, onErr func(error)) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	report := func(err error) {
		if err != nil && onErr != nil {
			onErr(err)
		}
	}
	go func() {
		defer close(exited)
		t := time.NewTicker(tick)
		defer t.Stop()
		var flushC <-chan time.Time
		if flushEvery > 0 && flush != nil {
			ft := time.NewTicker(flushEvery)
			defer ft.Stop()
			flushC = ft.C
		}
		for {
			select {
			case <-t.C:
				if r.Due() {
					report(r.Rotate())
				}
			case <-r.due:
				if r.Due() {
					report(r.Rotate())
				}
			case <-flushC:
				report(flush())
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-exited
		})
	}
}

var _ io.Writer = (*Rotating)(nil)
