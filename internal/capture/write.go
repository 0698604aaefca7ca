package capture

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// TimedFrame is one packet to write.
type TimedFrame struct {
	Timestamp int64  // Unix ns (µs pcap files keep whole µs, rounding down)
	Data      []byte // frame in the link type of the file / interface
	WireLen   int    // original length; 0 means len(Data)
	Direction Direction
	Interface int // pcapng only: index into the interfaces of the file
}

// WriteSnapLen is the snap length written into file headers.
const WriteSnapLen = maxSnap

// WritePcap writes frames to a little-endian pcap file of the given link
// type with microsecond or nanosecond timestamps. A path ending in ".gz"
// is gzip compressed. Direction and Interface are ignored.
func WritePcap(path string, linkType uint16, nsResolution bool, frames []TimedFrame) error {
	return writeFile(path, func(w io.Writer) error {
		return EncodePcap(w, PcapOptions{LinkType: linkType, Nanosecond: nsResolution}, frames)
	})
}

// WritePcapng writes frames to a little-endian pcapng file with one
// interface per entry of linkTypes (nanosecond resolution); each frame's
// Interface selects one and a known Direction is written as epb_flags.
// A path ending in ".gz" is gzip compressed.
func WritePcapng(path string, linkTypes []uint16, frames []TimedFrame) error {
	ifs := make([]NgInterface, len(linkTypes))
	for i, lt := range linkTypes {
		ifs[i] = NgInterface{LinkType: lt, TSResol: 9}
	}
	return writeFile(path, func(w io.Writer) error {
		return EncodePcapng(w, NgOptions{Interfaces: ifs}, frames)
	})
}

// PcapOptions controls EncodePcap.
type PcapOptions struct {
	LinkType   uint16
	Nanosecond bool
	BigEndian  bool
	SnapLen    uint32 // 0 means WriteSnapLen
	FCSLen     int    // bytes of FCS each frame carries (written in the link-type field)
}

// EncodePcap writes a pcap stream.
func EncodePcap(w io.Writer, o PcapOptions, frames []TimedFrame) error {
	var order binary.ByteOrder = binary.LittleEndian
	if o.BigEndian {
		order = binary.BigEndian
	}
	snap := o.SnapLen
	if snap == 0 {
		snap = WriteSnapLen
	}
	magic := uint32(0xa1b2c3d4)
	if o.Nanosecond {
		magic = 0xa1b23c4d
	}
	lt := uint32(o.LinkType)
	if o.FCSLen > 0 {
		lt |= 0x04000000 | uint32(o.FCSLen/2)<<28
	}
	h := make([]byte, 24)
	order.PutUint32(h[0:], magic)
	order.PutUint16(h[4:], 2)
	order.PutUint16(h[6:], 4)
	order.PutUint32(h[16:], snap)
	order.PutUint32(h[20:], lt)
	if _, err := w.Write(h); err != nil {
		return err
	}
	rec := make([]byte, 16)
	for i, f := range frames {
		if f.Timestamp < 0 {
			return fmt.Errorf("frame %d: negative timestamp", i)
		}
		sec, frac := f.Timestamp/1e9, f.Timestamp%1e9
		if !o.Nanosecond {
			frac /= 1000
		}
		order.PutUint32(rec[0:], uint32(sec))
		order.PutUint32(rec[4:], uint32(frac))
		order.PutUint32(rec[8:], uint32(len(f.Data)))
		order.PutUint32(rec[12:], uint32(wireLen(f)))
		if _, err := w.Write(rec); err != nil {
			return err
		}
		if _, err := w.Write(f.Data); err != nil {
			return err
		}
	}
	return nil
}

// NgInterface describes one pcapng interface for EncodePcapng.
type NgInterface struct {
	LinkType uint16
	SnapLen  uint32 // 0 means WriteSnapLen
	// TSResol is the if_tsresol byte: 9 = ns, 6 = µs (the pcapng default,
	// then no option is written), 0x80|n = 2^-n s. 0 means 9.
	TSResol  uint8
	TSOffset int64 // if_tsoffset in seconds, subtracted from timestamps
	FCSLen   int   // if_fcslen, written when > 0
}

// NgOptions controls EncodePcapng.
type NgOptions struct {
	Interfaces []NgInterface
	BigEndian  bool
	// UseOldPacketBlock writes obsolete Packet Blocks (type 2) instead of
	// Enhanced Packet Blocks.
	UseOldPacketBlock bool
}

// EncodePcapng writes a one-section pcapng stream.
func EncodePcapng(w io.Writer, o NgOptions, frames []TimedFrame) error {
	if len(o.Interfaces) == 0 {
		return fmt.Errorf("pcapng: no interfaces")
	}
	e := ngEncoder{w: w, order: binary.LittleEndian}
	if o.BigEndian {
		e.order = binary.BigEndian
	}
	// Section header: BOM, version 1.0, section length unknown.
	shb := e.order.AppendUint32(nil, byteOrderMagic)
	shb = e.order.AppendUint16(shb, 1)
	shb = e.order.AppendUint16(shb, 0)
	shb = e.order.AppendUint64(shb, ^uint64(0))
	if err := e.block(blockSHB, shb); err != nil {
		return err
	}
	for _, ifc := range o.Interfaces {
		snap := ifc.SnapLen
		if snap == 0 {
			snap = WriteSnapLen
		}
		b := e.order.AppendUint16(nil, ifc.LinkType)
		b = e.order.AppendUint16(b, 0)
		b = e.order.AppendUint32(b, snap)
		res := ifc.tsResol()
		if res != 6 {
			b = e.option(b, optIfTSRes, []byte{res})
		}
		if ifc.TSOffset != 0 {
			b = e.option(b, optIfTSOff, e.order.AppendUint64(nil, uint64(ifc.TSOffset)))
		}
		if ifc.FCSLen > 0 {
			b = e.option(b, optIfFCSLen, []byte{byte(ifc.FCSLen)})
		}
		b = e.order.AppendUint32(b, optEnd)
		if err := e.block(blockIDB, b); err != nil {
			return err
		}
	}
	var b []byte
	for i, f := range frames {
		if f.Interface < 0 || f.Interface >= len(o.Interfaces) {
			return fmt.Errorf("frame %d: no interface %d", i, f.Interface)
		}
		ts, err := o.Interfaces[f.Interface].units(f.Timestamp)
		if err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
		typ := uint32(blockEPB)
		if o.UseOldPacketBlock {
			typ = blockPB
			b = e.order.AppendUint16(b[:0], uint16(f.Interface))
			b = e.order.AppendUint16(b, 0)
		} else {
			b = e.order.AppendUint32(b[:0], uint32(f.Interface))
		}
		b = e.order.AppendUint32(b, uint32(ts>>32))
		b = e.order.AppendUint32(b, uint32(ts))
		b = e.order.AppendUint32(b, uint32(len(f.Data)))
		b = e.order.AppendUint32(b, uint32(wireLen(f)))
		b = append(b, f.Data...)
		b = append(b, make([]byte, (4-len(f.Data)%4)%4)...)
		if f.Direction != DirUnknown {
			b = e.option(b, optEPBFlags, e.order.AppendUint32(nil, uint32(f.Direction)&3))
			b = e.order.AppendUint32(b, optEnd)
		}
		if err := e.block(typ, b); err != nil {
			return err
		}
	}
	return nil
}

func (i NgInterface) tsResol() uint8 {
	if i.TSResol == 0 {
		return 9
	}
	return i.TSResol
}

// units converts Unix ns to the interface's timestamp units (decimal:
// rounding down; binary: rounding up).
func (i NgInterface) units(ns int64) (uint64, error) {
	ns -= i.TSOffset * 1e9
	if ns < 0 {
		return 0, fmt.Errorf("timestamp before the interface's if_tsoffset")
	}
	res := i.tsResol()
	sec, frac := uint64(ns)/1e9, uint64(ns)%1e9
	if res&0x80 != 0 {
		n := res & 0x7f
		if n > 32 {
			return 0, fmt.Errorf("binary resolution 2^-%d not supported by the writer", n)
		}
		// Round up, so that readers truncating to ns (libpcap, Wireshark,
		// this package) get the exact ns back for n >= 30.
		return sec<<n + (frac<<n+1e9-1)/1e9, nil
	}
	if res > 19 {
		return 0, fmt.Errorf("resolution 10^-%d not supported", res)
	}
	unit := pow10[res]
	if sec > math.MaxUint64/unit-1 {
		return 0, fmt.Errorf("timestamp does not fit resolution 10^-%d (set TSOffset)", res)
	}
	if res <= 9 {
		return sec*unit + frac/pow10[9-res], nil
	}
	return sec*unit + frac*pow10[res-9], nil
}

func wireLen(f TimedFrame) int {
	if f.WireLen == 0 {
		return len(f.Data)
	}
	return f.WireLen
}

type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

type ngEncoder struct {
	w     io.Writer
	order byteOrder
}

func (e ngEncoder) option(b []byte, code uint16, v []byte) []byte {
	b = e.order.AppendUint16(b, code)
	b = e.order.AppendUint16(b, uint16(len(v)))
	b = append(b, v...)
	return append(b, make([]byte, (4-len(v)%4)%4)...)
}

func (e ngEncoder) block(typ uint32, body []byte) error {
	n := uint32(12 + len(body))
	b := make([]byte, 0, n)
	b = e.order.AppendUint32(b, typ)
	b = e.order.AppendUint32(b, n)
	b = append(b, body...)
	b = e.order.AppendUint32(b, n)
	_, err := e.w.Write(b)
	return err
}

func writeFile(path string, body func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	var w io.Writer = bw
	var gz *gzip.Writer
	if strings.HasSuffix(path, ".gz") {
		gz = gzip.NewWriter(bw)
		w = gz
	}
	if err := body(w); err != nil {
		return err
	}
	if gz != nil {
		if err := gz.Close(); err != nil {
			return err
		}
	}
	return bw.Flush()
}
