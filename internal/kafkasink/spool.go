package kafkasink

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// errSpoolFull is returned by append when a message does not fit.
var errSpoolFull = errors.New("spool full")

// spool is a first-in first-out file of messages (key, value) that the
// Kafka client could not take: appended at the end, read from the front.
// When everything is read the file is emptied, so its size bounds only
// what waits (plus what was read since it was last empty). Only the sink's
// goroutine uses it.
//
// A message is a header of two little-endian uint32 (key and value
// lengths) and the bytes.
type spool struct {
	f     *os.File
	w     *bufio.Writer
	limit int64
	// size is the file's length with what w buffers, read where the next
	// message starts, written how much of size is in the file.
	size, read, written int64
	n                   int // messages waiting
	hdr                 [8]byte
	// rbuf holds the file from offset rpos on: messages are read from
	// the file in chunks, not two reads each.
	rbuf []byte
	rpos int64
}

// readChunk is how much of the file next reads at once.
const readChunk = 256 << 10

// newSpool creates the spool file in dir; limit bounds its size.
func newSpool(dir string, limit int64) (*spool, error) {
	f, err := os.CreateTemp(dir, "rttscope-kafka-spool-*")
	if err != nil {
		return nil, fmt.Errorf("kafka spool: %w", err)
	}
	return &spool{f: f, w: bufio.NewWriterSize(f, 256<<10), limit: limit}, nil
}

// append adds a message at the end.
func (s *spool) append(key, value []byte) error {
	n := int64(len(s.hdr) + len(key) + len(value))
	if s.size+n > s.limit {
		return errSpoolFull
	}
	binary.LittleEndian.PutUint32(s.hdr[:4], uint32(len(key)))
	binary.LittleEndian.PutUint32(s.hdr[4:], uint32(len(value)))
	_, _ = s.w.Write(s.hdr[:]) // a write error sticks in s.w: the last Write reports it
	_, _ = s.w.Write(key)
	if _, err := s.w.Write(value); err != nil {
		return fmt.Errorf("kafka spool: %w", err)
	}
	s.size += n
	s.n++
	return nil
}

// next returns the message at the front and removes it; ok is false when
// the spool is empty.
func (s *spool) next() (key, value []byte, ok bool, err error) {
	if s.n == 0 {
		return nil, nil, false, nil
	}
	hdr, err := s.bytes(int64(len(s.hdr)))
	if err != nil {
		return nil, nil, false, err
	}
	kl, vl := binary.LittleEndian.Uint32(hdr[:4]), binary.LittleEndian.Uint32(hdr[4:])
	s.read += int64(len(s.hdr))
	msg, err := s.bytes(int64(kl) + int64(vl))
	if err != nil {
		return nil, nil, false, err
	}
	s.read += int64(len(msg))
	// A copy: the client keeps the message until the brokers answer.
	buf := bytes.Clone(msg)
	s.n--
	if s.n == 0 {
		if err := s.reset(); err != nil {
			return nil, nil, false, err
		}
	}
	key, value = buf[:kl:kl], buf[kl:]
	if kl == 0 {
		key = nil
	}
	return key, value, true, nil
}

// bytes returns the n bytes of the file at s.read, valid until the next
// call; it writes out what w buffers and reads a chunk when needed.
func (s *spool) bytes(n int64) ([]byte, error) {
	if s.read >= s.rpos && s.read+n <= s.rpos+int64(len(s.rbuf)) {
		off := s.read - s.rpos
		return s.rbuf[off : off+n], nil
	}
	if s.written < s.read+n {
		if err := s.w.Flush(); err != nil {
			return nil, fmt.Errorf("kafka spool: %w", err)
		}
		s.written = s.size
	}
	size := min(max(n, readChunk), s.written-s.read)
	if int64(cap(s.rbuf)) < size {
		s.rbuf = make([]byte, size)
	}
	s.rbuf, s.rpos = s.rbuf[:size], s.read
	if _, err := io.ReadFull(io.NewSectionReader(s.f, s.read, size), s.rbuf); err != nil {
		return nil, fmt.Errorf("kafka spool: %w", err)
	}
	return s.rbuf[:n], nil
}

// reset empties the file once every message is read.
func (s *spool) reset() error {
	s.size, s.read, s.written = 0, 0, 0
	s.rbuf, s.rpos = s.rbuf[:0], 0
	if err := s.f.Truncate(0); err != nil {
		return fmt.Errorf("kafka spool: %w", err)
	}
	_, err := s.f.Seek(0, io.SeekStart)
	s.w.Reset(s.f)
	return err
}

// len is the number of messages waiting.
func (s *spool) len() int { return s.n }

// remove deletes the file.
func (s *spool) remove() error {
	return errors.Join(s.f.Close(), os.Remove(s.f.Name()))
}
