package anon

import (
	"fmt"
	"strconv"
	"strings"
)

// Mode is a parsed --anonymize value. Kind is one of none, drop, pfx,
// cryptopan, det or trunc; V4Bits and V6Bits are set for trunc only.
type Mode struct {
	Kind           string
	V4Bits, V6Bits int
}

const validModes = "none, drop, pfx, cryptopan, det, trunc:V4BITS,V6BITS"

// ParseMode reads an --anonymize value. Errors are one line naming the
// valid choices.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "none", "drop", "pfx", "cryptopan", "det":
		return Mode{Kind: s}, nil
	}
	rest, ok := strings.CutPrefix(s, "trunc")
	if !ok {
		return Mode{}, fmt.Errorf("--anonymize: unknown mode %q (%s)", s, validModes)
	}
	bad := fmt.Errorf("--anonymize: %q: want trunc:V4BITS,V6BITS with V4BITS 0..32 and V6BITS 0..128, e.g. trunc:24,48", s)
	rest, ok = strings.CutPrefix(rest, ":")
	if !ok {
		return Mode{}, bad
	}
	v4s, v6s, ok := strings.Cut(rest, ",")
	if !ok {
		return Mode{}, bad
	}
	v4, err4 := strconv.Atoi(v4s)
	v6, err6 := strconv.Atoi(v6s)
	if err4 != nil || err6 != nil || v4 < 0 || v4 > 32 || v6 < 0 || v6 > 128 {
		return Mode{}, bad
	}
	return Mode{Kind: "trunc", V4Bits: v4, V6Bits: v6}, nil
}

// KeySize is the key length in bytes the mode needs: 32 for pfx and
// cryptopan, 16 for det, 0 for the modes without a key.
func (m Mode) KeySize() int {
	switch m.Kind {
	case "pfx", "cryptopan":
		return 32
	case "det":
		return 16
	}
	return 0
}

// String is the mode as ParseMode reads it.
func (m Mode) String() string {
	if m.Kind == "trunc" {
		return truncName(m.V4Bits, m.V6Bits)
	}
	return m.Kind
}

func truncName(v4, v6 int) string {
	return "trunc:" + strconv.Itoa(v4) + "," + strconv.Itoa(v6)
}

// New returns the Scheme for m with key, which must be m.KeySize() bytes
// (trunc ignores it). The modes none and drop have no Scheme: New returns
// an error for them, and the caller handles them before calling New.
func New(m Mode, key []byte) (Scheme, error) {
	switch m.Kind {
	case "pfx":
		return NewPfx(key)
	case "cryptopan":
		return NewCryptoPAn(key)
	case "det":
		return NewDeterministic(key)
	case "trunc":
		return NewTruncate(m.V4Bits, m.V6Bits)
	case "none", "drop":
		return nil, fmt.Errorf("--anonymize %s: no address scheme; the caller keeps or drops addresses itself", m.Kind)
	}
	return nil, fmt.Errorf("--anonymize: unknown mode %q (%s)", m.Kind, validModes)
}

// checkKey refuses a key of the wrong length, naming the length only.
func checkKey(mode string, key []byte, size int) error {
	if len(key) != size {
		return fmt.Errorf("--anonymize %s: key is %d bytes, want %d", mode, len(key), size)
	}
	return nil
}
