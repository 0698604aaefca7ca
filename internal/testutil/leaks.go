package testutil

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// Notations returns the ways a tool could print a: dotted or compressed,
// IPv6 fully expanded, IPv4 as IPv4-mapped IPv6 (dotted and hex), and the
// address's bytes in hex (lower and upper case, with and without 0x).
func Notations(a netip.Addr) []string {
	a = a.Unmap()
	b := a.AsSlice()
	h := hex.EncodeToString(b)
	n := []string{a.String(), h, strings.ToUpper(h), "0x" + h}
	if a.Is4() {
		m := netip.AddrFrom16(a.As16())
		n = append(n, m.String(), expanded(m), fmt.Sprintf("::ffff:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3]))
	} else {
		n = append(n, expanded(a))
	}
	return n
}

// expanded is a in eight groups of four hex digits.
func expanded(a netip.Addr) string {
	b := a.As16()
	var s strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			s.WriteByte(':')
		}
		fmt.Fprintf(&s, "%02x%02x", b[i], b[i+1])
	}
	return s.String()
}

// Leaks returns each notation of each of addrs found in text as a whole
// token: not preceded or followed by a hex digit or '.' (so that 10.0.0.1
// is not found in 110.0.0.12). A ':' does not end a token, so that the
// address is found in flow names like "fd00::1:443+...", at the price of
// reporting fd00::1 in fd00::1:5 too: better a false alarm than a leak
// missed. An empty result means none of them appears.
func Leaks(text string, addrs ...netip.Addr) []string {
	var found []string
	for _, a := range addrs {
		for _, n := range Notations(a) {
			if containsToken(text, n) {
				found = append(found, fmt.Sprintf("%s (as %q)", a, n))
			}
		}
	}
	return found
}

func containsToken(text, tok string) bool {
	lower := strings.ToLower(text)
	tok = strings.ToLower(tok)
	for i := 0; ; {
		j := strings.Index(lower[i:], tok)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(tok)
		if (start == 0 || !addrChar(lower[start-1])) && (end == len(lower) || !addrChar(lower[end])) {
			return true
		}
		i = start + 1
	}
}

func addrChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '.'
}
