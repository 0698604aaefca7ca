package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// pcapng block types.
const (
	blockSHB = 0x0a0d0d0a
	blockIDB = 0x00000001
	blockPB  = 0x00000002 // obsolete packet block
	blockSPB = 0x00000003
	blockEPB = 0x00000006

	byteOrderMagic = 0x1a2b3c4d
	maxMetaBlock   = 16 << 20 // SHB / IDB
)

// Option codes.
const (
	optEnd      = 0
	optIfTSRes  = 9
	optIfFCSLen = 13
	optIfTSOff  = 14
	optEPBFlags = 2 // also pack_flags in the obsolete packet block
)

type ngIface struct {
	linkType uint16
	snaplen  uint32
	fcsLen   int
	tsOffset int64 // seconds
	// Timestamp units per second: decimal 10^exp or binary 2^exp.
	binary bool
	exp    uint8
}

type ngState struct {
	order  binary.ByteOrder
	ifaces []ngIface
}

// toNanos converts a pcapng timestamp of iface to Unix nanoseconds: exact
// for decimal resolutions up to 1 ns, truncated to the nanosecond for finer
// and for binary (2^-n) resolutions, as libpcap and Wireshark do.
func (i *ngIface) toNanos(ts uint64) int64 {
	var sec, ns uint64
	if i.binary {
		sec = ts >> i.exp
		if i.exp > 0 {
			frac := ts & (1<<i.exp - 1)
			hi, lo := bits.Mul64(frac, 1e9) // frac*1e9 overflows 64 bits for exp > 34
			ns = hi<<(64-i.exp) | lo>>i.exp
		}
	} else {
		unit := pow10[i.exp]
		sec, ns = ts/unit, ts%unit
		if i.exp <= 9 {
			ns *= pow10[9-i.exp]
		} else {
			ns /= pow10[i.exp-9]
		}
	}
	return (int64(sec)+i.tsOffset)*1e9 + int64(ns)
}

var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return
}()

// readNgFirstSection reads the section header that must start the file.
func (r *Reader) readNgFirstSection() error {
	var h [12]byte
	if err := r.read(h[:], "section header block"); err != nil {
		return r.headerErr(fmt.Errorf("pcapng section header: %w", err))
	}
	if err := r.readSHB(h[:]); err != nil {
		return r.headerErr(err)
	}
	return nil
}

// readSHB parses a section header block whose first 12 bytes (type,
// length, byte-order magic) are in h.
func (r *Reader) readSHB(h []byte) error {
	switch {
	case binary.LittleEndian.Uint32(h[8:]) == byteOrderMagic:
		r.ng.order = binary.LittleEndian
	case binary.BigEndian.Uint32(h[8:]) == byteOrderMagic:
		r.ng.order = binary.BigEndian
	default:
		return fmt.Errorf("%w: pcapng section header with a bad byte-order magic %#x", ErrCorrupt, h[8:12])
	}
	blen := r.ng.order.Uint32(h[4:])
	if blen < 28 || blen%4 != 0 || blen > maxMetaBlock {
		return fmt.Errorf("%w: pcapng section header block length %d", ErrCorrupt, blen)
	}
	body, err := r.readBlockRest(blen, 12, "section header block")
	if err != nil {
		return err
	}
	if major, minor := r.ng.order.Uint16(body[0:]), r.ng.order.Uint16(body[2:]); major != 1 {
		return fmt.Errorf("unsupported pcapng version %d.%d", major, minor)
	}
	r.ng.ifaces = r.ng.ifaces[:0]
	return nil
}

// readBlockRest reads the rest of a block of total length blen of which
// `have` bytes were already read, checks the trailing length and returns
// the body (without the trailing length) at r.buf[headroom:].
func (r *Reader) readBlockRest(blen uint32, have int, what string) ([]byte, error) {
	n := int(blen) - have
	buf, err := r.readRecord(n, what)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: file ends inside a %s", ErrTruncated, what)
		}
		return nil, err
	}
	if tl := r.ng.order.Uint32(buf[headroom+n-4:]); tl != blen {
		return nil, fmt.Errorf("%w: %s length %d does not match its trailing length %d", ErrCorrupt, what, blen, tl)
	}
	return buf[headroom : headroom+n-4], nil
}

func (r *Reader) nextNg() error {
	for {
		start := r.off
		h := r.hdr[:12] // a Reader field: a local array would escape through io.ReadFull
		if err := r.read(h[:8], "block header"); err != nil {
			if errors.Is(err, io.EOF) {
				return err
			}
			return r.recordErr(start, err)
		}
		typ := r.ng.order.Uint32(h[0:])
		if typ == blockSHB {
			if err := r.read(h[8:12], "section header block"); err != nil {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("%w: file ends inside a section header block", ErrTruncated)
				}
				return r.recordErr(start, err)
			}
			if err := r.readSHB(h); err != nil {
				return r.recordErr(start, err)
			}
			continue
		}
		blen := r.ng.order.Uint32(h[4:])
		if blen < 12 || blen%4 != 0 {
			return r.recordErr(start, fmt.Errorf("%w: block type %#x has invalid length %d", ErrCorrupt, typ, blen))
		}
		switch typ {
		case blockIDB:
			if blen > maxMetaBlock {
				return r.recordErr(start, fmt.Errorf("%w: interface description block length %d", ErrCorrupt, blen))
			}
			body, err := r.readBlockRest(blen, 8, "interface description block")
			if err == nil {
				err = r.parseIDB(body)
			}
			if err != nil {
				return r.recordErr(start, err)
			}
		case blockEPB, blockPB, blockSPB:
			if blen > maxRecord {
				return r.recordErr(start, fmt.Errorf("%w: packet block length %d exceeds the limit %d", ErrCorrupt, blen, maxRecord))
			}
			body, err := r.readBlockRest(blen, 8, "packet block")
			if err == nil {
				err = r.parsePacketBlock(typ, body)
			}
			if err != nil {
				return r.recordErr(start, err)
			}
			return nil
		default:
			// Interface statistics, name resolution, decryption secrets,
			// custom and unknown blocks are skipped without buffering.
			if err := r.discard(int64(blen)-12, "block"); err != nil {
				return r.recordErr(start, err)
			}
			if err := r.read(h[:4], "block trailer"); err != nil {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("%w: file ends inside a block", ErrTruncated)
				}
				return r.recordErr(start, err)
			}
			if tl := r.ng.order.Uint32(h[:4]); tl != blen {
				return r.recordErr(start, fmt.Errorf("%w: block type %#x length %d does not match its trailing length %d", ErrCorrupt, typ, blen, tl))
			}
		}
	}
}

// forOptions calls fn for every option in b until opt_endofopt or the end.
func (r *Reader) forOptions(b []byte, fn func(code uint16, val []byte)) {
	for len(b) >= 4 {
		code, n := r.ng.order.Uint16(b), int(r.ng.order.Uint16(b[2:]))
		if code == optEnd || 4+n > len(b) {
			return
		}
		fn(code, b[4:4+n])
		b = b[min(len(b), 4+(n+3)&^3):]
	}
}

func (r *Reader) parseIDB(body []byte) error {
	if len(body) < 8 {
		return fmt.Errorf("%w: interface description block too short", ErrCorrupt)
	}
	ifc := ngIface{linkType: r.ng.order.Uint16(body), snaplen: r.ng.order.Uint32(body[4:]), exp: 6}
	var err error
	r.forOptions(body[8:], func(code uint16, v []byte) {
		switch {
		case code == optIfTSRes && len(v) >= 1:
			ifc.binary, ifc.exp = v[0]&0x80 != 0, v[0]&0x7f
			if (ifc.binary && ifc.exp > 63) || (!ifc.binary && ifc.exp > 19) {
				err = fmt.Errorf("unsupported timestamp resolution if_tsresol=%#x on interface %d", v[0], len(r.ng.ifaces))
			}
		case code == optIfTSOff && len(v) >= 8:
			ifc.tsOffset = int64(r.ng.order.Uint64(v))
		case code == optIfFCSLen && len(v) >= 1:
			ifc.fcsLen = int(v[0])
		}
	})
	if err != nil {
		return err
	}
	r.ng.ifaces = append(r.ng.ifaces, ifc)
	return nil
}

var errNoInterface = errors.New("packet block before any interface description block")

func (r *Reader) parsePacketBlock(typ uint32, body []byte) error {
	o := r.ng.order
	var (
		ifID            int
		ts              uint64
		hasTS           bool
		capLen, wireLen int
		dataOff         int
		opts            []byte
	)
	switch typ {
	case blockEPB, blockPB:
		if len(body) < 20 {
			return fmt.Errorf("%w: packet block too short (%d bytes)", ErrCorrupt, len(body))
		}
		if typ == blockEPB {
			ifID = int(o.Uint32(body))
		} else {
			ifID = int(o.Uint16(body))
		}
		ts, hasTS = uint64(o.Uint32(body[4:]))<<32|uint64(o.Uint32(body[8:])), true
		c, w := o.Uint32(body[12:]), o.Uint32(body[16:])
		if uint64(c) > uint64(len(body)-20) {
			return fmt.Errorf("%w: captured length %d exceeds the block (%d bytes of data)", ErrCorrupt, c, len(body)-20)
		}
		capLen, wireLen, dataOff = int(c), int(w), 20
		opts = body[min(len(body), 20+(capLen+3)&^3):]
	case blockSPB:
		if len(body) < 4 {
			return fmt.Errorf("%w: simple packet block too short", ErrCorrupt)
		}
		wireLen, dataOff = int(o.Uint32(body)), 4
		capLen = min(wireLen, len(body)-4)
		if len(r.ng.ifaces) > 0 && r.ng.ifaces[0].snaplen != 0 {
			capLen = min(capLen, int(r.ng.ifaces[0].snaplen))
		}
	}
	if ifID >= len(r.ng.ifaces) {
		if len(r.ng.ifaces) == 0 {
			return errNoInterface
		}
		return fmt.Errorf("%w: interface %d not described (section has %d interfaces)", ErrCorrupt, ifID, len(r.ng.ifaces))
	}
	ifc := &r.ng.ifaces[ifID]
	if !Supported(ifc.linkType) {
		return fmt.Errorf("%w %d (%s) on interface %d; %s (replay can keep the other interfaces: --interface-id)",
			ErrUnsupportedLinkType, ifc.linkType, LinkTypeName(ifc.linkType), ifID, supportedLinkTypes)
	}
	r.pkt = Packet{Interface: ifID}
	if hasTS {
		r.pkt.Timestamp = ifc.toNanos(ts)
	}
	r.forOptions(opts, func(code uint16, v []byte) {
		if code == optEPBFlags && len(v) >= 4 {
			switch o.Uint32(v) & 3 {
			case 1:
				r.pkt.Direction = DirInbound
			case 2:
				r.pkt.Direction = DirOutbound
			}
		}
	})
	// body starts at r.buf[headroom]; the packet data at body[dataOff:].
	normalise(&r.pkt, ifc.linkType, r.buf, headroom+dataOff, capLen, wireLen, ifc.fcsLen)
	return nil
}
