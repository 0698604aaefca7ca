package bench

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// The sink program builds, and parent and child agree on the protocol:
// the port, then the counters of what the connections sent. It listens in
// this namespace, so the test needs no privileges.
func TestSinkProc(t *testing.T) {
	bin, cleanup, err := buildSink()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	p, err := startSinkProc(bin, "", netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p != nil {
			if err := p.close(); err != nil {
				t.Error(err)
			}
		}
	}()
	dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), p.port)
	const conns, size = 3, 1000
	for range conns {
		c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(dst))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		accepted, active, bytes, err := p.counters()
		if err != nil {
			t.Fatal(err)
		}
		if accepted == conns && active == conns && bytes == conns*size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters %d accepted, %d active, %d bytes; want %d, %d, %d", accepted, active, bytes, conns, conns, conns*size)
		}
		time.Sleep(10 * time.Millisecond)
	}
	err = p.close()
	p = nil
	if err != nil {
		t.Fatal(err)
	}
}
