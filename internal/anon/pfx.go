package anon

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"errors"
	"net/netip"
)

// pfx is ipcrypt-pfx (draft-denis-ipcrypt, "Prefix-Preserving Encryption").
type pfx struct {
	k1, k2 cipher.Block
}

// NewPfx returns ipcrypt-pfx with a 32-byte key: two AES-128 keys, the
// first and the last 16 bytes, which the draft requires to differ (equal
// halves would cancel out and return every address unchanged).
//
// Prefix anonymizes the network address and keeps the prefix length: the
// anonymized prefix contains exactly the anonymized addresses of p.
func NewPfx(key []byte) (Scheme, error) {
	if err := checkKey("pfx", key, 32); err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(key[:16], key[16:]) == 1 {
		return nil, errors.New("--anonymize pfx: the two 16-byte halves of the key are equal, which would leave addresses unchanged; use a random key")
	}
	k1, err := aes.NewCipher(key[:16])
	if err != nil {
		return nil, err
	}
	k2, err := aes.NewCipher(key[16:])
	if err != nil {
		return nil, err
	}
	return &pfx{k1: k1, k2: k2}, nil
}

func (*pfx) Name() string           { return "pfx" }
func (*pfx) String() string         { return "pfx" }
func (*pfx) GoString() string       { return "anon.Scheme(pfx)" }
func (*pfx) PrefixPreserving() bool { return true }

func (s *pfx) Prefix(p netip.Prefix) netip.Prefix { return prefixVia(p, s.Addr) }

// Addr follows the draft's encryption pseudocode. The address is in its
// 16-byte form (IPv4 as ::ffff:a.b.c.d); bits are encrypted from the most
// significant down, starting at bit 96 for IPv4 so an IPv4 address and the
// first 32 bits of an IPv6 address never share a PRF input. Each bit is
// XORed with the least significant bit of AES(K1, pp) ^ AES(K2, pp), where
// the padded prefix pp is zeros || 1 || the bits already seen: the 1 marks
// how long the prefix is, and each round shifts pp left by one bit and
// appends the plaintext bit just processed.
func (s *pfx) Addr(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	a = normalize(a)
	x := u128From(a.As16())
	var out, pp u128
	start := 0
	if a.Is4() {
		start = 96
		out = u128{0, 0xffff << 32}
		// The 96-bit ::ffff prefix after its 1 marker: the marker lands at
		// bit 96 counted from the least significant end.
		pp = u128{1 << 32, 0xffff}
	} else {
		pp = u128{0, 1}
	}
	buf := make([]byte, 48)
	in, e1, e2 := buf[:16], buf[16:32], buf[32:]
	for i := start; i < 128; i++ {
		encrypt(s.k1, pp, in, e1)
		encrypt(s.k2, pp, in, e2)
		b := x.bit(i)
		out = out.withBit(i, uint64((e1[15]^e2[15])&1)^b)
		pp = pp.shl1(b)
	}
	b := out.bytes()
	if a.Is4() {
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return netip.AddrFrom16(b)
}
