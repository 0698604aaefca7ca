package lab

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offloads are switched with the ETHTOOL_[GS]FEATURES ioctls, by the
// feature names of the kernel's "features" string set (what `ethtool -k`
// prints), so that every segmentation flavour is covered, including ones
// newer than this code (e.g. tx-tcp-accecn-segmentation, which the classic
// ETHTOOL_STSO switch leaves on).

const (
	ethSSFeatures = 4  // ETH_SS_FEATURES
	ethGStringLen = 32 // ETH_GSTRING_LEN
)

// isOffload reports whether the feature must be off on lab interfaces:
// every TX segmentation offload (TSO/GSO/USO/tunnels), every TX checksum
// offload, and GRO in all its forms. With these off, every frame leaving a
// lab interface is MTU sized and carries a complete checksum, which is what
// the user-space delay line (AF_PACKET) has to see and re-inject.
func isOffload(name string) bool {
	switch name {
	case "rx-gro", "rx-gro-list", "rx-udp-gro-forwarding", "rx-gro-hw", "rx-lro",
		"tx-gso-list", "tx-gso-partial", "tx-gso-robust":
		return true
	}
	if strings.HasPrefix(name, "tx-checksum-") {
		return true
	}
	return strings.HasPrefix(name, "tx-") && strings.HasSuffix(name, "-segmentation")
}

// ifreqData is struct ifreq with the ifr_data member of the union in use.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func ethtoolIoctl(fd int, ifname string, buf []byte) error {
	var ifr ifreqData
	if len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", ifname)
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return errno
	}
	return nil
}

var ne = binary.NativeEndian

// featureNames returns the names of the netdev feature bits, bit i at i.
func featureNames(fd int, ifname string) ([]string, error) {
	// struct ethtool_sset_info { u32 cmd, reserved; u64 sset_mask; u32 data[1]; }
	info := make([]byte, 24)
	ne.PutUint32(info[0:], unix.ETHTOOL_GSSET_INFO)
	ne.PutUint64(info[8:], 1<<ethSSFeatures)
	if err := ethtoolIoctl(fd, ifname, info); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %w", err)
	}
	if ne.Uint64(info[8:])&(1<<ethSSFeatures) == 0 {
		return nil, fmt.Errorf("no feature string set")
	}
	n := int(ne.Uint32(info[16:]))
	if n <= 0 || n > 1024 {
		return nil, fmt.Errorf("implausible feature count %d", n)
	}
	// struct ethtool_gstrings { u32 cmd, string_set, len; u8 data[]; }
	gs := make([]byte, 12+n*ethGStringLen)
	ne.PutUint32(gs[0:], unix.ETHTOOL_GSTRINGS)
	ne.PutUint32(gs[4:], ethSSFeatures)
	ne.PutUint32(gs[8:], uint32(n))
	if err := ethtoolIoctl(fd, ifname, gs); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	names := make([]string, n)
	for i := range names {
		s := gs[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if j := strings.IndexByte(string(s), 0); j >= 0 {
			s = s[:j]
		}
		names[i] = string(s)
	}
	return names, nil
}

// featureBlocks is struct ethtool_get_features_block[]: per 32 features
// the available (changeable), requested, active and never_changed masks.
type featureBlocks struct{ avail, requested, active, never []uint32 }

func getFeatures(fd int, ifname string, n int) (featureBlocks, error) {
	blocks := (n + 31) / 32
	buf := make([]byte, 8+blocks*16)
	ne.PutUint32(buf[0:], unix.ETHTOOL_GFEATURES)
	ne.PutUint32(buf[4:], uint32(blocks))
	if err := ethtoolIoctl(fd, ifname, buf); err != nil {
		return featureBlocks{}, fmt.Errorf("ETHTOOL_GFEATURES: %w", err)
	}
	var f featureBlocks
	for b := range blocks {
		o := 8 + b*16
		f.avail = append(f.avail, ne.Uint32(buf[o:]))
		f.requested = append(f.requested, ne.Uint32(buf[o+4:]))
		f.active = append(f.active, ne.Uint32(buf[o+8:]))
		f.never = append(f.never, ne.Uint32(buf[o+12:]))
	}
	return f, nil
}

func bitSet(m []uint32, i int) bool { return m[i/32]&(1<<(i%32)) != 0 }

// activeOffloads lists the offload features still active on ifname.
func activeOffloads(fd int, ifname string, names []string) ([]string, featureBlocks, error) {
	f, err := getFeatures(fd, ifname, len(names))
	if err != nil {
		return nil, f, err
	}
	var on []string
	for i, name := range names {
		if isOffload(name) && bitSet(f.active, i) {
			on = append(on, name)
		}
	}
	return on, f, nil
}

// disableOffloads turns every offload named by isOffload off on the named
// interfaces of node and checks that none is left active.
func disableOffloads(node *Node, ifnames ...string) error {
	return node.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("ethtool socket: %w", err)
		}
		defer unix.Close(fd)
		for _, ifname := range ifnames {
			names, err := featureNames(fd, ifname)
			if err != nil {
				return fmt.Errorf("%s: %w", ifname, err)
			}
			f, err := getFeatures(fd, ifname, len(names))
			if err != nil {
				return fmt.Errorf("%s: %w", ifname, err)
			}
			// struct ethtool_sfeatures { u32 cmd, size;
			//   struct { u32 valid, requested; } features[size]; }
			blocks := len(f.avail)
			buf := make([]byte, 8+blocks*8)
			ne.PutUint32(buf[0:], unix.ETHTOOL_SFEATURES)
			ne.PutUint32(buf[4:], uint32(blocks))
			for i, name := range names {
				if isOffload(name) && bitSet(f.avail, i) {
					o := 8 + (i/32)*8
					ne.PutUint32(buf[o:], ne.Uint32(buf[o:])|1<<(i%32)) // valid; requested stays 0
				}
			}
			if err := ethtoolIoctl(fd, ifname, buf); err != nil {
				return fmt.Errorf("%s: ETHTOOL_SFEATURES: %w", ifname, err)
			}
			on, _, err := activeOffloads(fd, ifname, names)
			if err != nil {
				return fmt.Errorf("%s: %w", ifname, err)
			}
			if len(on) > 0 {
				return fmt.Errorf("%s: offloads still on after disabling them: %s", ifname, strings.Join(on, ", "))
			}
		}
		return nil
	})
}

// OffloadsOff reports whether every segmentation, checksum and receive
// offload is off on the interface ifname inside node; if not, it also
// returns the names of those still on.
func OffloadsOff(node *Node, ifname string) (bool, []string, error) {
	var on []string
	err := node.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		names, err := featureNames(fd, ifname)
		if err != nil {
			return err
		}
		on, _, err = activeOffloads(fd, ifname, names)
		return err
	})
	return err == nil && len(on) == 0, on, err
}
