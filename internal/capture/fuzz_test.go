package capture

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader: any input either fails cleanly or yields packets whose Data
// starts with an Ethernet header (or is empty) and never panics.
func FuzzReader(f *testing.F) {
	frames, _ := ethFrames(&testing.T{})
	var b bytes.Buffer
	must(f, EncodePcap(&b, PcapOptions{LinkType: LinkTypeLinuxSLL2, Nanosecond: true}, frames[:2]))
	f.Add(b.Bytes())
	b.Reset()
	must(f, EncodePcapng(&b, NgOptions{BigEndian: true, Interfaces: []NgInterface{{LinkType: LinkTypeEthernet},
		{LinkType: LinkTypeNull, TSResol: 0x80 | 20}, {LinkType: LinkTypeLinuxSLL, FCSLen: 4}}},
		[]TimedFrame{frames[0], {Data: frames[1].Data[10:], Interface: 1, Direction: DirInbound}, {Data: frames[2].Data, Interface: 2}}))
	f.Add(b.Bytes())
	f.Add(gzipped(f, b.Bytes()))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader("fuzz", bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := 0; i < 1000; i++ {
			p, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && p != nil {
					t.Fatal("packet with error")
				}
				return
			}
			if len(p.Data) != 0 && len(p.Data) < 14 && p.LinkType != "EN10MB" {
				t.Fatalf("short normalised frame %d bytes (%s)", len(p.Data), p.LinkType)
			}
			if p.WireLen < len(p.Data) {
				t.Fatalf("wire length %d < data %d", p.WireLen, len(p.Data))
			}
		}
	})
}
