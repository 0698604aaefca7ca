package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// readPcapHeader reads the 24-byte pcap file header.
func (r *Reader) readPcapHeader() error {
	var h [24]byte
	if err := r.read(h[:], "file header"); err != nil {
		return r.headerErr(fmt.Errorf("pcap file header: %w", err))
	}
	switch binary.LittleEndian.Uint32(h[:4]) {
	case 0xa1b2c3d4:
		r.order = binary.LittleEndian
	case 0xa1b23c4d:
		r.order, r.nano = binary.LittleEndian, true
	case 0xd4c3b2a1:
		r.order = binary.BigEndian
	case 0x4d3cb2a1:
		r.order, r.nano = binary.BigEndian, true
	}
	major, minor := r.order.Uint16(h[4:]), r.order.Uint16(h[6:])
	if major != 2 {
		return r.headerErr(fmt.Errorf("unsupported pcap version %d.%d", major, minor))
	}
	r.snaplen = r.order.Uint32(h[16:])
	lt := r.order.Uint32(h[20:])
	r.linkType = uint16(lt)
	// Upper bits: FCS length (in 16-bit words) when the F bit is set.
	if lt&0x04000000 != 0 {
		r.fcsLen = int(lt>>28) * 2
	}
	if !Supported(r.linkType) {
		return r.headerErr(fmt.Errorf("%w %d (%s); %s", ErrUnsupportedLinkType, r.linkType, LinkTypeName(r.linkType), supportedLinkTypes))
	}
	return nil
}

func (r *Reader) maxCapLen(snaplen uint32) int {
	return int(min(max(uint64(snaplen), maxSnap), maxRecord))
}

func (r *Reader) nextPcap() error {
	start := r.off
	buf := r.grow(headroom)
	hdr := buf[:16]
	if err := r.read(hdr, "record header"); err != nil {
		if errors.Is(err, io.EOF) {
			return err
		}
		return r.recordErr(start, err)
	}
	sec, frac := r.order.Uint32(hdr[0:]), r.order.Uint32(hdr[4:])
	capLen, wireLen := r.order.Uint32(hdr[8:]), r.order.Uint32(hdr[12:])
	if limit := r.maxCapLen(r.snaplen); uint64(capLen) > uint64(limit) {
		return r.recordErr(start, fmt.Errorf("%w: captured length %d exceeds the limit %d (snap length %d)",
			ErrCorrupt, capLen, limit, r.snaplen))
	}
	buf, err := r.readRecord(int(capLen), "packet data")
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: file ends after the record header, before %d bytes of packet data", ErrTruncated, capLen)
		}
		return r.recordErr(start, err)
	}
	ns := int64(frac)
	if !r.nano {
		ns *= 1000
	}
	r.pkt = Packet{Timestamp: int64(sec)*1e9 + ns}
	normalise(&r.pkt, r.linkType, buf, headroom, int(capLen), int(wireLen), r.fcsLen)
	return nil
}
