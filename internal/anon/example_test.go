package anon_test

import (
	"fmt"
	"net/netip"

	"github.com/rttscope/rttscope/internal/anon"
)

// The caller's path from flag values to anonymized addresses. A keyed mode
// would read its key with ReadKeyFile(path, mode.KeySize()) or make one
// with RandomKey, and print KeyID(key) beside the output.
func Example() {
	mode, err := anon.ParseMode("trunc:24,48")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := anon.New(mode, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	s = anon.Cached(s, 1<<16)
	fmt.Println(s, s.Addr(netip.MustParseAddr("192.0.2.77")), s.Addr(netip.MustParseAddr("2001:db8:1:2::3")))

	_, err = anon.ParseMode("hash")
	fmt.Println(err)
	// Output:
	// trunc:24,48 192.0.2.0 2001:db8:1::
	// --anonymize: unknown mode "hash" (none, drop, pfx, cryptopan, det, trunc:V4BITS,V6BITS)
}
