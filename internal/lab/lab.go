// Package lab builds a small throw-away network of namespaces for demos,
// integration tests and benchmarks:
//
//	client ──veth── middlebox ──veth── [delay i] ──veth── server i   (per path i)
//
// The middlebox forwards IPv4 and IPv6 between the client and every server.
// Each path adds a configurable one-way delay per direction and optionally a
// rate-limited bottleneck. The delay sits in a "delay" namespace of its own
// between the middlebox and the server: netem qdiscs on its two ends,
// joined by a kernel bridge, when the kernel has netem (and bridges);
// otherwise a user-space delay line (AF_PACKET bridge with precise release
// times). Never on the middlebox's own interfaces: a monitor's tc egress
// hook runs before the interface's qdisc and a capture tap after it, so a
// netem there would add its delay to what the monitor measures but not to
// what a capture on the same interface shows.
//
// Everything a Lab creates lives inside namespaces it created itself under
// /run/netns, named PREFIX-SUFFIX-ROLE with a random SUFFIX; Close (and any
// failure inside New) removes all of them. No interface is ever created in
// the caller's namespace, and nothing routes out of the lab.
//
// Every lab veth has TSO/GSO/GRO and TX checksum offload turned off (so
// AF_PACKET sees only MTU-sized frames with complete checksums), IPv6 DAD
// is off, TCP timestamps are on, and the routed links get permanent
// ARP/NDP entries so that even the first packet sees just the configured
// delay.
//
// User-space delay line, in short: arrival times are kernel receive
// timestamps, releases happen at arrival + delay (+ serialisation behind
// the rate limiter) via clock_nanosleep(TIMER_ABSTIME) on locked threads
// with 1 ns timer slack and nice -10, compensated for the typical wake-up
// latency. On an idle machine releases land within tens of microseconds of
// their due time (a 20+30 ms path measures 50.05-50.15 ms median RTT with
// the traffic pinger); a saturated CPU delays them (see DirStats.MaxLate).
// Forwarding tops out around 1 Gbit/s of MTU frames on two cores: give
// paths that carry bulk traffic a RateBitsPerSec well below that, or the
// delay line itself becomes the (lossy, delaying) bottleneck. While delay
// lines run, GOMAXPROCS is raised by four per line (see reserveProcs).
package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// PathSpec describes the path between the middlebox and one server.
type PathSpec struct {
	DelayToServer, DelayToClient time.Duration // one-way delays added on this path
	RateBitsPerSec               uint64        // 0 = unlimited; else bottleneck rate (both directions)
	// QueuePackets is the bottleneck queue limit when rate-limited (drop
	// tail); default 1000. With netem the queue is tbf's, limited to the
	// bytes of as many full-size frames.
	QueuePackets int
}

// Config describes a lab.
type Config struct {
	Prefix              string     // short name prefix; New appends a unique suffix
	Paths               []PathSpec // one server per path; at least one
	ForceUserspaceDelay bool       // use the user-space delay line even when netem exists, and on paths without delay or rate
}

// Interface names inside the lab namespaces.
const (
	ClientIf        = "eth0"   // the client's only interface
	ServerIf        = "eth0"   // each server's only interface
	DelayIfMbox     = "dl-mb"  // delay namespace, toward the middlebox
	DelayIfServer   = "dl-srv" // delay namespace, toward the server
	delayBridge     = "dl-br"  // delay namespace with netem: joins DelayIfMbox and DelayIfServer
	middleboxCliIf  = "mb-cli"
	middleboxSrvIfF = "mb-srv%d"
)

// Delay methods.
const (
	DelayNetem     = "netem"
	DelayUserspace = "userspace"
)

const (
	// DefaultPrefix is used when Config.Prefix is empty.
	DefaultPrefix = "rttlab"
	// DefaultQueuePackets is the bottleneck queue of a rate-limited path.
	DefaultQueuePackets = 1000
	maxPaths            = 64
	maxPrefix           = 16
	// MaxDelay bounds a one-way delay.
	MaxDelay = 10 * time.Second
	mtu      = 1500
)

// Lab is a built topology. Fields are read-only.
type Lab struct {
	Client    *Node
	Middlebox *Node
	Servers   []*Node // Servers[i] sits behind path i
	// Delays[i] is the namespace that delays path i (its user-space delay
	// line, or its netem qdiscs and bridge), nil for a direct path.
	Delays []*Node
	// MiddleboxServerIf[i] is the middlebox interface name facing server i;
	// MiddleboxClientIf is the one facing the client.
	MiddleboxClientIf string
	MiddleboxServerIf []string
	ServerAddr4       []netip.Addr // per path
	ServerAddr6       []netip.Addr // per path
	ClientAddr4       netip.Addr
	ClientAddr6       netip.Addr
	MiddleboxAddr4    netip.Addr // client side
	MiddleboxAddr6    netip.Addr // client side
	// MiddleboxServerAddr4/6[i] are the middlebox addresses on path i
	// (the servers' gateways).
	MiddleboxServerAddr4 []netip.Addr
	MiddleboxServerAddr6 []netip.Addr
	DelayMethod          string     // "netem" or "userspace"
	Paths                []PathSpec // as built (defaults filled in)

	base      string  // PREFIX-SUFFIX; "" until a name was chosen
	nodes     []*Node // every namespace created, in creation order
	lines     []*delayLine
	closeOnce sync.Once
	closeErr  error
}

// testHook, when set by tests, runs before each setup step and can make it
// fail.
var testHook func(step string) error

// Address plan.
var (
	clientNet4 = netip.MustParsePrefix("10.10.0.0/24")
	clientNet6 = netip.MustParsePrefix("fd00:10::/64")
)

func hostAddr(p netip.Prefix, host byte) netip.Prefix {
	b := p.Addr().AsSlice()
	b[len(b)-1] = host
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, p.Bits())
}

func pathNet4(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 20, byte(i), 0}), 24)
}

func pathNet6(i int) netip.Prefix {
	// fd00:20:i::/64
	var b [16]byte
	b[0], b[1] = 0xfd, 0x00
	b[2], b[3] = 0x00, 0x20
	b[4], b[5] = byte(i>>8), byte(i)
	return netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

func validPrefix(p string) error {
	if len(p) == 0 || len(p) > maxPrefix {
		return fmt.Errorf("lab: prefix %q must be 1 to %d characters", p, maxPrefix)
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("lab: prefix %q may only hold letters, digits, '-' and '_'", p)
		}
	}
	return nil
}

func normalize(cfg Config) (Config, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := validPrefix(cfg.Prefix); err != nil {
		return cfg, err
	}
	if len(cfg.Paths) == 0 {
		return cfg, errors.New("lab: at least one path is needed")
	}
	if len(cfg.Paths) > maxPaths {
		return cfg, fmt.Errorf("lab: at most %d paths", maxPaths)
	}
	paths := make([]PathSpec, len(cfg.Paths))
	for i, p := range cfg.Paths {
		for _, d := range []time.Duration{p.DelayToServer, p.DelayToClient} {
			if d < 0 || d > MaxDelay {
				return cfg, fmt.Errorf("lab: path %d: delay %v out of range [0, %v]", i, d, MaxDelay)
			}
		}
		if p.QueuePackets < 0 {
			return cfg, fmt.Errorf("lab: path %d: negative queue limit", i)
		}
		if p.QueuePackets == 0 {
			p.QueuePackets = DefaultQueuePackets
		}
		if p.RateBitsPerSec != 0 && p.RateBitsPerSec < 8000 {
			return cfg, fmt.Errorf("lab: path %d: rate %d bit/s is below 8 kbit/s", i, p.RateBitsPerSec)
		}
		paths[i] = p
	}
	cfg.Paths = paths
	return cfg, nil
}

func randomSuffix() (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// builder holds setup-only state.
type builder struct {
	l       *Lab
	cfg     Config
	base    string
	handles map[*Node]*netlink.Handle
}

// New builds the lab. On any failure, including ctx being cancelled during
// setup, it removes everything it built and returns the error.
func New(ctx context.Context, cfg Config) (_ *Lab, err error) {
	cfg, err = normalize(cfg)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("lab: needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)")
	}
	if err := ensureNetnsDir(); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	b := &builder{
		l: &Lab{
			MiddleboxClientIf: middleboxCliIf,
			Paths:             cfg.Paths,
		},
		cfg:     cfg,
		handles: map[*Node]*netlink.Handle{},
	}
	defer func() {
		for _, h := range b.handles {
			h.Close()
		}
		if err != nil {
			if cerr := b.l.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("lab: cleanup: %w", cerr))
			}
		}
	}()
	steps := []struct {
		name string
		fn   func() error
	}{
		{"namespaces", b.namespaces},
		{"delay-method", b.delayMethod},
		{"links", b.links},
		{"offloads", b.offloads},
		{"addresses", b.addresses},
		{"delay-line", b.delayLines},
		{"up", b.up},
		{"routes", b.routes},
		{"neighbours", b.neighbours},
		{"netem", b.netem},
		{"wait-ready", func() error { return b.waitReady(ctx) }},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lab: setup cancelled before %s: %w", s.name, err)
		}
		if testHook != nil {
			if err := testHook(s.name); err != nil {
				return nil, fmt.Errorf("lab: %s: %w", s.name, err)
			}
		}
		if err := s.fn(); err != nil {
			return nil, fmt.Errorf("lab: %s: %w", s.name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lab: setup cancelled: %w", err)
	}
	return b.l, nil
}

func (b *builder) node(role string) (*Node, error) {
	n, err := newNode(b.base + "-" + role)
	if err != nil {
		return nil, err
	}
	b.l.nodes = append(b.l.nodes, n)
	h, err := netlink.NewHandleAt(netns.NsHandle(n.fdHandle()))
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", n.Name, err)
	}
	b.handles[n] = h
	// Bring lo up and make IPv6 addresses usable at once (no DAD).
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: lo up: %w", n.Name, err)
	}
	if err := n.setSysctls(
		"net.ipv6.conf.all.accept_dad", "0",
		"net.ipv6.conf.default.accept_dad", "0",
	); err != nil {
		return nil, fmt.Errorf("%s: %w", n.Name, err)
	}
	return n, nil
}

// ensureTCPTimestamps checks that TCP timestamps are on (the default of a
// new namespace) and turns them on otherwise: rttscope's TCP RTT needs them.
func ensureTCPTimestamps(n *Node) error {
	return n.Do(func() error {
		p := sysctlPath("net.ipv4.tcp_timestamps")
		v, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if len(v) > 0 && v[0] == '1' {
			return nil
		}
		return os.WriteFile(p, []byte("1"), 0o644)
	})
}

func (b *builder) namespaces() error {
	// Pick a suffix whose names are all free; newNode's O_EXCL still
	// guards against a race with another process.
	for try := 0; ; try++ {
		sfx, err := randomSuffix()
		if err != nil {
			return err
		}
		b.base = b.cfg.Prefix + "-" + sfx
		matches, _ := filepath.Glob(filepath.Join(netnsDir, b.base+"-*"))
		if len(matches) == 0 {
			break
		}
		if try > 20 {
			return errors.New("no free namespace name suffix")
		}
	}
	if err := writeMarker(b.base); err != nil {
		return fmt.Errorf("ownership marker: %w", err)
	}
	b.l.base = b.base
	var err error
	l := b.l
	if l.Client, err = b.node("cli"); err != nil {
		return err
	}
	if err := ensureTCPTimestamps(l.Client); err != nil {
		return err
	}
	if l.Middlebox, err = b.node("mb"); err != nil {
		return err
	}
	if err := l.Middlebox.setSysctls(
		"net.ipv4.ip_forward", "1",
		"net.ipv6.conf.all.forwarding", "1",
		"net.ipv6.conf.default.forwarding", "1",
	); err != nil {
		return err
	}
	for i := range b.cfg.Paths {
		s, err := b.node(fmt.Sprintf("srv%d", i))
		if err != nil {
			return err
		}
		l.Servers = append(l.Servers, s)
		if err := ensureTCPTimestamps(s); err != nil {
			return err
		}
	}
	return nil
}

// delayMethod picks netem if the kernel has it and bridges (by trying to
// attach one to the middlebox's lo and to create a bridge there), the
// user-space delay line otherwise, and creates the delay namespaces.
func (b *builder) delayMethod() error {
	l := b.l
	l.DelayMethod = DelayUserspace
	h := b.handles[l.Middlebox]
	if !b.cfg.ForceUserspaceDelay && netemWorks(h) && bridgeWorks(h) && (!b.rateLimited() || tbfWorks(h)) {
		l.DelayMethod = DelayNetem
	}
	l.Delays = make([]*Node, len(b.cfg.Paths))
	for i, p := range b.cfg.Paths {
		if p.Direct() && !b.cfg.ForceUserspaceDelay {
			continue // the middlebox connects straight to the server
		}
		d, err := b.node(fmt.Sprintf("dl%d", i))
		if err != nil {
			return err
		}
		// The delay namespace is a pure layer-2 bridge: keep its own IPv6
		// stack quiet (no link-local addresses, RS or MLD frames).
		if err := d.setSysctls(
			"net.ipv6.conf.all.disable_ipv6", "1",
			"net.ipv6.conf.default.disable_ipv6", "1",
		); err != nil {
			return err
		}
		l.Delays[i] = d
	}
	return nil
}

func netemWorks(h *netlink.Handle) bool {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return false
	}
	q := netlink.NewNetem(netlink.QdiscAttrs{
		LinkIndex: lo.Attrs().Index,
		Handle:    netlink.MakeHandle(1, 0),
		Parent:    netlink.HANDLE_ROOT,
	}, netlink.NetemQdiscAttrs{Latency: 1000})
	if err := h.QdiscAdd(q); err != nil {
		return false
	}
	_ = h.QdiscDel(q)
	return true
}

func (b *builder) rateLimited() bool {
	for _, p := range b.cfg.Paths {
		if p.RateBitsPerSec > 0 {
			return true
		}
	}
	return false
}

func tbfWorks(h *netlink.Handle) bool {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return false
	}
	q := newTbf(lo.Attrs().Index, netlink.HANDLE_ROOT, PathSpec{RateBitsPerSec: 1e6, QueuePackets: 1})
	if err := h.QdiscAdd(q); err != nil {
		return false
	}
	_ = h.QdiscDel(q)
	return true
}

func bridgeWorks(h *netlink.Handle) bool {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: delayBridge}}
	if err := h.LinkAdd(br); err != nil {
		return false
	}
	_ = h.LinkDel(br)
	return true
}

func (b *builder) veth(in *Node, name string, peerNs *Node, peer string) error {
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name, MTU: mtu},
		PeerName:      peer,
		PeerNamespace: netlink.NsFd(peerNs.fdHandle()),
		PeerMTU:       mtu,
	}
	if err := b.handles[in].LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s/%s -- %s/%s: %w", in.Name, name, peerNs.Name, peer, err)
	}
	return nil
}

func (b *builder) links() error {
	l := b.l
	if err := b.veth(l.Middlebox, middleboxCliIf, l.Client, ClientIf); err != nil {
		return err
	}
	for i := range b.cfg.Paths {
		mbIf := fmt.Sprintf(middleboxSrvIfF, i)
		l.MiddleboxServerIf = append(l.MiddleboxServerIf, mbIf)
		if d := l.Delays[i]; d != nil {
			if err := b.veth(l.Middlebox, mbIf, d, DelayIfMbox); err != nil {
				return err
			}
			if err := b.veth(d, DelayIfServer, l.Servers[i], ServerIf); err != nil {
				return err
			}
		} else if err := b.veth(l.Middlebox, mbIf, l.Servers[i], ServerIf); err != nil {
			return err
		}
	}
	return nil
}

// offloads disables TSO/GSO/GRO/TX checksum offload on every lab veth.
func (b *builder) offloads() error {
	l := b.l
	if err := disableOffloads(l.Client, ClientIf); err != nil {
		return err
	}
	if err := disableOffloads(l.Middlebox, append([]string{middleboxCliIf}, l.MiddleboxServerIf...)...); err != nil {
		return err
	}
	for i, s := range l.Servers {
		if err := disableOffloads(s, ServerIf); err != nil {
			return err
		}
		if d := l.Delays[i]; d != nil {
			if err := disableOffloads(d, DelayIfMbox, DelayIfServer); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *builder) addAddrs(n *Node, ifname string, addrs ...netip.Prefix) error {
	h := b.handles[n]
	link, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", n.Name, ifname, err)
	}
	for _, a := range addrs {
		na := &netlink.Addr{
			IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())},
		}
		if a.Addr().Is6() {
			na.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(link, na); err != nil {
			return fmt.Errorf("%s: add %s to %s: %w", n.Name, a, ifname, err)
		}
	}
	return nil
}

func (b *builder) addresses() error {
	l := b.l
	c4, c6 := hostAddr(clientNet4, 2), hostAddr(clientNet6, 2)
	m4, m6 := hostAddr(clientNet4, 1), hostAddr(clientNet6, 1)
	l.ClientAddr4, l.ClientAddr6 = c4.Addr(), c6.Addr()
	l.MiddleboxAddr4, l.MiddleboxAddr6 = m4.Addr(), m6.Addr()
	if err := b.addAddrs(l.Client, ClientIf, c4, c6); err != nil {
		return err
	}
	if err := b.addAddrs(l.Middlebox, middleboxCliIf, m4, m6); err != nil {
		return err
	}
	for i, s := range l.Servers {
		n4, n6 := pathNet4(i), pathNet6(i)
		s4, s6 := hostAddr(n4, 2), hostAddr(n6, 2)
		l.ServerAddr4 = append(l.ServerAddr4, s4.Addr())
		l.ServerAddr6 = append(l.ServerAddr6, s6.Addr())
		g4, g6 := hostAddr(n4, 1), hostAddr(n6, 1)
		l.MiddleboxServerAddr4 = append(l.MiddleboxServerAddr4, g4.Addr())
		l.MiddleboxServerAddr6 = append(l.MiddleboxServerAddr6, g6.Addr())
		if err := b.addAddrs(l.Middlebox, l.MiddleboxServerIf[i], g4, g6); err != nil {
			return err
		}
		if err := b.addAddrs(s, ServerIf, s4, s6); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) delayLines() error {
	l := b.l
	if l.DelayMethod != DelayUserspace {
		return nil
	}
	for i, d := range l.Delays {
		if d == nil {
			continue
		}
		dl, err := startDelayLine(d, DelayIfMbox, DelayIfServer, b.cfg.Paths[i])
		if err != nil {
			return fmt.Errorf("path %d: %w", i, err)
		}
		l.lines = append(l.lines, dl)
	}
	return nil
}

func (b *builder) setUp(n *Node, ifnames ...string) error {
	h := b.handles[n]
	for _, name := range ifnames {
		link, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetUp(link)
		}
		if err != nil {
			return fmt.Errorf("%s: %s up: %w", n.Name, name, err)
		}
	}
	return nil
}

func (b *builder) up() error {
	l := b.l
	if err := b.setUp(l.Client, ClientIf); err != nil {
		return err
	}
	if err := b.setUp(l.Middlebox, append([]string{middleboxCliIf}, l.MiddleboxServerIf...)...); err != nil {
		return err
	}
	for i, s := range l.Servers {
		if d := l.Delays[i]; d != nil {
			if err := b.setUp(d, DelayIfMbox, DelayIfServer); err != nil {
				return err
			}
		}
		if err := b.setUp(s, ServerIf); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) defaultRoute(n *Node, ifname string, gws ...netip.Addr) error {
	h := b.handles[n]
	link, err := h.LinkByName(ifname)
	if err != nil {
		return err
	}
	for _, gw := range gws {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice()}
		if gw.Is4() {
			r.Family = netlink.FAMILY_V4
		} else {
			r.Family = netlink.FAMILY_V6
		}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("%s: default route via %s: %w", n.Name, gw, err)
		}
	}
	return nil
}

func (b *builder) routes() error {
	l := b.l
	if err := b.defaultRoute(l.Client, ClientIf, l.MiddleboxAddr4, l.MiddleboxAddr6); err != nil {
		return err
	}
	for i, s := range l.Servers {
		gw4, gw6 := hostAddr(pathNet4(i), 1).Addr(), hostAddr(pathNet6(i), 1).Addr()
		if err := b.defaultRoute(s, ServerIf, gw4, gw6); err != nil {
			return err
		}
	}
	return nil
}

// neighbours installs permanent ARP/NDP entries on both ends of every
// routed link. The lab never changes MAC addresses, and without them the
// first packet of each path would wait for address resolution across the
// delayed path (one extra round trip), and NUD probes would add traffic of
// their own to what a monitor sees.
func (b *builder) neighbours() error {
	l := b.l
	mac := func(n *Node, ifname string) (netlink.Link, net.HardwareAddr, error) {
		link, err := b.handles[n].LinkByName(ifname)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", n.Name, ifname, err)
		}
		return link, link.Attrs().HardwareAddr, nil
	}
	add := func(n *Node, link netlink.Link, hw net.HardwareAddr, ips ...netip.Addr) error {
		for _, ip := range ips {
			fam := netlink.FAMILY_V4
			if ip.Is6() {
				fam = netlink.FAMILY_V6
			}
			err := b.handles[n].NeighSet(&netlink.Neigh{
				LinkIndex:    link.Attrs().Index,
				Family:       fam,
				State:        netlink.NUD_PERMANENT,
				IP:           ip.AsSlice(),
				HardwareAddr: hw,
			})
			if err != nil {
				return fmt.Errorf("%s: neighbour %s: %w", n.Name, ip, err)
			}
		}
		return nil
	}
	cl, cmac, err := mac(l.Client, ClientIf)
	if err != nil {
		return err
	}
	ml, mmac, err := mac(l.Middlebox, middleboxCliIf)
	if err != nil {
		return err
	}
	if err := add(l.Client, cl, mmac, l.MiddleboxAddr4, l.MiddleboxAddr6); err != nil {
		return err
	}
	if err := add(l.Middlebox, ml, cmac, l.ClientAddr4, l.ClientAddr6); err != nil {
		return err
	}
	for i, s := range l.Servers {
		sl, smac, err := mac(s, ServerIf)
		if err != nil {
			return err
		}
		gl, gmac, err := mac(l.Middlebox, l.MiddleboxServerIf[i])
		if err != nil {
			return err
		}
		if err := add(s, sl, gmac, l.MiddleboxServerAddr4[i], l.MiddleboxServerAddr6[i]); err != nil {
			return err
		}
		if err := add(l.Middlebox, gl, smac, l.ServerAddr4[i], l.ServerAddr6[i]); err != nil {
			return err
		}
	}
	return nil
}

// waitReady waits until every lab interface is operationally up. The
// kernel's link watcher attaches the real qdisc (until then transmissions
// are silently dropped) and sets the operstate together, up to a second
// after the carrier came on; without this wait the first neighbour
// solicitations get lost and the first packets take a 1 s detour.
func (b *builder) waitReady(ctx context.Context) error {
	l := b.l
	type nif struct {
		n    *Node
		name string
	}
	ifs := []nif{{l.Client, ClientIf}, {l.Middlebox, middleboxCliIf}}
	for i, s := range l.Servers {
		ifs = append(ifs, nif{l.Middlebox, l.MiddleboxServerIf[i]}, nif{s, ServerIf})
		if d := l.Delays[i]; d != nil {
			ifs = append(ifs, nif{d, DelayIfMbox}, nif{d, DelayIfServer})
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, x := range ifs {
		for {
			link, err := b.handles[x.n].LinkByName(x.name)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", x.n.Name, x.name, err)
			}
			if link.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %s still %v after 5s", x.n.Name, x.name, link.Attrs().OperState)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// netem joins the two ends of each delay namespace with a bridge and
// attaches the delay (and rate) qdiscs to them when the kernel has netem:
// the end toward the server delays what goes to the server, the end toward
// the middlebox what goes to the client. (The development kernel has no
// sch_netem; Debian's kernels under scripts/vmtest.sh take this path.)
func (b *builder) netem() error {
	l := b.l
	if l.DelayMethod != DelayNetem {
		return nil
	}
	for i, p := range b.cfg.Paths {
		d := l.Delays[i]
		if d == nil {
			continue
		}
		if err := b.bridge(d, DelayIfMbox, DelayIfServer); err != nil {
			return err
		}
		if err := b.addNetem(d, DelayIfServer, p.DelayToServer, p); err != nil {
			return err
		}
		if err := b.addNetem(d, DelayIfMbox, p.DelayToClient, p); err != nil {
			return err
		}
	}
	return nil
}

// bridge creates delayBridge in n (no STP: its ports forward at once) with
// the interfaces ifnames as its ports, and brings it up.
func (b *builder) bridge(n *Node, ifnames ...string) error {
	h := b.handles[n]
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: delayBridge, MTU: mtu}}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("%s: bridge %s: %w", n.Name, delayBridge, err)
	}
	for _, name := range ifnames {
		link, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetMaster(link, br)
		}
		if err != nil {
			return fmt.Errorf("%s: %s into bridge %s: %w", n.Name, name, delayBridge, err)
		}
	}
	return b.setUp(n, delayBridge)
}

func (b *builder) addNetem(n *Node, ifname string, delay time.Duration, p PathSpec) error {
	h := b.handles[n]
	link, err := h.LinkByName(ifname)
	if err != nil {
		return err
	}
	attrs := netlink.NetemQdiscAttrs{
		Latency: uint32(delay / time.Microsecond),
		// netem's limit covers every packet it holds while delaying.
		Limit: uint32(ringSize(p, delay)),
	}
	q := netlink.NewNetem(netlink.QdiscAttrs{
		LinkIndex: link.Attrs().Index,
		Handle:    netlink.MakeHandle(1, 0),
		Parent:    netlink.HANDLE_ROOT,
	}, attrs)
	if err := h.QdiscAdd(q); err != nil {
		return fmt.Errorf("%s: netem on %s: %w", n.Name, ifname, err)
	}
	if p.RateBitsPerSec == 0 {
		return nil
	}
	// The bottleneck: netem's own rate would share netem's limit with the
	// delayed packets, so a tbf under netem serialises and drops instead
	// (delay, then queue: the same sum as the delay line's queue, then
	// delay).
	if err := h.QdiscAdd(newTbf(link.Attrs().Index, netlink.MakeHandle(1, 1), p)); err != nil {
		return fmt.Errorf("%s: tbf on %s: %w", n.Name, ifname, err)
	}
	return nil
}

// newTbf is the rate limiter of p: its queue holds QueuePackets full-size
// frames' worth of bytes, its burst two frames.
func newTbf(ifindex int, parent uint32, p PathSpec) *netlink.Tbf {
	const frame = mtu + 14
	burstNs := uint64(2*frame) * 8 * uint64(time.Second) / p.RateBitsPerSec
	return &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(10, 0), Parent: parent},
		Rate:       p.RateBitsPerSec / 8, // bytes per second
		Limit:      uint32(p.QueuePackets * frame),
		Buffer:     uint32(burstNs >> 6), // the kernel's tick is 64 ns (PSCHED_SHIFT)
	}
}

// Nodes returns every namespace of the lab in creation order.
func (l *Lab) Nodes() []*Node { return append([]*Node(nil), l.nodes...) }

// DelayStats returns the counters of each path's user-space delay line
// (zero values for paths delayed by netem).
func (l *Lab) DelayStats() []PathStats {
	out := make([]PathStats, len(l.Delays))
	j := 0
	for i, d := range l.Delays {
		if d == nil || j >= len(l.lines) {
			continue
		}
		out[i] = l.lines[j].stats()
		j++
	}
	return out
}

// Close stops the delay lines and removes every namespace the lab
// created. It is idempotent and safe on a partly built lab.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		for _, dl := range l.lines {
			dl.close()
		}
		var errs []error
		for i := len(l.nodes) - 1; i >= 0; i-- {
			if err := l.nodes[i].close(); err != nil {
				errs = append(errs, err)
			}
		}
		l.closeErr = errors.Join(errs...)
		if l.closeErr == nil && l.base != "" {
			removeMarker(l.base)
		}
	})
	return l.closeErr
}
