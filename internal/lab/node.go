package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/nsrun"
)

// netnsDir is where named network namespaces live, as with `ip netns`.
const netnsDir = "/run/netns"

// Node is one network namespace of a lab, named under /run/netns so that
// `ip netns exec NAME ...` works on it from any shell.
type Node struct {
	// Name is the namespace name under /run/netns.
	Name string

	mu sync.Mutex
	fd int // open handle on the namespace; -1 once closed
}

// Path is the bind-mounted namespace file, /run/netns/NAME.
func (n *Node) Path() string { return filepath.Join(netnsDir, n.Name) }

// Do runs fn on an OS thread that has been switched into the node's network
// namespace (see nsrun.Fd). Sockets created by fn belong to the namespace and
// may be used from any goroutine afterwards. Goroutines that fn starts do NOT
// run in the namespace. fn runs on a fresh goroutine that is locked to its
// thread; the thread is switched back afterwards, and if that fails it is
// left locked so the Go runtime throws it away instead of reusing it. A panic
// in fn is re-raised in the caller.
func (n *Node) Do(fn func() error) error {
	n.mu.Lock()
	fd := n.fd
	n.mu.Unlock()
	if fd < 0 {
		return fmt.Errorf("netns %s: node is closed", n.Name)
	}
	return nsrun.Fd(fd, n.Name, fn)
}

// Command returns a command that runs name inside the node's namespace via
// `ip netns exec`.
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Sysctl reads a sysctl (dotted key, e.g. "net.ipv4.tcp_timestamps") as
// seen inside the node's namespace.
func (n *Node) Sysctl(key string) (string, error) {
	var v string
	err := n.Do(func() error {
		b, err := os.ReadFile(sysctlPath(key))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// SetSysctl writes a sysctl inside the node's namespace.
func (n *Node) SetSysctl(key, value string) error {
	return n.Do(func() error { return os.WriteFile(sysctlPath(key), []byte(value), 0o644) })
}

func sysctlPath(key string) string {
	return "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
}

// setSysctls writes several sysctls in one namespace switch.
func (n *Node) setSysctls(kv ...string) error {
	return n.Do(func() error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := os.WriteFile(sysctlPath(kv[i]), []byte(kv[i+1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", kv[i], kv[i+1], err)
			}
		}
		return nil
	})
}

// ensureNetnsDir makes /run/netns a shared mount point the way iproute2
// does, so namespaces mounted there behave like ones made by `ip netns add`.
func ensureNetnsDir() error {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == unix.EINVAL {
		// Not a mount point yet: bind it onto itself, then share it.
		if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", netnsDir, err)
		}
		err = unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return fmt.Errorf("make %s shared: %w", netnsDir, err)
	}
	return nil
}

// newNode creates a fresh named network namespace. It fails if the name is
// taken, so it never adopts a namespace somebody else made.
func newNode(name string) (*Node, error) {
	p := filepath.Join(netnsDir, name)
	f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	f.Close()

	// Unshare on a throwaway locked thread, bind its namespace to the file,
	// and let the thread die with the goroutine (no need to switch back).
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately never unlocked: the thread is discarded on exit.
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, p, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind mount %s: %w", p, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(p) // the error is the one to report
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = removeNetns(name) // the open error is the one to report
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	return &Node{Name: name, fd: fd}, nil
}

// close releases the namespace handle and removes the name. The kernel
// destroys the namespace (and its interfaces) once nothing refers to it.
func (n *Node) close() error {
	n.mu.Lock()
	fd := n.fd
	n.fd = -1
	n.mu.Unlock()
	if fd >= 0 {
		unix.Close(fd)
	}
	return removeNetns(n.Name)
}

func removeNetns(name string) error {
	p := filepath.Join(netnsDir, name)
	err := unix.Unmount(p, unix.MNT_DETACH)
	if err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// fdHandle returns the raw namespace fd (for netlink handles).
func (n *Node) fdHandle() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fd
}
