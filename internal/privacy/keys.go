package privacy

import (
	"crypto/hmac"
	"crypto/sha256"
	"strconv"

	"github.com/rttscope/rttscope/internal/anon"
)

// portKeySize is the key size of anon.PortMapper.
const portKeySize = 16

// keyring makes the run's keys: the first from the key file or at random,
// each rotation a new one. A rotated key is derived from the file's key
// (HMAC-SHA256 of "rttscope anon key N"), so that whoever holds the file
// can redo the mapping; without a file it is random like the first.
type keyring struct {
	size int    // bytes of key the mode needs (anon.Mode.KeySize, or portKeySize)
	base []byte // the key file's content; nil for random keys
	n    int    // keys made so far
}

func newKeyring(o Options, m anon.Mode) (*keyring, error) {
	k := &keyring{size: m.KeySize()}
	if k.size == 0 {
		k.size = portKeySize // only ports need a key
	}
	if o.KeyFile != "" {
		b, err := anon.ReadKeyFile(o.KeyFile, k.size)
		if err != nil {
			return nil, err
		}
		k.base = b
	}
	return k, nil
}

// next returns a new key, owned by the caller (who wipes it).
func (k *keyring) next() ([]byte, error) {
	defer func() { k.n++ }()
	if k.base == nil {
		return anon.RandomKey(k.size)
	}
	if k.n == 0 {
		return append([]byte(nil), k.base...), nil
	}
	return derive(k.base, "rttscope anon key "+strconv.Itoa(k.n), k.size), nil
}

// wipe zeroes the key file's content.
func (k *keyring) wipe() { anon.Wipe(k.base) }

// derive returns size (<= 32) bytes of HMAC-SHA256(key, label).
func derive(key []byte, label string, size int) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(label))
	return h.Sum(nil)[:size]
}
