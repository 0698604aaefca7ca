package kafkasink

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestSpoolFIFO: messages come back in order and whole, also when appends
// and reads interleave across the read chunks and the file is emptied in
// between; a message over the bound is refused.
func TestSpoolFIFO(t *testing.T) {
	s, err := newSpool(t.TempDir(), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.remove() }()
	msg := func(i int) (k, v []byte) {
		if i%5 == 0 {
			k = nil // stats records have no key
		} else {
			k = []byte(fmt.Sprintf("key-%d", i))
		}
		return k, bytes.Repeat([]byte{byte(i)}, 1+(i*7919)%3000)
	}
	next, read := 0, 0
	for round := range 20 {
		for range 200 + round*10 {
			k, v := msg(next)
			if err := s.append(k, v); err != nil {
				t.Fatal(err)
			}
			next++
		}
		// Read some, or (every 4th round) all, so the file empties.
		want := next - read - 50
		if round%4 == 3 {
			want = next - read
		}
		for range want {
			k, v, ok, err := s.next()
			if err != nil || !ok {
				t.Fatalf("message %d: ok %v, %v", read, ok, err)
			}
			wk, wv := msg(read)
			if !bytes.Equal(k, wk) || !bytes.Equal(v, wv) || (wk == nil) != (k == nil) {
				t.Fatalf("message %d: key %q (%d bytes), want %q (%d bytes)", read, k, len(v), wk, len(wv))
			}
			read++
		}
		if round%4 == 3 && (s.len() != 0 || s.size != 0) {
			t.Fatalf("round %d: %d messages, %d bytes left after reading all", round, s.len(), s.size)
		}
	}
	if _, _, ok, _ := s.next(); ok != (read < next) {
		t.Fatalf("after %d of %d: ok %v", read, next, ok)
	}
	if err := s.append(nil, make([]byte, 5<<20)); !errors.Is(err, errSpoolFull) {
		t.Fatalf("a message over the bound: %v", err)
	}
}
