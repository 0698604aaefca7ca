package anon

import (
	"crypto/aes"
	"crypto/cipher"
	"net/netip"
)

// cryptoPAn is Crypto-PAn (Xu, Fan, Ammar, Moon: "Prefix-preserving IP
// address anonymization", 2002), keyed as the original Georgia Tech tool.
type cryptoPAn struct {
	block cipher.Block
	pad   u128
}

// NewCryptoPAn returns Crypto-PAn with a 32-byte key, split as the original
// tool does: the first 16 bytes are the AES-128 key, the last 16 are
// encrypted with it to make the pad. With the same key, IPv4 output equals
// that of the original tool and of the ports that follow it (cryptopANT's
// AES mode, Yawning/cryptopan, node-cryptopan, Tenzir).
//
// IPv6 follows the same ports' 128-bit extension: the identical
// construction over 128 address bits, using the whole pad. The original
// defined IPv4 only, so there is no older output to match.
//
// Prefix anonymizes the network address and keeps the prefix length.
func NewCryptoPAn(key []byte) (Scheme, error) {
	if err := checkKey("cryptopan", key, 32); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key[:16])
	if err != nil {
		return nil, err
	}
	var pad [16]byte
	block.Encrypt(pad[:], key[16:])
	s := &cryptoPAn{block: block, pad: u128From(pad)}
	Wipe(pad[:])
	return s, nil
}

func (*cryptoPAn) Name() string           { return "cryptopan" }
func (*cryptoPAn) String() string         { return "cryptopan" }
func (*cryptoPAn) GoString() string       { return "anon.Scheme(cryptopan)" }
func (*cryptoPAn) PrefixPreserving() bool { return true }

func (s *cryptoPAn) Prefix(p netip.Prefix) netip.Prefix { return prefixVia(p, s.Addr) }

// Addr builds a one-time pad bit by bit. For output bit i the AES input is
// the address's first i bits followed by the pad's remaining 128-i bits,
// and the pad bit is the most significant bit of the AES output. The
// address sits at the top of the block: IPv4 fills its first 32 bits and
// the pad the rest, as in the original.
func (s *cryptoPAn) Addr(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	a = normalize(a)
	var x u128
	n := 128
	if a.Is4() {
		v4 := a.As4()
		x = u128From([16]byte{v4[0], v4[1], v4[2], v4[3]})
		n = 32
	} else {
		x = u128From(a.As16())
	}
	var otp u128
	buf := make([]byte, 32)
	in, e := buf[:16], buf[16:]
	for i := 0; i < n; i++ {
		m := topMask(i)
		encrypt(s.block, x.and(m).or(s.pad.and(m.not())), in, e)
		otp = otp.withBit(i, uint64(e[0]>>7))
	}
	out := x.xor(otp).bytes()
	if n == 32 {
		return netip.AddrFrom4([4]byte(out[:4]))
	}
	return netip.AddrFrom16(out)
}
