package anon

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeKey(t *testing.T, data []byte, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, data, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // WriteFile's perm goes through umask
		t.Fatal(err)
	}
	return p
}

func TestReadKeyFile(t *testing.T) {
	key, err := RandomKey(32)
	if err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(key)

	for name, data := range map[string]string{
		"hex":       h,
		"hex upper": strings.ToUpper(h),
		"hex space": "  \n" + h + "\n\n",
		"raw":       string(key),
	} {
		got, err := ReadKeyFile(writeKey(t, []byte(data), 0o600), 32)
		if err != nil || string(got) != string(key) {
			t.Errorf("%s: ReadKeyFile = %x, %v; want the key", name, got, err)
		}
	}
	if got, err := ReadKeyFile(writeKey(t, []byte(h[:32]), 0o400), 16); err != nil || hex.EncodeToString(got) != h[:32] {
		t.Errorf("16-byte hex key, mode 0400: %x, %v", got, err)
	}

	// Errors say what is wrong and how to fix it, and hold no key bytes.
	noKey := func(name string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		msg := err.Error()
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", name, msg, w)
			}
		}
		lower := strings.ToLower(msg)
		for i := 0; i+8 <= len(h); i += 4 {
			if strings.Contains(lower, h[i:i+8]) {
				t.Errorf("%s: %q contains key hex %s", name, msg, h[i:i+8])
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: %q is more than one line", name, msg)
		}
	}
	p := writeKey(t, []byte(h), 0o644)
	_, err = ReadKeyFile(p, 32)
	noKey("0644", err, "--anon-key-file "+p+": readable by group or others (mode 0644): run chmod 600 "+p)
	_, err = ReadKeyFile(writeKey(t, []byte(h), 0o620), 32)
	noKey("0620", err, "writable by group or others (mode 0620)", "chmod 600")
	_, err = ReadKeyFile(writeKey(t, []byte(h), 0o604), 32)
	noKey("0604", err, "readable by group or others (mode 0604)")

	_, err = ReadKeyFile(writeKey(t, []byte(h), 0o600), 16)
	noKey("64 hex digits for det", err, "want a 16-byte key: 32 hex digits or 16 raw bytes")
	_, err = ReadKeyFile(writeKey(t, []byte(h[:32]), 0o600), 32)
	noKey("det key for pfx", err, "holds 32 hex digits, a 16-byte key; want a 32-byte key")
	_, err = ReadKeyFile(writeKey(t, []byte(h[:63]), 0o600), 32)
	noKey("63 hex digits", err, "want a 32-byte key: 64 hex digits or 32 raw bytes")
	_, err = ReadKeyFile(writeKey(t, key[:20], 0o600), 32)
	noKey("20 raw bytes", err, "holds 20 bytes", "want a 32-byte key")
	// Not hex: hex.Decode's own error would quote the offending character.
	bad := []byte(h)
	bad[40] = 'g'
	_, err = ReadKeyFile(writeKey(t, bad, 0o600), 32)
	noKey("not hex", err, "not all hex digits")
	if err != nil && strings.Contains(err.Error(), "'g'") {
		t.Errorf("not hex: %q quotes a key character", err)
	}
	_, err = ReadKeyFile(filepath.Join(t.TempDir(), "missing"), 32)
	noKey("missing", err, "missing: no such file or directory")
	_, err = ReadKeyFile(t.TempDir(), 32)
	noKey("directory", err, "not a regular file")
}

func TestRandomKeyAndKeyID(t *testing.T) {
	a, err := RandomKey(16)
	if err != nil || len(a) != 16 {
		t.Fatalf("RandomKey(16) = %d bytes, %v", len(a), err)
	}
	b, _ := RandomKey(16)
	if string(a) == string(b) {
		t.Error("two random keys are equal")
	}
	id := KeyID(a)
	if len(id) != 8 || id != KeyID(a) || id == KeyID(b) {
		t.Errorf("KeyID: %q, %q for another key", id, KeyID(b))
	}
	if strings.Contains(hex.EncodeToString(a), id) {
		t.Errorf("KeyID %q is part of the key", id)
	}
	Wipe(a)
	for _, x := range a {
		if x != 0 {
			t.Fatal("Wipe left a non-zero byte")
		}
	}
}
