package anon

import (
	"crypto/aes"
	"crypto/cipher"
	"net/netip"
)

// det is ipcrypt-deterministic (draft-denis-ipcrypt).
type det struct {
	block cipher.Block
}

// NewDeterministic returns ipcrypt-deterministic with a 16-byte key:
// AES-128 of the address's 16-byte form (IPv4 as ::ffff:a.b.c.d). The
// 16-byte ciphertext is read back as an address as the draft says: IPv6,
// unless it happens to start with the IPv4-mapped prefix (probability
// 2^-96), in which case it is the IPv4 address in its last 4 bytes. So IPv4
// input normally gives IPv6 output.
//
// The mapping scatters addresses: Prefix returns the anonymized network
// address of p as a single-address prefix (/128, or /32 in the 2^-96 case)
// — a stable name for the network, not a network that contains the
// anonymized addresses of its members.
func NewDeterministic(key []byte) (Scheme, error) {
	if err := checkKey("det", key, 16); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return &det{block: block}, nil
}

func (*det) Name() string           { return "det" }
func (*det) String() string         { return "det" }
func (*det) GoString() string       { return "anon.Scheme(det)" }
func (*det) PrefixPreserving() bool { return false }

func (s *det) Addr(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	in := normalize(a).As16()
	buf := make([]byte, 32) // one allocation: the slices escape into Encrypt
	copy(buf, in[:])
	s.block.Encrypt(buf[16:], buf[:16])
	return netip.AddrFrom16([16]byte(buf[16:])).Unmap()
}

func (s *det) Prefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() {
		return p
	}
	a := s.Addr(p.Masked().Addr())
	return netip.PrefixFrom(a, a.BitLen())
}
