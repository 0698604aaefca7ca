// Package flagval holds command-line flag values (pflag.Value) that check
// what they are given when the flag is parsed, so every later step works
// with a valid, converted value. Each value writes through to a variable
// of the options it sets: the variable's value when the flag is defined is
// the default --help shows (String), and Set changes it only when the
// argument is valid.
//
// A refused argument is an *Error saying what the flag wants; pflag wraps
// it with the flag's name and the argument, and Message turns that into the
// one line the command prints:
//
//	invalid --rtt-type "foo": want min or smoothed
//
// Type returns the name --help shows after the flag: "string" or
// "stringArray" as for pflag's own values, since that is what the user
// types.
package flagval

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Error is why Set refused an argument: what the flag wants instead.
type Error struct{ Want string }

func (e *Error) Error() string { return "want " + e.Want }

// Message returns the one-line message for a flag error whose cause is an
// *Error: `invalid --NAME "ARG": want ...`. ok is false for other errors
// (unknown flags, pflag's own values), which keep pflag's words.
func Message(err error) (msg string, ok bool) {
	var iv *pflag.InvalidValueError
	var e *Error
	if !errors.As(err, &iv) || !errors.As(err, &e) {
		return "", false
	}
	return fmt.Sprintf("invalid --%s %q: %s", iv.GetFlag().Name, iv.GetValue(), e), true
}

// Millis is a time.Duration given in milliseconds, as ePPing's --rate-limit
// (e.g. 100 or 0.25), or as a Go duration (e.g. 250us).
type Millis struct{ p *time.Duration }

// NewMillis returns the flag value that sets *p.
func NewMillis(p *time.Duration) *Millis { return &Millis{p} }

// maxMillis bounds a plain number of milliseconds (about 11.6 days).
const maxMillis = 1e9

// Set accepts a non-negative number of milliseconds up to 1e9 or a
// non-negative Go duration.
func (m *Millis) Set(s string) error {
	if ms, err := strconv.ParseFloat(s, 64); err == nil {
		if !(ms >= 0 && ms <= maxMillis) { // NaN too
			return m.refuse()
		}
		*m.p = time.Duration(ms * float64(time.Millisecond))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return m.refuse()
	}
	*m.p = d
	return nil
}

func (m *Millis) refuse() error {
	return &Error{"milliseconds (e.g. 100) or a duration (e.g. 250us)"}
}

// String gives the value in milliseconds ("100", "0.25").
func (m *Millis) String() string {
	return strconv.FormatFloat(float64(*m.p)/float64(time.Millisecond), 'f', -1, 64)
}

// Type implements pflag.Value.
func (m *Millis) Type() string { return "string" }

// Enum is a flag that takes one of a fixed list of names, each standing for
// a value of T (a mode string, a bool, ...).
type Enum[T comparable] struct {
	p      *T
	names  []string // listed in errors and found by String, in this order
	values []T
	alias  map[string]T // accepted, not listed
}

// Choice returns the flag value that sets *p to values[i] when given
// names[i]. It panics unless there are as many names as values.
func Choice[T comparable](p *T, names []string, values []T) *Enum[T] {
	if len(names) != len(values) || len(names) == 0 {
		panic("flagval.Choice: names and values differ in number")
	}
	return &Enum[T]{p: p, names: names, values: values}
}

// OneOf returns the flag value that sets *p to one of names.
func OneOf(p *string, names ...string) *Enum[string] { return Choice(p, names, names) }

// Alias makes name another accepted spelling of v, not listed in errors.
func (e *Enum[T]) Alias(name string, v T) *Enum[T] {
	if e.alias == nil {
		e.alias = map[string]T{}
	}
	e.alias[name] = v
	return e
}

// Set accepts the names and aliases.
func (e *Enum[T]) Set(s string) error {
	for i, n := range e.names {
		if n == s {
			*e.p = e.values[i]
			return nil
		}
	}
	if v, ok := e.alias[s]; ok {
		*e.p = v
		return nil
	}
	return &Error{Want: listed(e.names)}
}

// String gives the first name of the current value.
func (e *Enum[T]) String() string {
	for i, v := range e.values {
		if v == *e.p {
			return e.names[i]
		}
	}
	return fmt.Sprint(*e.p)
}

// Type implements pflag.Value.
func (e *Enum[T]) Type() string { return "string" }

// listed phrases a choice: "a or b", "a, b or c", and for longer lists
// "one of a, b, c, d".
func listed(names []string) string {
	switch n := len(names); {
	case n == 1:
		return names[0]
	case n <= 3:
		return strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	default:
		return "one of " + strings.Join(names, ", ")
	}
}

// Prefixes is a repeatable flag of IP prefixes; a single address stands for
// its host prefix (/32, /128). Prefixes are stored masked.
type Prefixes struct{ p *[]netip.Prefix }

// NewPrefixes returns the flag value that appends to *p.
func NewPrefixes(p *[]netip.Prefix) *Prefixes { return &Prefixes{p} }

// Set appends one prefix.
func (v *Prefixes) Set(s string) error {
	if p, err := netip.ParsePrefix(s); err == nil {
		*v.p = append(*v.p, p.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		*v.p = append(*v.p, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	return &Error{"a CIDR prefix such as 10.0.0.0/8 or 2001:db8::/32"}
}

// String lists the prefixes, comma-separated ("" for none).
func (v *Prefixes) String() string { return joined(*v.p) }

// Type implements pflag.Value.
func (v *Prefixes) Type() string { return "stringArray" }

// MACs is a repeatable flag of 6-byte (Ethernet) MAC addresses.
type MACs struct{ p *[][6]byte }

// NewMACs returns the flag value that appends to *p.
func NewMACs(p *[][6]byte) *MACs { return &MACs{p} }

// Set appends one address.
func (v *MACs) Set(s string) error {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return &Error{"a 6-byte MAC address such as 02:00:00:00:00:01"}
	}
	*v.p = append(*v.p, [6]byte(hw))
	return nil
}

// String lists the addresses, comma-separated ("" for none).
func (v *MACs) String() string {
	s := make([]net.HardwareAddr, len(*v.p))
	for i := range *v.p {
		s[i] = (*v.p)[i][:]
	}
	return joined(s)
}

// Type implements pflag.Value.
func (v *MACs) Type() string { return "stringArray" }

func joined[T fmt.Stringer](l []T) string {
	s := make([]string, len(l))
	for i, x := range l {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

// Bytes is a size in bytes: a number with an optional binary suffix (K,
// M, G, T; KiB and KB mean the same: 1024), e.g. 64M.
type Bytes struct{ p *int64 }

// NewBytes returns the flag value that sets *p.
func NewBytes(p *int64) *Bytes { return &Bytes{p} }

// Set accepts a non-negative size.
func (b *Bytes) Set(s string) error {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			mult = 1 << (10 * (i + 1))
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return &Error{"a size in bytes such as 500000, 64M or 1G"}
	}
	*b.p = v * mult
	return nil
}

func (b *Bytes) String() string {
	v := *b.p
	for _, u := range []string{"T", "G", "M", "K"} {
		m := int64(1) << (10 * (strings.Index("KMGT", u) + 1))
		if v != 0 && v%m == 0 {
			return strconv.FormatInt(v/m, 10) + u
		}
	}
	return strconv.FormatInt(v, 10)
}

// Type implements pflag.Value.
func (b *Bytes) Type() string { return "size" }

// Ports is a comma-separated list of 1 to len(slots) TCP/UDP ports
// (1-65535), written into slots (usually a fixed array of a
// configuration), whose unused entries are 0; each use of the flag
// replaces the list.
type Ports struct{ slots []uint16 }

// NewPorts returns the flag value that fills slots.
func NewPorts(slots []uint16) *Ports { return &Ports{slots} }

// Set replaces the list.
func (v *Ports) Set(s string) error {
	parts := strings.Split(s, ",")
	want := &Error{fmt.Sprintf("1 to %d ports (1-65535), comma-separated, such as 53,5353", len(v.slots))}
	if len(parts) > len(v.slots) {
		return want
	}
	out := make([]uint16, len(v.slots))
	for i, f := range parts {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		if err != nil || n == 0 {
			return want
		}
		out[i] = uint16(n)
	}
	copy(v.slots, out)
	return nil
}

// String lists the ports in use, comma-separated.
func (v *Ports) String() string {
	var s []string
	for _, p := range v.slots {
		if p != 0 {
			s = append(s, strconv.Itoa(int(p)))
		}
	}
	return strings.Join(s, ",")
}

// Type implements pflag.Value.
func (v *Ports) Type() string { return "ports" }
