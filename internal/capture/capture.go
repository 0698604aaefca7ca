// Package capture reads pcap and pcapng files (optionally gzip compressed)
// as a stream of packets normalised to Ethernet frames, for
// `rttscope replay`, and writes such files for tests.
//
// The reader is written from the file format specifications rather than on
// top of gopacket's pcapgo readers, which convert binary (2^-n) pcapng
// timestamp resolutions inexactly, read epb_flags as little-endian in
// big-endian sections, and do not report which record failed. The writers
// use pcapgo, so tests check this reader against an independent encoder.
//
// Memory use is bounded by the largest record: Next reuses one buffer and
// one Packet and does not allocate.
package capture

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Direction of a packet relative to the capturing host.
type Direction uint8

// Directions, numbered as the pcapng epb_flags direction bits.
const (
	DirUnknown  Direction = 0
	DirInbound  Direction = 1
	DirOutbound Direction = 2
)

func (d Direction) String() string {
	switch d {
	case DirInbound:
		return "inbound"
	case DirOutbound:
		return "outbound"
	}
	return "unknown"
}

// Packet is one captured frame. It and its Data are owned by the Reader and
// are valid until the next call to Next.
type Packet struct {
	Index     int   // 0-based packet index in the file
	Timestamp int64 // Unix ns; 0 for pcapng simple packet blocks (no time)
	// Data is the frame normalised to Ethernet: raw IP, NULL/loopback and
	// Linux cooked (SLL, SLL2) frames get a synthetic 14-byte Ethernet
	// header with the right EtherType, a zero destination MAC and a zero
	// source MAC (or the SLL/SLL2 link-layer address when it is 6 bytes).
	// A known trailing FCS is removed. Frames too short to hold their own
	// link-layer header have an empty Data.
	Data []byte
	// WireLen is the original length of the normalised frame: the recorded
	// wire length adjusted by the same difference as Data, so
	// WireLen > len(Data) exactly when the capture truncated the packet.
	WireLen int
	// Direction comes from the pcapng epb_flags (or pack_flags) when they
	// give one, else from the SLL/SLL2 packet type: outgoing -> Outbound;
	// host, broadcast, multicast, otherhost -> Inbound.
	Direction Direction
	// SrcMAC is the source address of an Ethernet frame, or the SLL/SLL2
	// link-layer address when it is 6 bytes long (for --local-mac); zero
	// otherwise.
	SrcMAC [6]byte
	// LinkType is the libpcap name of the frame's original link type
	// (EN10MB, LINUX_SLL, LINUX_SLL2, RAW, IPV4, IPV6, NULL, LOOP).
	LinkType string
	// Interface is the pcapng interface ID (0 for pcap).
	Interface int
}

// Link-layer header types (LINKTYPE_* values) the reader understands.
const (
	LinkTypeNull      uint16 = 0   // BSD loopback, AF in host byte order
	LinkTypeEthernet  uint16 = 1   // EN10MB
	LinkTypeDLTRaw12  uint16 = 12  // DLT_RAW on most platforms, seen in some files
	LinkTypeDLTRaw14  uint16 = 14  // DLT_RAW on OpenBSD
	LinkTypeRaw       uint16 = 101 // raw IPv4/IPv6
	LinkTypeLoop      uint16 = 108 // OpenBSD loopback, AF in network byte order
	LinkTypeLinuxSLL  uint16 = 113
	LinkTypeIPv4      uint16 = 228
	LinkTypeIPv6      uint16 = 229
	LinkTypeLinuxSLL2 uint16 = 276
)

// LinkTypeName returns the libpcap name of a link type, or "LINKTYPE_<n>".
func LinkTypeName(lt uint16) string {
	switch lt {
	case LinkTypeNull:
		return "NULL"
	case LinkTypeEthernet:
		return "EN10MB"
	case LinkTypeDLTRaw12, LinkTypeDLTRaw14, LinkTypeRaw:
		return "RAW"
	case LinkTypeLoop:
		return "LOOP"
	case LinkTypeLinuxSLL:
		return "LINUX_SLL"
	case LinkTypeIPv4:
		return "IPV4"
	case LinkTypeIPv6:
		return "IPV6"
	case LinkTypeLinuxSLL2:
		return "LINUX_SLL2"
	}
	if n, ok := otherLinkTypes[lt]; ok {
		return n
	}
	return fmt.Sprintf("LINKTYPE_%d", lt)
}

// Names for common link types we do not read, for error messages.
var otherLinkTypes = map[uint16]string{
	6: "IEEE802_5", 9: "PPP", 50: "PPP_HDLC", 104: "C_HDLC", 105: "IEEE802_11",
	127: "IEEE802_11_RADIOTAP", 192: "PPI", 195: "IEEE802_15_4",
	220: "USB_LINUX_MMAPPED", 249: "NETLINK", 253: "NETANALYZER",
	147: "USER0", 239: "NFLOG", 187: "BLUETOOTH_HCI_H4", 197: "ERF",
}

// supportedLinkTypes ends the error for a link type not in Supported.
const supportedLinkTypes = "readable: Ethernet, Linux cooked (SLL, SLL2), raw IP, BSD loopback (NULL, LOOP)"

// Supported reports whether Open/Next can normalise frames of link type lt.
func Supported(lt uint16) bool {
	switch lt {
	case LinkTypeNull, LinkTypeEthernet, LinkTypeDLTRaw12, LinkTypeDLTRaw14, LinkTypeRaw,
		LinkTypeLoop, LinkTypeLinuxSLL, LinkTypeIPv4, LinkTypeIPv6, LinkTypeLinuxSLL2:
		return true
	}
	return false
}

// Errors wrapped by *Error; test with errors.Is.
var (
	ErrNotCapture          = errors.New("not a pcap or pcapng file")
	ErrTruncated           = errors.New("truncated record")
	ErrCorrupt             = errors.New("corrupt record")
	ErrUnsupportedLinkType = errors.New("unsupported link type")
)

// Error is returned for every failure; it names the file and, once the
// file header is read, the index of the packet that could not be read.
type Error struct {
	File   string
	Packet int   // -1 for errors in the file header
	Offset int64 // offset in the (uncompressed) stream where the failing record starts
	Err    error
}

func (e *Error) Error() string {
	if e.Packet < 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: packet %d: %v (at byte offset %d)", e.File, e.Packet, e.Err, e.Offset)
}

func (e *Error) Unwrap() error { return e.Err }

const (
	// headroom is kept in front of every record in the buffer so that a
	// synthetic Ethernet header can replace a shorter link-layer header
	// (or none) in place.
	headroom = 16
	// maxSnap is libpcap's MAXIMUM_SNAPLEN: records up to it are always
	// accepted, larger ones only up to the file's snap length.
	maxSnap = 262144
	// maxRecord bounds any record or block read into memory.
	maxRecord = 64 << 20
)

type format uint8

const (
	formatPcap format = iota + 1
	formatPcapng
)

// Reader streams packets from a capture file.
type Reader struct {
	name   string
	file   *os.File
	ownsF  bool
	cnt    countingReader
	gz     *gzip.Reader
	br     *bufio.Reader
	size   int64
	off    int64 // offset of the next unread byte in the uncompressed stream
	format format

	// pcap
	order    binary.ByteOrder
	nano     bool
	snaplen  uint32
	linkType uint16
	fcsLen   int

	// pcapng
	ng ngState

	hdr      [16]byte
	buf      []byte
	lastRead int // bytes the last read call got
	pkt      Packet
	index    int
	err      error // sticky: once set, Next returns it again
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Open opens a pcap or pcapng file, detected by its magic number, gzip
// compressed or not. "-" reads standard input. Errors name the file.
func Open(path string) (*Reader, error) {
	r := &Reader{name: path, size: -1}
	if path == "-" {
		r.name = "<stdin>"
		r.file = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err // *PathError already names the file
		}
		r.file, r.ownsF = f, true
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			r.size = st.Size()
		}
	}
	if err := r.init(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// NewReader reads a capture from an io.Reader; name is used in errors.
// Size reports -1.
func NewReader(name string, rd io.Reader) (*Reader, error) {
	r := &Reader{name: name, size: -1}
	r.cnt.r = rd
	if err := r.initStream(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) init() error {
	r.cnt.r = r.file
	return r.initStream()
}

func (r *Reader) initStream() error {
	raw := bufio.NewReaderSize(&r.cnt, 64<<10)
	magic, err := raw.Peek(6)
	switch {
	case len(magic) == 0 && err != nil && !errors.Is(err, io.EOF):
		return r.headerErr(err) // a directory, an I/O error
	case len(magic) == 0:
		return r.headerErr(errors.New("empty file"))
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		gz, err := gzip.NewReader(raw)
		if err != nil {
			return r.headerErr(fmt.Errorf("gzip: %w", err))
		}
		r.gz = gz
		r.br = bufio.NewReaderSize(gz, 64<<10)
	default:
		if what := otherCompression(magic); what != "" {
			return r.headerErr(fmt.Errorf("%w: looks %s compressed; only gzip is read directly", ErrNotCapture, what))
		}
		r.br = raw
	}
	magic, _ = r.br.Peek(4)
	if len(magic) < 4 {
		if len(magic) == 0 && r.gz != nil {
			return r.headerErr(errors.New("empty file (after gunzip)"))
		}
		return r.headerErr(fmt.Errorf("%w: file is only %d bytes long", ErrNotCapture, len(magic)))
	}
	switch m := binary.LittleEndian.Uint32(magic); m {
	case 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1:
		r.format = formatPcap
		return r.readPcapHeader()
	case 0x0a0d0d0a:
		r.format = formatPcapng
		return r.readNgFirstSection()
	case 0xa1b2cd34, 0x34cdb2a1:
		return r.headerErr(fmt.Errorf("%w: modified (Kuznetzov) pcap format is not supported", ErrNotCapture))
	default:
		return r.headerErr(fmt.Errorf("%w (magic %#08x)", ErrNotCapture, binary.BigEndian.Uint32(magic)))
	}
}

func otherCompression(m []byte) string {
	switch {
	case len(m) >= 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd:
		return "zstd"
	case len(m) >= 6 && string(m[:6]) == "\xfd7zXZ\x00":
		return "xz"
	case len(m) >= 3 && string(m[:3]) == "BZh":
		return "bzip2"
	case len(m) >= 4 && string(m[:4]) == "\x04\x22\x4d\x18":
		return "lz4"
	}
	return ""
}

func (r *Reader) headerErr(err error) error {
	return &Error{File: r.name, Packet: -1, Err: err}
}

func (r *Reader) recordErr(start int64, err error) error {
	return &Error{File: r.name, Packet: r.index, Offset: start, Err: err}
}

// Next returns the next packet, or io.EOF after the last one. After any
// other error the same error is returned again.
func (r *Reader) Next() (*Packet, error) {
	if r.err != nil {
		return nil, r.err
	}
	var err error
	if r.format == formatPcap {
		err = r.nextPcap()
	} else {
		err = r.nextNg()
	}
	if err != nil {
		r.err = err
		return nil, err
	}
	r.pkt.Index = r.index
	r.index++
	return &r.pkt, nil
}

// Close closes the file (standard input is left open).
func (r *Reader) Close() error {
	var err error
	if r.gz != nil {
		_ = r.gz.Close() // only checks the trailer, which reads already did
	}
	if r.ownsF && r.file != nil {
		err = r.file.Close()
		r.file = nil
	}
	if r.err == nil {
		r.err = &Error{File: r.name, Packet: r.index, Err: os.ErrClosed}
	}
	return err
}

// BytesRead is how many bytes of the file (as stored, i.e. compressed for
// gzip) have been consumed, including read-ahead. With Size it gives the
// progress of a replay.
func (r *Reader) BytesRead() int64 { return r.cnt.n }

// Size is the size of the file as stored, or -1 when unknown (a pipe).
func (r *Reader) Size() int64 { return r.size }

// Name is the file name used in errors.
func (r *Reader) Name() string { return r.name }

// Format is "pcap" or "pcapng".
func (r *Reader) Format() string {
	if r.format == formatPcap {
		return "pcap"
	}
	return "pcapng"
}

// Compressed reports whether the file is gzip compressed.
func (r *Reader) Compressed() bool { return r.gz != nil }

// read reads exactly len(p) bytes. It returns io.EOF only if no byte was
// available, and a truncation error naming what was being read otherwise.
func (r *Reader) read(p []byte, what string) error {
	n, err := io.ReadFull(r.br, p)
	r.off += int64(n)
	r.lastRead = n
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		if r.gz != nil && n == 0 {
			return fmt.Errorf("%w: compressed stream ends early", ErrTruncated)
		}
		return fmt.Errorf("%w: file ends %d bytes into the %d-byte %s", ErrTruncated, n, len(p), what)
	default:
		return err
	}
}

// discard skips n bytes.
func (r *Reader) discard(n int64, what string) error {
	for n > 0 {
		step := int(min(n, 1<<30))
		d, err := r.br.Discard(step)
		r.off += int64(d)
		n -= int64(d)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: file ends inside a %s", ErrTruncated, what)
			}
			return err
		}
	}
	return nil
}

// readRecord reads n bytes into r.buf[headroom:] and returns r.buf[:headroom+n].
// Lengths come from the file, so beyond growStep the buffer grows only as
// bytes actually arrive: a 40-byte file cannot make the reader allocate
// 64 MiB.
func (r *Reader) readRecord(n int, what string) ([]byte, error) {
	const growStep = 1 << 20
	if n <= growStep || cap(r.buf) >= headroom+n {
		buf := r.grow(headroom + n)
		return buf, r.read(buf[headroom:], what)
	}
	for have := 0; have < n; {
		step := min(n-have, growStep)
		if cap(r.buf) < headroom+have+step {
			nb := make([]byte, headroom+have+step, max(headroom+have+step, 2*cap(r.buf)))
			if have > 0 {
				copy(nb[headroom:], r.buf[headroom:headroom+have])
			}
			r.buf = nb
		}
		buf := r.buf[:headroom+have+step]
		if err := r.read(buf[headroom+have:], what); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, ErrTruncated) {
				return nil, fmt.Errorf("%w: file ends %d bytes into the %d-byte %s", ErrTruncated, r.lastRead+have, n, what)
			}
			return nil, err
		}
		have += step
	}
	return r.buf[:headroom+n], nil
}

// grow makes r.buf at least n bytes long.
func (r *Reader) grow(n int) []byte {
	if cap(r.buf) < n {
		r.buf = make([]byte, n, max(n, 2*cap(r.buf), 4096))
	}
	return r.buf[:n]
}

// ReadAll reads every packet of a file into memory (Data copied), for
// tests and small captures.
func ReadAll(path string) ([]Packet, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Packet
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		c := *p
		c.Data = append([]byte(nil), p.Data...)
		out = append(out, c)
	}
}
