package anon

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ReadKeyFile reads a key of size bytes from path. The file holds either
// exactly 2*size hex digits (surrounding whitespace is ignored) or exactly
// size raw bytes. A file that group or others may read or write is refused,
// since anyone who can read the key can undo the anonymization. Errors name
// the fix and never contain any of the file's content.
func ReadKeyFile(path string, size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("--anon-key-file %s: this mode takes no key", path)
	}
	f, err := os.Open(path)
	if err != nil {
		// The *PathError repeats the path: keep only what went wrong.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("--anon-key-file %s: %w", path, err)
	}
	defer f.Close()
	// Check the open file, not the path, so the file checked is the file read.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("--anon-key-file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("--anon-key-file %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		what := "readable"
		switch {
		case perm&0o044 != 0 && perm&0o022 != 0:
			what = "readable and writable"
		case perm&0o022 != 0:
			what = "writable"
		}
		return nil, fmt.Errorf("--anon-key-file %s: %s by group or others (mode %#o): run chmod 600 %s", path, what, perm, path)
	}
	// Read at most a little more than the longest valid file, so a wrong
	// path to a big file fails fast.
	data, err := io.ReadAll(io.LimitReader(f, int64(4*size+64)))
	if err != nil {
		return nil, fmt.Errorf("--anon-key-file %s: %w", path, err)
	}
	defer Wipe(data)
	// The umask in the suggested command keeps the new file private from
	// its first byte.
	want := fmt.Sprintf("want a %d-byte key: %d hex digits or %d raw bytes (make one with: (umask 077; head -c %d /dev/urandom > %s))",
		size, 2*size, size, size, path)
	if len(data) == size {
		// size random bytes are all hex digits with probability
		// (22/256)^size: such a file is the hex form of a key half as long,
		// made for another mode.
		if isHex(data) {
			return nil, fmt.Errorf("--anon-key-file %s: holds %d hex digits, a %d-byte key; %s", path, len(data), size/2, want)
		}
		return bytes.Clone(data), nil
	}
	text := bytes.TrimSpace(data)
	if len(text) != 2*size {
		return nil, fmt.Errorf("--anon-key-file %s: holds %d bytes (%d after trimming whitespace); %s", path, len(data), len(text), want)
	}
	key := make([]byte, size)
	// hex.Decode's error quotes the offending character, which would be a
	// piece of the key: report only that the text is not hex.
	if _, err := hex.Decode(key, text); err != nil {
		Wipe(key)
		return nil, fmt.Errorf("--anon-key-file %s: %d characters but not all hex digits; %s", path, len(text), want)
	}
	return key, nil
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// RandomKey returns size bytes from crypto/rand, for a key used by one run
// only (its outputs cannot be joined with any other run's).
func RandomKey(size int) ([]byte, error) {
	if size <= 0 {
		return nil, errors.New("anon: random key size must be positive")
	}
	key := make([]byte, size)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("anon: random key: %w", err)
	}
	return key, nil
}

// KeyID names a key in the output without revealing it: the first 8 hex
// digits of HMAC-SHA256(key, "rttscope key id"). Two outputs with the same
// KeyID were anonymized with the same key and can be joined. The id is a
// keyed hash of a fixed string, so it says nothing about the key beyond
// letting someone who holds a candidate key check it.
func KeyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("rttscope key id"))
	return hex.EncodeToString(m.Sum(nil)[:4])
}
