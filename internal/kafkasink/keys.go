package kafkasink

import (
	"net/netip"
	"strconv"

	"github.com/rttscope/rttscope/internal/events"
)

// Message keys: Kafka's default partitioner puts the messages of one key
// in one partition, in the order they were produced, so a flow's records
// (both directions: samples, opening, closing, summary) stay in order.

// flowKey appends the key of f's connection: protocol and both endpoints,
// the lower first, so both directions have one key; the flow number when
// the addresses are dropped.
func flowKey(b []byte, f *events.Flow) []byte {
	if f.AddressesDropped() {
		return strconv.AppendUint(append(b, "flow "...), f.ID, 10)
	}
	a, c := f.Src, f.Dst
	if x := a.IP.Compare(c.IP); x > 0 || x == 0 && a.Port > c.Port {
		a, c = c, a
	}
	b = append(b, f.Proto.String()...)
	b = append(b, ' ')
	b = netip.AddrPortFrom(a.IP, a.Port).AppendTo(b)
	b = append(b, ' ')
	return netip.AddrPortFrom(c.IP, c.Port).AppendTo(b)
}

// prefixKey appends the key of f's pair of site prefixes (/24 for IPv4,
// /48 for IPv6), the lower first: the flows between two sites share a
// partition, and each flow's records stay in order.
func prefixKey(b []byte, f *events.Flow) []byte {
	if f.AddressesDropped() {
		return flowKey(b, f)
	}
	p, q := sitePrefix(f.Src.IP), sitePrefix(f.Dst.IP)
	if p.Addr().Compare(q.Addr()) > 0 {
		p, q = q, p
	}
	b = p.AppendTo(b)
	b = append(b, ' ')
	return q.AppendTo(b)
}

func sitePrefix(a netip.Addr) netip.Prefix {
	bits := 48
	if a.Is4() || a.Is4In6() {
		a, bits = a.Unmap(), 24
	}
	p, _ := a.Prefix(bits) // cannot fail for a valid address and these lengths
	return p
}

// aggregateKey appends the key of an aggregated record: its prefix (or
// the number standing in for it).
func aggregateKey(b []byte, a *events.Aggregate) []byte {
	if !a.Prefix.IsValid() {
		return strconv.AppendUint(append(b, "prefix "...), a.PrefixID, 10)
	}
	return a.Prefix.AppendTo(b)
}
