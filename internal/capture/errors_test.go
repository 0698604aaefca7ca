package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// ethFrames returns Ethernet test frames and what the reader returns for them.
func ethFrames(t *testing.T) ([]TimedFrame, []want) {
	var frames []TimedFrame
	var wants []want
	for i, p := range packets() {
		raw, w := frameFor(t, LinkTypeEthernet, i, p)
		w.dir = Direction(i % 3)
		frames = append(frames, TimedFrame{Timestamp: tsOf(i), Data: raw, Direction: w.dir})
		wants = append(wants, w)
	}
	return frames, wants
}

func writeBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readUntilError reads packets and compares them with wants until an error.
func readUntilError(t *testing.T, r *Reader, wants []want) (int, error) {
	t.Helper()
	for i := 0; ; i++ {
		p, err := r.Next()
		if err != nil {
			return i, err
		}
		if i >= len(wants) {
			t.Fatalf("more packets than written")
		}
		w := wants[i]
		if p.Index != i || p.Timestamp != w.ts || !bytes.Equal(p.Data, w.data) || p.Direction != w.dir {
			t.Fatalf("packet %d differs: ts %d dir %v", i, p.Timestamp, p.Direction)
		}
	}
}

// TestTruncatedEverywhere cuts a pcap and a pcapng file after every byte:
// all complete packets before the cut are returned, then io.EOF when the
// cut is on a record boundary, else an error naming file and packet.
func TestTruncatedEverywhere(t *testing.T) {
	for _, ng := range []bool{false, true} {
		frames, wants := ethFrames(t)
		var buf bytes.Buffer
		var err error
		// ends[i] is the offset just after packet i; hdr the size of everything before packet 0.
		var ends []int
		hdr := 0
		if ng {
			hdr = 28 + 32 // SHB, IDB with if_tsresol
			err = EncodePcapng(&buf, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet}}}, frames)
			off := hdr
			for _, f := range frames {
				n := 32 + (len(f.Data)+3)&^3
				if f.Direction != DirUnknown {
					n += 12
				}
				off += n
				ends = append(ends, off)
			}
		} else {
			hdr = 24
			err = EncodePcap(&buf, PcapOptions{LinkType: LinkTypeEthernet, Nanosecond: true}, frames)
			off := hdr
			for _, f := range frames {
				off += 16 + len(f.Data)
				ends = append(ends, off)
			}
			for i := range wants {
				wants[i].dir = DirUnknown
			}
		}
		must(t, err)
		full := buf.Bytes()
		if ends[len(ends)-1] != len(full) {
			t.Fatalf("ng=%v: computed end %d, file %d", ng, ends[len(ends)-1], len(full))
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "capture.pcap")
		for cut := 0; cut < len(full); cut++ {
			writeBytes(t, path, full[:cut])
			r, err := Open(path)
			if cut < hdr && (!ng || cut < 28) {
				if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
					t.Fatalf("ng=%v cut %d: Open error %v", ng, cut, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("ng=%v cut %d: %v", ng, cut, err)
			}
			complete := 0
			for complete < len(ends) && ends[complete] <= cut {
				complete++
			}
			n, err := readUntilError(t, r, wants)
			r.Close()
			if n != complete {
				t.Fatalf("ng=%v cut %d: read %d packets, want %d (err %v)", ng, cut, n, complete, err)
			}
			boundary := cut == hdr || (ng && cut == 28) || (complete > 0 && ends[complete-1] == cut)
			if boundary {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("ng=%v cut %d on a boundary: %v", ng, cut, err)
				}
				continue
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != path || ce.Packet != complete || !errors.Is(err, ErrTruncated) {
				t.Fatalf("ng=%v cut %d: error %v", ng, cut, err)
			}
			if prefix := fmt.Sprintf("%s: packet %d: truncated record", path, complete); !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("ng=%v cut %d: %q does not start with %q", ng, cut, err, prefix)
			}
			// The error is sticky.
			if _, err2 := r.Next(); err2 == nil || errors.Is(err2, io.EOF) {
				t.Fatalf("error not sticky: %v", err2)
			}
		}
	}
}

func TestTruncatedGzip(t *testing.T) {
	frames, wants := ethFrames(t)
	var raw bytes.Buffer
	must(t, EncodePcapng(&raw, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet}}}, frames))
	full := gzipped(t, raw.Bytes())
	path := filepath.Join(t.TempDir(), "cut.pcapng.gz")
	for cut := 1; cut < len(full); cut++ {
		writeBytes(t, path, full[:cut])
		r, err := Open(path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), path+": ") {
				t.Fatalf("cut %d: %v", cut, err)
			}
			continue
		}
		n, err := readUntilError(t, r, wants)
		r.Close()
		if errors.Is(err, io.EOF) || !strings.HasPrefix(err.Error(), fmt.Sprintf("%s: packet %d: ", path, n)) {
			t.Fatalf("cut %d after %d packets: %v", cut, n, err)
		}
		if !errors.Is(err, ErrTruncated) && !strings.Contains(err.Error(), "gzip") && !strings.Contains(err.Error(), "flate") {
			t.Fatalf("cut %d: %v", cut, err)
		}
	}
}

func TestEmptyCaptures(t *testing.T) {
	dir := t.TempDir()
	for name, enc := range map[string]func(io.Writer) error{
		"empty.pcap":    func(w io.Writer) error { return EncodePcap(w, PcapOptions{LinkType: LinkTypeLinuxSLL2}, nil) },
		"empty.pcap.gz": func(w io.Writer) error { return EncodePcap(w, PcapOptions{LinkType: LinkTypeEthernet}, nil) },
		"empty.pcapng":  func(w io.Writer) error { return EncodePcapng(w, NgOptions{Interfaces: []NgInterface{{}}}, nil) },
		"empty-be.pcapng": func(w io.Writer) error {
			return EncodePcapng(w, NgOptions{BigEndian: true, Interfaces: []NgInterface{{}}}, nil)
		},
		"shb-only.pcapng": func(w io.Writer) error { return writeSHBOnly(w) },
		"empty.pcapng.gz": func(w io.Writer) error { return EncodePcapng(w, NgOptions{Interfaces: []NgInterface{{}}}, nil) },
		"radiotap.pcapng": func(w io.Writer) error {
			return EncodePcapng(w, NgOptions{Interfaces: []NgInterface{{LinkType: 127}}}, nil)
		},
		"headeronly.pcapn": func(w io.Writer) error {
			return EncodePcap(w, PcapOptions{LinkType: LinkTypeRaw, BigEndian: true}, nil)
		},
	} {
		path := filepath.Join(dir, name)
		writeEncoded(t, path, enc)
		r, err := Open(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Errorf("%s: %v %v, want io.EOF", name, p, err)
		}
		r.Close()
	}
}

func writeSHBOnly(w io.Writer) error {
	e := ngEncoder{w: w, order: binary.LittleEndian}
	b := e.order.AppendUint32(nil, byteOrderMagic)
	b = e.order.AppendUint16(b, 1)
	b = e.order.AppendUint16(b, 0)
	b = e.order.AppendUint64(b, ^uint64(0))
	return e.block(blockSHB, b)
}

func TestGarbage(t *testing.T) {
	dir := t.TempDir()
	rnd := make([]byte, 4096)
	rand.New(rand.NewSource(1)).Read(rnd)
	gzText := gzipped(t, []byte("this is not a capture\n"))
	cases := map[string]struct {
		data []byte
		want string
		is   error
	}{
		"random.pcap":   {rnd, "not a pcap or pcapng file (magic 0x", ErrNotCapture},
		"text.pcap":     {[]byte("GET / HTTP/1.1\r\n\r\n"), "not a pcap or pcapng file", ErrNotCapture},
		"tiny.pcap":     {[]byte{0xd4, 0xc3}, "only 2 bytes", ErrNotCapture},
		"empty.pcap":    {nil, "empty file", nil},
		"zstd.pcap.zst": {[]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0}, "zstd compressed", ErrNotCapture},
		"text.gz":       {gzText, "not a pcap or pcapng file", ErrNotCapture},
		"badgz.pcap.gz": {[]byte{0x1f, 0x8b, 0, 0, 0, 0}, "gzip:", nil},
		"kuznetzov.pcap": {append([]byte{0x34, 0xcd, 0xb2, 0xa1}, make([]byte, 20)...),
			"modified (Kuznetzov) pcap", ErrNotCapture},
		"v3.pcap": {append([]byte{0xd4, 0xc3, 0xb2, 0xa1, 3, 0, 0, 0}, make([]byte, 16)...), "unsupported pcap version 3.0", nil},
		"badbom.pcapng": {[]byte{0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0},
			"bad byte-order magic", ErrCorrupt},
		"radiotap.pcap": {pcapHeader(127), "unsupported link type 127 (IEEE802_11_RADIOTAP); readable: Ethernet,", ErrUnsupportedLinkType},
		"usb.pcap":      {pcapHeader(189), "unsupported link type 189 (LINKTYPE_189)", ErrUnsupportedLinkType},
	}
	for name, c := range cases {
		path := filepath.Join(dir, name)
		writeBytes(t, path, c.data)
		r, err := Open(path)
		if err == nil {
			r.Close()
			t.Errorf("%s: opened", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q does not name the file or contain %q", name, err, c.want)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v is not %v", name, err, c.is)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing.pcap")); err == nil || !strings.Contains(err.Error(), "missing.pcap") ||
		!errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// A read error is named as such, not taken for an empty file.
	sub := filepath.Join(dir, "a-directory")
	must(t, os.Mkdir(sub, 0o755))
	if _, err := Open(sub); err == nil || !strings.HasPrefix(err.Error(), sub+": ") ||
		!errors.Is(err, syscall.EISDIR) {
		t.Errorf("directory: %v, want %s: ... is a directory", err, sub)
	}
}

func pcapHeader(lt uint32) []byte {
	var b bytes.Buffer
	if err := EncodePcap(&b, PcapOptions{LinkType: uint16(lt)}, nil); err != nil {
		panic(err) // a header alone cannot fail
	}
	return b.Bytes()
}

// gzipped returns b gzip-compressed.
func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err := zw.Write(b)
	must(t, err)
	must(t, zw.Close())
	return z.Bytes()
}

func TestCorruptRecords(t *testing.T) {
	frames, _ := ethFrames(t)
	le := binary.LittleEndian
	pcapng := func(mod func(b []byte) []byte) []byte {
		var b bytes.Buffer
		must(t, EncodePcapng(&b, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet}}}, frames[:2]))
		return mod(b.Bytes())
	}
	firstEPB := 28 + 32 // SHB, IDB with if_tsresol
	cases := map[string]struct {
		data []byte
		n    int // packets returned before the error
		want string
	}{
		"huge-caplen.pcap": {func() []byte {
			var b bytes.Buffer
			must(t, EncodePcap(&b, PcapOptions{LinkType: LinkTypeEthernet}, frames[:2]))
			out := b.Bytes()
			le.PutUint32(out[24+16+len(frames[0].Data)+8:], 0x7fffffff)
			return out
		}(), 1, "packet 1: corrupt record: captured length 2147483647 exceeds the limit 262144"},
		"trailer.pcapng": {pcapng(func(b []byte) []byte {
			n := le.Uint32(b[firstEPB+4:])
			le.PutUint32(b[firstEPB+int(n)-4:], n+4)
			return b
		}), 0, "packet 0: corrupt record: packet block length"},
		"iface.pcapng": {pcapng(func(b []byte) []byte {
			n := le.Uint32(b[firstEPB+4:])
			le.PutUint32(b[firstEPB+int(n)+8:], 3)
			return b
		}), 1, "packet 1: corrupt record: interface 3 not described (section has 1 interfaces)"},
		"caplen.pcapng": {pcapng(func(b []byte) []byte {
			le.PutUint32(b[firstEPB+20:], 5000)
			return b
		}), 0, "packet 0: corrupt record: captured length 5000 exceeds the block"},
		"blocklen.pcapng": {pcapng(func(b []byte) []byte {
			le.PutUint32(b[firstEPB+4:], 6)
			return b
		}), 0, "invalid length 6"},
		"noidb.pcapng": {pcapng(func(b []byte) []byte {
			return append(b[:28], b[firstEPB:]...)
		}), 0, "packet 0: packet block before any interface description block"},
		"version.pcapng": {pcapng(func(b []byte) []byte {
			// A second section of version 2.0.
			sec := append([]byte(nil), b[:28]...)
			le.PutUint16(sec[12:], 2)
			return append(b, sec...)
		}), 2, "packet 2: unsupported pcapng version 2.0"},
	}
	dir := t.TempDir()
	for name, c := range cases {
		path := filepath.Join(dir, name)
		writeBytes(t, path, c.data)
		r, err := Open(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		n, err := countUntilError(t, r, frames)
		r.Close()
		if n != c.n || errors.Is(err, io.EOF) || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: after %d packets: %v; want %d packets then %q", name, n, err, c.n, c.want)
		}
	}
}

// countUntilError reads packets until an error, checking their data.
func countUntilError(t *testing.T, r *Reader, frames []TimedFrame) (int, error) {
	t.Helper()
	for i := 0; ; i++ {
		p, err := r.Next()
		if err != nil {
			return i, err
		}
		if i >= len(frames) || !bytes.Equal(p.Data, frames[i].Data) {
			t.Fatalf("packet %d differs", i)
		}
	}
}

func TestUnsupportedLinkTypeOnPcapngInterface(t *testing.T) {
	frames, wants := ethFrames(t)
	frames = append(frames[:2:2], TimedFrame{Timestamp: 1, Data: []byte{1, 2, 3}, Interface: 1}, frames[2])
	var b bytes.Buffer
	must(t, EncodePcapng(&b, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet}, {LinkType: 127}}}, frames))
	r, err := NewReader("mixed.pcapng", &b)
	must(t, err)
	n, err := readUntilError(t, r, wants)
	want := "mixed.pcapng: packet 2: unsupported link type 127 (IEEE802_11_RADIOTAP) on interface 1; readable:"
	if n != 2 || err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, ErrUnsupportedLinkType) {
		t.Fatalf("after %d packets: %v", n, err)
	}
}

func TestShortLinkHeaders(t *testing.T) {
	var b bytes.Buffer
	must(t, EncodePcapng(&b, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeLinuxSLL},
		{LinkType: LinkTypeLinuxSLL2}, {LinkType: LinkTypeNull}, {LinkType: LinkTypeRaw}, {LinkType: LinkTypeEthernet}}},
		[]TimedFrame{{Data: make([]byte, 10), WireLen: 100}, {Data: make([]byte, 19), Interface: 1},
			{Data: []byte{2, 0}, Interface: 2}, {Data: nil, Interface: 3}, {Data: []byte{1, 2, 3}, Interface: 4}}))
	r, err := NewReader("short", &b)
	must(t, err)
	wantLens := []int{0, 0, 0, 14, 3}
	wantWire := []int{98, 13, 12, 14, 3}
	for i := range wantLens {
		p, err := r.Next()
		must(t, err)
		if len(p.Data) != wantLens[i] || p.WireLen != wantWire[i] {
			t.Errorf("packet %d: len %d wire %d", i, len(p.Data), p.WireLen)
		}
	}
}

// TestBoundedMemory reads 200k packets and checks that reading allocates
// nothing per packet and the heap does not grow with the file.
func TestBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200k-packet file")
	}
	const n = 200_000
	frames, _ := ethFrames(t)
	dir := t.TempDir()
	for _, name := range []string{"big.pcap", "big.pcapng", "big.pcapng.gz"} {
		path := filepath.Join(dir, name)
		must(t, writeFile(path, func(w io.Writer) error {
			all := make([]TimedFrame, 0, 1000)
			for i := 0; i < n; i += 1000 {
				all = all[:0]
				for j := i; j < i+1000; j++ {
					f := frames[j%len(frames)]
					f.Timestamp = 1700000000_000000000 + int64(j)*1001
					all = append(all, f)
				}
				var err error
				if strings.Contains(name, "pcapng") {
					err = encodeNgPackets(w, i == 0, all)
				} else {
					err = encodePcapPackets(w, i == 0, all)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}))
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := Open(path)
		must(t, err)
		count, bytesSeen := 0, 0
		var last int64
		for {
			p, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			must(t, err)
			if p.Timestamp != 1700000000_000000000+int64(count)*1001 || p.Timestamp <= last {
				t.Fatalf("packet %d timestamp %d", count, p.Timestamp)
			}
			last = p.Timestamp
			count++
			bytesSeen += len(p.Data)
		}
		runtime.ReadMemStats(&after)
		r.Close()
		alloc := after.TotalAlloc - before.TotalAlloc
		growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("%s: %d packets, %d bytes of frames, %d bytes file; allocated %d bytes in total, heap %+d",
			name, count, bytesSeen, r.Size(), alloc, growth)
		if count != n {
			t.Fatalf("%s: read %d packets", name, count)
		}
		// Open allocates buffers (bufio 64 KiB x2, gzip state, record buffer);
		// a single allocation per packet would be > 3 MB here.
		if alloc > 1<<20 {
			t.Errorf("%s: reading allocated %d bytes", name, alloc)
		}
		if growth > 1<<20 {
			t.Errorf("%s: heap grew by %d bytes", name, growth)
		}
	}
}

// encodePcapPackets / encodeNgPackets write a file in chunks: the header
// only with the first chunk.
func encodePcapPackets(w io.Writer, first bool, frames []TimedFrame) error {
	var b bytes.Buffer
	if err := EncodePcap(&b, PcapOptions{LinkType: LinkTypeEthernet, Nanosecond: true}, frames); err != nil {
		return err
	}
	out := b.Bytes()
	if !first {
		out = out[24:]
	}
	_, err := w.Write(out)
	return err
}

func encodeNgPackets(w io.Writer, first bool, frames []TimedFrame) error {
	var b bytes.Buffer
	if err := EncodePcapng(&b, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet}}}, frames); err != nil {
		return err
	}
	out := b.Bytes()
	if !first {
		out = out[28+32:]
	}
	_, err := w.Write(out)
	return err
}

func TestNextDoesNotAllocate(t *testing.T) {
	frames, _ := ethFrames(t)
	for _, ng := range []bool{false, true} {
		var b bytes.Buffer
		many := make([]TimedFrame, 0, 600)
		for i := 0; i < 100; i++ {
			many = append(many, frames...)
		}
		if ng {
			must(t, EncodePcapng(&b, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet}}}, many))
		} else {
			must(t, EncodePcap(&b, PcapOptions{LinkType: LinkTypeEthernet}, many))
		}
		r, err := NewReader("mem", &b)
		must(t, err)
		_, _ = r.Next() // size the buffer
		allocs := testing.AllocsPerRun(500, func() {
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("ng=%v: %v allocations per Next", ng, allocs)
		}
	}
}

func TestBytesReadProgress(t *testing.T) {
	frames, _ := ethFrames(t)
	path := filepath.Join(t.TempDir(), "p.pcapng.gz")
	must(t, WritePcapng(path, []uint16{LinkTypeEthernet}, frames))
	r, err := Open(path)
	must(t, err)
	defer r.Close()
	st, _ := os.Stat(path)
	if r.Size() != st.Size() || r.BytesRead() <= 0 {
		t.Fatalf("size %d read %d", r.Size(), r.BytesRead())
	}
	for {
		if _, err := r.Next(); err != nil {
			break
		}
	}
	if r.BytesRead() != r.Size() {
		t.Errorf("at the end read %d of %d", r.BytesRead(), r.Size())
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("%v", err)
	}
	r.Close()
	if _, err := r.Next(); err == nil {
		t.Error("Next after Close")
	}
}

// TestHugeLengthSmallFile: a length field near the limits in a tiny file
// is a truncation error, without allocating the declared size.
func TestHugeLengthSmallFile(t *testing.T) {
	frames, _ := ethFrames(t)
	le := binary.LittleEndian
	var ng bytes.Buffer
	must(t, EncodePcapng(&ng, NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet}}}, frames[:1]))
	ngb := ng.Bytes()
	le.PutUint32(ngb[60+4:], 60<<20) // EPB block length 60 MiB
	var pc bytes.Buffer
	must(t, EncodePcap(&pc, PcapOptions{LinkType: LinkTypeEthernet, SnapLen: 50 << 20}, frames[:1]))
	pcb := pc.Bytes()
	le.PutUint32(pcb[24+8:], 50<<20) // caplen 50 MiB, allowed by the snap length
	le.PutUint32(pcb[24+12:], 50<<20)
	for name, data := range map[string][]byte{"ng": ngb, "pcap": pcb} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r, err := NewReader(name, bytes.NewReader(data))
		must(t, err)
		_, err = r.Next()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTruncated) || !strings.HasPrefix(err.Error(), name+": packet 0: truncated record: file ends") {
			t.Errorf("%s: %v", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
			t.Errorf("%s: allocated %d bytes for a %d-byte file", name, alloc, len(data))
		}
	}
}
