package lab

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestShaperDelayOnly(t *testing.T) {
	s := newShaper(20*time.Millisecond, 0, 10)
	ms := int64(time.Millisecond)
	for _, arr := range []int64{0, 1 * ms, 5 * ms} {
		due, ok := s.admit(arr, 1500)
		if !ok || due != arr+20*ms {
			t.Fatalf("arrival %d: due %d ok %v", arr, due, ok)
		}
	}
	// A (clock-skewed) earlier arrival never overtakes.
	if due, _ := s.admit(4*ms, 100); due != 25*ms {
		t.Fatalf("due %d, want FIFO-preserving %d", due, 25*ms)
	}
}

func TestShaperRateAndDropTail(t *testing.T) {
	// 12 Mbit/s: a 1500-byte frame takes 1 ms; queue of 3 frames.
	ms := int64(time.Millisecond)
	s := newShaper(10*time.Millisecond, 12_000_000, 3)
	var dues []int64
	drops := 0
	for range 5 {
		due, ok := s.admit(0, 1500) // a burst of 5 at t=0
		if ok {
			dues = append(dues, due)
		} else {
			drops++
		}
	}
	if len(dues) != 3 || drops != 2 {
		t.Fatalf("admitted %d, dropped %d; want 3 and 2", len(dues), drops)
	}
	for i, d := range dues {
		if want := int64(i+1)*ms + 10*ms; d != want {
			t.Errorf("frame %d due %d, want %d", i, d, want)
		}
	}
	// At 1.5 ms the first frame has left the queue: one more fits.
	if due, ok := s.admit(1500*int64(time.Microsecond), 1500); !ok || due != 4*ms+10*ms {
		t.Errorf("after drain: due %d ok %v", due, ok)
	}
	if _, ok := s.admit(1500*int64(time.Microsecond), 1500); ok {
		t.Error("queue should be full again")
	}
	// Idle link: no queueing delay at all.
	if due, ok := s.admit(100*ms, 1500); !ok || due != 100*ms+ms+10*ms {
		t.Errorf("idle: due %d ok %v", due, ok)
	}
}

func TestCmsgTimestamp(t *testing.T) {
	oob := make([]byte, unix.CmsgSpace(16))
	h := (*unix.Cmsghdr)(unsafePointer(&oob[0]))
	h.Level = unix.SOL_SOCKET
	h.Type = unix.SCM_TIMESTAMPNS
	h.SetLen(unix.CmsgLen(16))
	binary.NativeEndian.PutUint64(oob[unix.SizeofCmsghdr:], 12)
	binary.NativeEndian.PutUint64(oob[unix.SizeofCmsghdr+8:], 345)
	ns, ok := cmsgTimestamp(oob)
	if !ok || ns != 12*int64(time.Second)+345 {
		t.Fatalf("got %d %v", ns, ok)
	}
	if _, ok := cmsgTimestamp(oob[:10]); ok {
		t.Fatal("short control data accepted")
	}
}

func TestRingSize(t *testing.T) {
	if n := ringSize(PathSpec{}, time.Second); n != unlimitedRing {
		t.Errorf("unlimited ring %d", n)
	}
	n := ringSize(PathSpec{RateBitsPerSec: 20_000_000, QueuePackets: 1000}, 50*time.Millisecond)
	if n < 1000+976 || n > maxRing {
		t.Errorf("20 Mbit/s, 50 ms ring %d", n)
	}
	if n := ringSize(PathSpec{RateBitsPerSec: 100e9, QueuePackets: 1000}, 10*time.Second); n != maxRing {
		t.Errorf("huge ring %d", n)
	}
}
