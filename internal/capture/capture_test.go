package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rttscope/rttscope/internal/pktcraft"
)

var (
	macA = net.HardwareAddr{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01}
	macB = net.HardwareAddr{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x02}
)

// packets returns a mix of L3 packets (as Ethernet packet descriptions).
func packets() []pktcraft.Packet {
	a4, b4 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	a6, b6 := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	return []pktcraft.Packet{
		{SrcMAC: macA, DstMAC: macB, Src: a4, Dst: b4, TCP: &pktcraft.TCP{SrcPort: 1234, DstPort: 80, SYN: true, TSval: 1}},
		{SrcMAC: macB, DstMAC: macA, Src: b4, Dst: a4, TCP: &pktcraft.TCP{SrcPort: 80, DstPort: 1234, SYN: true, ACK: true, TSval: 2, TSecr: 1, Payload: []byte("x")}},
		{SrcMAC: macA, DstMAC: macB, Src: a6, Dst: b6, IPv6ExtHeaders: pktcraft.DestOptsChain(2),
			TCP: &pktcraft.TCP{SrcPort: 5, DstPort: 6, ACK: true, Payload: bytes.Repeat([]byte{7}, 301)}},
		{SrcMAC: macB, DstMAC: macA, Src: b6, Dst: a6, ICMPEcho: &pktcraft.ICMPEcho{Reply: true, ID: 9, Seq: 1}},
		{SrcMAC: macA, DstMAC: macB, Src: a4, Dst: b4, ICMPEcho: &pktcraft.ICMPEcho{ID: 9, Seq: 2, Payload: []byte("ping")}},
		{SrcMAC: macB, DstMAC: macA, Src: b6, Dst: a6, UDP: &pktcraft.UDP{SrcPort: 53, DstPort: 5353, Payload: []byte{1, 2, 3}}},
	}
}

// Timestamps with every digit used, before and after 2038 (uint32 seconds).
func tsOf(i int) int64 {
	if i%2 == 1 {
		return 4102444800_000000000 + int64(i)*1_000_001_001 + 987_654_321 // 2100-01-01
	}
	return 1700000000_123456789 + int64(i)*1_000_001_001
}

type want struct {
	ts      int64
	data    []byte
	wireLen int
	dir     Direction
	src     [6]byte
	lt      string
	iface   int
}

func synth(src net.HardwareAddr, etherType uint16, l3 []byte) []byte {
	b := make([]byte, 14, 14+len(l3))
	copy(b[6:], src)
	binary.BigEndian.PutUint16(b[12:], etherType)
	return append(b, l3...)
}

func etherTypeOf(l3 []byte) uint16 {
	if l3[0]>>4 == 6 {
		return 0x86dd
	}
	return 0x0800
}

var sllTypes = []uint8{pktcraft.PacketOutgoing, pktcraft.PacketHost, pktcraft.PacketBroadcast,
	pktcraft.PacketMulticast, pktcraft.PacketOtherHost, 7 /* PACKET_KERNEL: unknown */}

// frameFor encodes packet i of p in link type lt and returns what the
// reader must produce for it.
func frameFor(t *testing.T, lt uint16, i int, p pktcraft.Packet) ([]byte, want) {
	t.Helper()
	eth := p.MustBytes()
	p.NoEthernet = true
	l3 := p.MustBytes()
	w := want{ts: tsOf(i), lt: LinkTypeName(lt)}
	var raw []byte
	switch lt {
	case LinkTypeEthernet:
		raw, w.data = eth, eth
		copy(w.src[:], eth[6:12])
	case LinkTypeRaw, LinkTypeDLTRaw12, LinkTypeDLTRaw14, LinkTypeIPv4, LinkTypeIPv6:
		raw, w.data = l3, synth(nil, etherTypeOf(l3), l3)
	case LinkTypeNull:
		af := uint32(2)
		if l3[0]>>4 == 6 {
			af = []uint32{10, 24, 28, 30}[i%4]
		}
		raw, w.data = pktcraft.Null(af, i%2 == 0, l3), synth(nil, etherTypeOf(l3), l3)
	case LinkTypeLoop:
		raw, w.data = pktcraft.Null(0, true, l3), synth(nil, etherTypeOf(l3), l3)
	case LinkTypeLinuxSLL, LinkTypeLinuxSLL2:
		pt := sllTypes[i%len(sllTypes)]
		c := pktcraft.Cooked{PacketType: pt, Addr: p.SrcMAC, IfIndex: 3}
		if i%3 == 2 {
			c.Addr = nil // e.g. a tun device: no address
		}
		if lt == LinkTypeLinuxSLL {
			raw = c.SLL(l3)
		} else {
			raw = c.SLL2(l3)
		}
		w.data = synth(c.Addr, etherTypeOf(l3), l3)
		copy(w.src[:], c.Addr)
		w.dir = sllDirection(uint16(pt))
	default:
		t.Fatalf("no encoder for link type %d", lt)
	}
	w.wireLen = len(w.data)
	return raw, w
}

func check(t *testing.T, r *Reader, wants []want) {
	t.Helper()
	for i, w := range wants {
		p, err := r.Next()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if p.Index != i || p.Timestamp != w.ts || !bytes.Equal(p.Data, w.data) || p.WireLen != w.wireLen ||
			p.Direction != w.dir || p.SrcMAC != w.src || p.LinkType != w.lt || p.Interface != w.iface {
			t.Fatalf("packet %d:\n got index %d ts %d wire %d dir %v src %x lt %s if %d\n% x\nwant ts %d wire %d dir %v src %x lt %s if %d\n% x",
				i, p.Index, p.Timestamp, p.WireLen, p.Direction, p.SrcMAC, p.LinkType, p.Interface, p.Data,
				w.ts, w.wireLen, w.dir, w.src, w.lt, w.iface, w.data)
		}
	}
	if p, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after %d packets: %v, %v; want io.EOF", len(wants), p, err)
	}
	if p, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("second Next at end: %v, %v", p, err)
	}
}

var allLinkTypes = []uint16{LinkTypeEthernet, LinkTypeRaw, LinkTypeDLTRaw12, LinkTypeDLTRaw14,
	LinkTypeLinuxSLL, LinkTypeLinuxSLL2, LinkTypeNull, LinkTypeLoop}

func TestPcapRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, lt := range allLinkTypes {
		for _, ns := range []bool{false, true} {
			for _, be := range []bool{false, true} {
				for _, gz := range []bool{false, true} {
					name := fmt.Sprintf("%s-ns%v-be%v.pcap", LinkTypeName(lt), ns, be)
					if lt == LinkTypeDLTRaw12 || lt == LinkTypeDLTRaw14 {
						name = fmt.Sprintf("dlt%d-", lt) + name
					}
					if gz {
						name += ".gz"
					}
					t.Run(name, func(t *testing.T) {
						var frames []TimedFrame
						var wants []want
						for i, p := range packets() {
							raw, w := frameFor(t, lt, i, p)
							if !ns {
								w.ts -= w.ts % 1000
							}
							frames = append(frames, TimedFrame{Timestamp: tsOf(i), Data: raw})
							wants = append(wants, w)
						}
						path := filepath.Join(dir, name)
						writeEncoded(t, path, func(w io.Writer) error {
							return EncodePcap(w, PcapOptions{LinkType: lt, Nanosecond: ns, BigEndian: be}, frames)
						})
						r, err := Open(path)
						if err != nil {
							t.Fatal(err)
						}
						defer r.Close()
						if r.Format() != "pcap" || r.Compressed() != gz {
							t.Errorf("format %s compressed %v", r.Format(), r.Compressed())
						}
						check(t, r, wants)
						if st, _ := os.Stat(path); r.Size() != st.Size() || r.BytesRead() != st.Size() {
							t.Errorf("size %d bytes read %d, file %d", r.Size(), r.BytesRead(), st.Size())
						}
					})
				}
			}
		}
	}
}

// writeEncoded writes a file through enc, gzip-compressed if path ends in .gz.
func writeEncoded(t *testing.T, path string, enc func(io.Writer) error) {
	t.Helper()
	if err := writeFile(path, enc); err != nil {
		t.Fatal(err)
	}
}

func TestWritePcapAndPcapng(t *testing.T) {
	dir := t.TempDir()
	var frames []TimedFrame
	var wants []want
	for i, p := range packets() {
		raw, w := frameFor(t, LinkTypeEthernet, i, p)
		frames = append(frames, TimedFrame{Timestamp: tsOf(i), Data: raw, Direction: Direction(i % 3)})
		wants = append(wants, w)
	}
	for _, name := range []string{"a.pcap", "a.pcap.gz", "ns.pcap", "a.pcapng", "a.pcapng.gz"} {
		path := filepath.Join(dir, name)
		var err error
		ws := append([]want(nil), wants...)
		switch {
		case strings.HasPrefix(name, "a.pcapng"):
			err = WritePcapng(path, []uint16{LinkTypeEthernet}, frames)
			for i := range ws {
				ws[i].dir = Direction(i % 3)
			}
		case name == "ns.pcap":
			err = WritePcap(path, LinkTypeEthernet, true, frames)
		default:
			err = WritePcap(path, LinkTypeEthernet, false, frames)
			for i := range ws {
				ws[i].ts -= ws[i].ts % 1000
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		check(t, r, ws)
		r.Close()
	}
	got, err := ReadAll(filepath.Join(dir, "a.pcapng"))
	if err != nil || len(got) != len(frames) || !bytes.Equal(got[2].Data, frames[2].Data) || got[1].Direction != DirInbound {
		t.Errorf("ReadAll: %d packets, %v", len(got), err)
	}
}

func TestPcapngInterfacesAndResolutions(t *testing.T) {
	ifaces := []NgInterface{
		{LinkType: LinkTypeEthernet, TSResol: 9},
		{LinkType: LinkTypeLinuxSLL2, TSResol: 6},                   // µs, the default (no option written)
		{LinkType: LinkTypeRaw, TSResol: 0x80 | 32},                 // 2^-32 s
		{LinkType: LinkTypeLinuxSLL, TSResol: 3, TSOffset: 7},       // ms, with if_tsoffset
		{LinkType: LinkTypeIPv6, TSResol: 12, TSOffset: 1699999000}, // ps: needs an offset to fit
		{LinkType: LinkTypeNull, TSResol: 0x80 | 10},                // ~ms, binary
	}
	for _, be := range []bool{false, true} {
		for _, old := range []bool{false, true} {
			t.Run(fmt.Sprintf("be%v-oldblock%v", be, old), func(t *testing.T) {
				var frames []TimedFrame
				var wants []want
				for i, p := range packets() {
					for k, ifc := range ifaces {
						if ifc.LinkType == LinkTypeIPv6 && !p.Src.Is6() {
							continue
						}
						n := len(frames)
						raw, w := frameFor(t, ifc.LinkType, n, p)
						w.iface = k
						if ifc.TSResol == 12 {
							w.ts = 1700000000_123456789 + int64(n)*1001
						}
						orig := w.ts
						switch ifc.TSResol {
						case 6:
							w.ts -= w.ts % 1e3
						case 3:
							w.ts -= w.ts % 1e6
						case 0x80 | 10:
							// 2^-10 s units, written rounding up, read rounding down.
							u := ((w.ts%1e9)<<10 + 1e9 - 1) / 1e9
							w.ts = w.ts - w.ts%1e9 + (u*1e9)>>10
						}
						// EPB direction wins over the SLL packet type.
						dir := Direction(i % 3)
						if dir != DirUnknown {
							w.dir = dir
						}
						frames = append(frames, TimedFrame{Timestamp: orig, Data: raw, Direction: dir, Interface: k})
						wants = append(wants, w)
					}
				}
				var buf bytes.Buffer
				if err := EncodePcapng(&buf, NgOptions{Interfaces: ifaces, BigEndian: be, UseOldPacketBlock: old}, frames); err != nil {
					t.Fatal(err)
				}
				r, err := NewReader("mem.pcapng", &buf)
				if err != nil {
					t.Fatal(err)
				}
				check(t, r, wants)
			})
		}
	}
}

func TestNgTimestampConversion(t *testing.T) {
	cases := []struct {
		ifc  ngIface
		ts   uint64
		want int64
	}{
		{ngIface{exp: 9}, 1700000000_123456789, 1700000000_123456789},
		{ngIface{exp: 6}, 1700000000_123456, 1700000000_123456000},
		{ngIface{exp: 0}, 5, 5e9},
		{ngIface{exp: 19}, 1_0000000000_000000009, 1e9}, // 10^-19 s units, truncated
		{ngIface{exp: 12, tsOffset: -1}, 2_000000000_123, 1_000000000},
		{ngIface{binary: true, exp: 0}, 3, 3e9},
		{ngIface{binary: true, exp: 1}, 3, 1_500000000},
		{ngIface{binary: true, exp: 32}, 1<<32 | 1<<31, 1_500000000},
		{ngIface{binary: true, exp: 32}, 1, 0},         // 0.23 ns
		{ngIface{binary: true, exp: 32}, 3, 0},         // 0.70 ns, truncated like libpcap
		{ngIface{binary: true, exp: 32}, 5, 1},         // 1.16 ns
		{ngIface{binary: true, exp: 63}, 1 << 62, 5e8}, // no overflow in frac*1e9
	}
	for _, c := range cases {
		if got := c.ifc.toNanos(c.ts); got != c.want {
			t.Errorf("%+v ts %d: got %d want %d", c.ifc, c.ts, got, c.want)
		}
	}
}

// TestPcapngBlocks covers simple packet blocks, skipped block types, FCS
// removal and several sections with different byte orders in one file.
func TestPcapngBlocks(t *testing.T) {
	p := packets()[0]
	eth := p.MustBytes()
	fcs := append(append([]byte(nil), eth...), 0xde, 0xad, 0xbe, 0xef)

	var buf bytes.Buffer
	// Section 1, little-endian: Ethernet interface with a 4-byte FCS.
	must(t, EncodePcapng(&buf, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet, FCSLen: 4}}},
		[]TimedFrame{{Timestamp: 10, Data: fcs}}))
	le := ngEncoder{w: &buf, order: binary.LittleEndian}
	must(t, le.block(0x00000005, make([]byte, 20))) // interface statistics
	must(t, le.block(0x40000bad, []byte("custom!!")))
	// Simple packet block: no timestamp, interface 0, FCS removed too.
	spb := le.order.AppendUint32(nil, uint32(len(fcs)))
	spb = append(spb, fcs...)
	spb = append(spb, make([]byte, (4-len(fcs)%4)%4)...)
	must(t, le.block(blockSPB, spb))
	// Section 2, big-endian, raw IP.
	p.NoEthernet = true
	l3 := p.MustBytes()
	must(t, EncodePcapng(&buf, NgOptions{BigEndian: true, Interfaces: []NgInterface{{LinkType: LinkTypeRaw}}},
		[]TimedFrame{{Timestamp: 20, Data: l3, Direction: DirOutbound}}))
	var src [6]byte
	copy(src[:], macA)
	wants := []want{
		{ts: 10, data: eth, wireLen: len(eth), src: src, lt: "EN10MB"},
		{ts: 0, data: eth, wireLen: len(eth), src: src, lt: "EN10MB"},
		{ts: 20, data: synth(nil, 0x0800, l3), wireLen: 14 + len(l3), dir: DirOutbound, lt: "RAW"},
	}
	r, err := NewReader("blocks.pcapng", bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	check(t, r, wants)

	// pcap with the FCS length in the link-type field.
	var pb bytes.Buffer
	must(t, EncodePcap(&pb, PcapOptions{LinkType: LinkTypeEthernet, FCSLen: 4}, []TimedFrame{{Timestamp: 1e9, Data: fcs}}))
	r, err = NewReader("fcs.pcap", &pb)
	if err != nil {
		t.Fatal(err)
	}
	check(t, r, []want{{ts: 1e9, data: eth, wireLen: len(eth), src: src, lt: "EN10MB"}})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
