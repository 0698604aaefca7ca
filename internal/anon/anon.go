// Package anon anonymizes IP addresses and ports before anything is written.
// It is pure Go on the standard library's crypto/aes.
//
// A Scheme maps real addresses to anonymized ones; every Scheme is
// deterministic for a given key (the same address always gives the same
// output, so records can still be joined) and safe for concurrent use. The
// schemes:
//
//   - pfx: ipcrypt-pfx from the IETF draft draft-denis-ipcrypt (32-byte
//     key). Prefix-preserving: two addresses that share their first n bits
//     give outputs that share their first n bits. IPv4 stays IPv4, IPv6
//     stays IPv6.
//   - cryptopan: Crypto-PAn (32-byte key), prefix-preserving, output
//     identical to the original Crypto-PAn tools for IPv4; IPv6 follows the
//     128-bit extension of the common ports (see NewCryptoPAn).
//   - det: ipcrypt-deterministic from the same draft (16-byte key): AES-128
//     of the 16-byte IPv4-mapped form. The output is a 16-byte value, so an
//     IPv4 address comes out as an IPv6 address. No prefix is preserved.
//   - trunc:V4BITS,V6BITS: keeps the first bits and zeroes the rest; no key.
//
// pfx, cryptopan and det are encryption: whoever holds the key can map
// outputs back to addresses, so the key is as sensitive as the addresses.
// trunc cannot be reversed but leaves the kept prefix in the clear.
//
// The modes none and drop parse (ParseMode) but have no Scheme: the caller
// keeps or drops addresses itself, and New refuses them.
//
// Every Scheme treats an IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the
// IPv4 address a.b.c.d, and returns an invalid netip.Addr unchanged.
// Prefix anonymizes the network address of a prefix; what that means for
// each scheme is documented on its constructor.
//
// Keys never appear in errors or in what fmt prints of a Scheme or a
// PortMapper: their String and GoString print only the scheme's name.
// Constructors copy what they need from the key (the AES key schedule), so
// the caller may Wipe its key afterwards. KeyID names a key in the output
// without revealing it.
//
// ReadKeyFile reads a key from a private file and RandomKey makes a key for
// one run. PortMapper permutes port numbers, per protocol, with a key of
// its own.
//
// The prefix-preserving schemes cost one AES block (two for pfx) per address
// bit: 32 or 64 for IPv4, 128 or 256 for IPv6. Cached puts a bounded cache
// in front of any Scheme.
package anon

import (
	"net/netip"
)

// Scheme maps real addresses to anonymized ones. Safe for concurrent use.
type Scheme interface {
	// Name is the mode as ParseMode reads it: "pfx", "cryptopan", "det",
	// "trunc:24,48".
	Name() string
	// Addr anonymizes a. An invalid Addr comes back unchanged; an
	// IPv4-mapped IPv6 address is treated as IPv4. A zone is dropped.
	Addr(a netip.Addr) netip.Addr
	// Prefix anonymizes the network address of p (see each constructor).
	// An invalid Prefix comes back unchanged.
	Prefix(p netip.Prefix) netip.Prefix
	// PrefixPreserving reports whether outputs share exactly as many
	// leading bits as their inputs.
	PrefixPreserving() bool
}

// Wipe overwrites b with zeros, for key material that is no longer needed.
func Wipe(b []byte) {
	clear(b)
}

// normalize turns an IPv4-mapped address into IPv4 and drops any zone, so
// every scheme sees one form per address.
func normalize(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// prefixVia anonymizes a prefix through its network address: the masked
// address is anonymized with addr and the result masked to the same number
// of bits. An IPv4-mapped prefix of /96 or longer becomes the IPv4 prefix it
// stands for; a shorter one masks away part of the ::ffff marker, so its
// network address is not IPv4-mapped and it stays IPv6.
func prefixVia(p netip.Prefix, addr func(netip.Addr) netip.Addr) netip.Prefix {
	if !p.IsValid() {
		return p
	}
	m := p.Masked()
	a, bits := m.Addr(), m.Bits()
	if a.Is4In6() {
		a, bits = a.Unmap(), bits-96
	}
	return netip.PrefixFrom(addr(a), bits).Masked()
}
