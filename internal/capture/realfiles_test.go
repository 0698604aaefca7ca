package capture

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRealCaptures reads captures written by tcpdump, dumpcap and editcap
// and compares every packet with tshark's view of it (testdata/README.md).
func TestRealCaptures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.tshark.csv")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, golden := range files {
		capFile := strings.TrimSuffix(golden, ".tshark.csv")
		t.Run(filepath.Base(capFile), func(t *testing.T) {
			raw, err := os.ReadFile(golden)
			must(t, err)
			r, err := Open(capFile)
			must(t, err)
			defer r.Close()
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			for i, line := range lines {
				f := strings.Split(line, ",")
				epoch, frameLen, iface, pkttype, sllSrc, ethSrc, ip4, ip6 := f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]
				p, err := r.Next()
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if want := parseEpoch(t, epoch); p.Timestamp != want {
					t.Errorf("packet %d: timestamp %d, tshark %s", i, p.Timestamp, epoch)
				}
				hdr, dir, src := 14, DirUnknown, ethSrc
				switch p.LinkType {
				case "LINUX_SLL":
					hdr, src = 16, sllSrc
				case "LINUX_SLL2":
					hdr, src = 20, sllSrc
				case "EN10MB":
				default:
					t.Fatalf("link type %s", p.LinkType)
				}
				if pkttype != "" {
					n, _ := strconv.Atoi(pkttype)
					dir = sllDirection(uint16(n))
				}
				if p.Direction != dir {
					t.Errorf("packet %d: direction %v, want %v", i, p.Direction, dir)
				}
				if n, _ := strconv.Atoi(frameLen); p.WireLen != n-hdr+14 || len(p.Data) != p.WireLen {
					t.Errorf("packet %d: wire %d data %d, tshark frame.len %s", i, p.WireLen, len(p.Data), frameLen)
				}
				if n, _ := strconv.Atoi(iface); p.Interface != n {
					t.Errorf("packet %d: interface %d, tshark %q", i, p.Interface, iface)
				}
				if mac, err := net.ParseMAC(src); err != nil || !equalMAC(p.SrcMAC, mac) {
					t.Errorf("packet %d: src MAC %x, tshark %s", i, p.SrcMAC, src)
				}
				et := binary.BigEndian.Uint16(p.Data[12:])
				var gotIP netip.Addr
				switch et {
				case 0x0800:
					gotIP = netip.AddrFrom4([4]byte(p.Data[14+12 : 14+16]))
				case 0x86dd:
					gotIP = netip.AddrFrom16([16]byte(p.Data[14+8 : 14+24]))
				}
				if wantIP := ip4 + ip6; !gotIP.IsValid() || gotIP.String() != wantIP {
					t.Errorf("packet %d: ethertype %#x src %v, tshark %s", i, et, gotIP, wantIP)
				}
			}
			if _, err := r.Next(); !errors.Is(err, io.EOF) {
				t.Errorf("after %d packets: %v", len(lines), err)
			}
		})
	}
}

func equalMAC(a [6]byte, b net.HardwareAddr) bool {
	return len(b) == 6 && string(a[:]) == string(b)
}

// parseEpoch turns tshark's "sec.nnnnnnnnn" into Unix ns without floats.
func parseEpoch(t *testing.T, s string) int64 {
	sec, frac, _ := strings.Cut(s, ".")
	frac = (frac + "000000000")[:9]
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad epoch %q", s)
	}
	return a*1e9 + b
}
