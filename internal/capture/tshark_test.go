package capture

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTsharkReadsWrittenFiles checks the writers (and pktcraft's checksums)
// against tshark when it is installed.
func TestTsharkReadsWrittenFiles(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	frames, _ := ethFrames(t)
	dir := t.TempDir()
	type variant struct {
		name string
		enc  func(p string) error
		ns   bool
		dirs bool
	}
	ng := func(o NgOptions) func(string) error {
		return func(p string) error {
			return writeFile(p, func(w io.Writer) error { return EncodePcapng(w, o, frames) })
		}
	}
	variants := []variant{
		{"us.pcap", func(p string) error { return WritePcap(p, LinkTypeEthernet, false, frames) }, false, false},
		{"ns-be.pcap", func(p string) error {
			return writeFile(p, func(w io.Writer) error {
				return EncodePcap(w, PcapOptions{LinkType: LinkTypeEthernet, Nanosecond: true, BigEndian: true}, frames)
			})
		}, true, false},
		{"le.pcapng", func(p string) error { return WritePcapng(p, []uint16{LinkTypeEthernet}, frames) }, true, true},
		{"be-bin32.pcapng", ng(NgOptions{BigEndian: true, Interfaces: []NgInterface{{LinkType: LinkTypeEthernet, TSResol: 0x80 | 32}}}), true, true},
		{"us-offset.pcapng", ng(NgOptions{Interfaces: []NgInterface{{LinkType: LinkTypeEthernet, TSResol: 6, TSOffset: 1600000000}}}), false, true},
	}
	for _, v := range variants {
		path := filepath.Join(dir, v.name)
		must(t, v.enc(path))
		out, err := exec.Command(tshark, "-r", path, "-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE",
			"-o", "udp.check_checksum:TRUE", "-T", "fields", "-E", "separator=,", "-e", "frame.time_epoch",
			"-e", "frame.packet_flags_direction", "-e", "ip.checksum.status", "-e", "tcp.checksum.status",
			"-e", "udp.checksum.status", "-e", "icmp.checksum.status", "-e", "icmpv6.checksum.status").Output()
		if err != nil {
			t.Fatalf("%s: tshark: %v", v.name, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(frames) {
			t.Fatalf("%s: tshark saw %d packets", v.name, len(lines))
		}
		for i, line := range lines {
			f := strings.Split(line, ",")
			ts := frames[i].Timestamp
			if !v.ns {
				ts -= ts % 1000
			}
			if got := parseEpoch(t, f[0]); got != ts {
				t.Errorf("%s packet %d: tshark time %s, wrote %d", v.name, i, f[0], ts)
			}
			wantDir := ""
			if v.dirs && frames[i].Direction != DirUnknown {
				wantDir = fmt.Sprintf("0x%08x", uint32(frames[i].Direction))
			}
			if f[1] != wantDir {
				t.Errorf("%s packet %d: direction %q, want %q", v.name, i, f[1], wantDir)
			}
			for _, st := range f[2:] {
				if st != "" && st != "1" { // 1 = good
					t.Errorf("%s packet %d: checksum status %q in %q", v.name, i, st, line)
				}
			}
			if strings.Count(strings.Join(f[2:], ""), "1") == 0 {
				t.Errorf("%s packet %d: no checksum verified: %q", v.name, i, line)
			}
		}
	}
}
