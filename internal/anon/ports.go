package anon

import (
	"crypto/aes"
	"crypto/cipher"
	"sync"
)

// portRounds is the number of Feistel rounds. Four make a strong
// pseudorandom permutation in the Luby–Rackoff sense for large halves; with
// 8-bit halves the bounds are weak, so more rounds are cheap insurance
// (the round functions are table lookups after the first use).
const portRounds = 8

// PortMapper is a keyed permutation of the 65536 port numbers, a different
// one for each IP protocol number. Safe for concurrent use.
//
// It is a balanced Feistel network over the two bytes of the port, whose
// round function is AES-128: F(proto, round, half) is the first byte of
// AES(key, [proto, round, half, 0...]). A Feistel network is a bijection
// whatever its round function, and 16 bits split evenly, so no cycle-walking
// is needed. The round functions of a protocol are tabulated on its first
// use (portRounds*256 AES blocks), after which Map is table lookups.
type PortMapper struct {
	block  cipher.Block
	once   [256]sync.Once  // by protocol
	tables [256]*portTable // by protocol, written once inside once[proto]
}

type portTable [portRounds][256]uint8

// NewPortMapper returns a PortMapper keyed with a 16-byte key. Use a key
// of its own, not the address key.
func NewPortMapper(key []byte) (*PortMapper, error) {
	if err := checkKey("ports", key, 16); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return &PortMapper{block: block}, nil
}

func (*PortMapper) String() string   { return "anon.PortMapper" }
func (*PortMapper) GoString() string { return "anon.PortMapper" }

// Map returns the anonymized port for port under protocol proto (6 TCP,
// 17 UDP, ...). Every port, 0 and the well-known ones included, maps to
// another; the caller decides which ports to leave alone.
func (p *PortMapper) Map(proto uint8, port uint16) uint16 {
	t := p.table(proto)
	l, r := uint8(port>>8), uint8(port)
	for i := range portRounds {
		l, r = r, l^t[i][r]
	}
	return uint16(l)<<8 | uint16(r)
}

func (p *PortMapper) table(proto uint8) *portTable {
	p.once[proto].Do(func() {
		t := new(portTable)
		var in, out [16]byte
		in[0] = proto
		for round := range portRounds {
			in[1] = uint8(round)
			for half := range 256 {
				in[2] = uint8(half)
				p.block.Encrypt(out[:], in[:])
				t[round][half] = out[0]
			}
		}
		p.tables[proto] = t
	})
	// Do returns after the function has run, so the table is visible.
	return p.tables[proto]
}
