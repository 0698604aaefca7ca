package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/rttscope/rttscope/internal/loader"
	"github.com/rttscope/rttscope/internal/nsrun"
)

// inspect resolves the interface names in the run's namespace, before
// anything is loaded: a name given twice or not found is an error naming it.
func inspect(opts Options) ([]loader.Interface, error) {
	var ifaces []loader.Interface
	seen := map[string]bool{}
	err := nsrun.Named(opts.Netns, func() error {
		for _, name := range opts.Interfaces {
			if seen[name] {
				return fmt.Errorf("interface %q given twice", name)
			}
			seen[name] = true
			ifc, err := loader.Inspect(name)
			if err != nil {
				return err
			}
			ifaces = append(ifaces, ifc)
		}
		return nil
	})
	return ifaces, err
}

// attachments tracks the live hooks; an interface that disappears is
// dropped while the others keep running.
type attachments struct {
	mu sync.Mutex
	m  map[int]*loader.Attachment
}

// attachAll hooks every interface; on error nothing stays attached.
func attachAll(objs *loader.Objects, ifaces []loader.Interface, opts Options) (*attachments, error) {
	atts := &attachments{m: map[int]*loader.Attachment{}}
	err := nsrun.Named(opts.Netns, func() error {
		for _, ifc := range ifaces {
			a, err := objs.Attach(ifc, opts.Attach)
			if err != nil {
				return err
			}
			atts.m[ifc.Index] = a
		}
		return nil
	})
	if err != nil {
		_ = atts.closeAll() // the attach error is the one to report
		return nil, err
	}
	return atts, nil
}

func (a *attachments) list() []*loader.Attachment {
	a.mu.Lock()
	defer a.mu.Unlock()
	var l []*loader.Attachment
	for _, x := range a.m {
		l = append(l, x)
	}
	return l
}

// drop forgets (and closes) the hooks of a vanished interface and says
// whether any interface is left.
func (a *attachments) drop(ifindex int) (name string, found, left bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	x, ok := a.m[ifindex]
	if ok {
		name = x.Iface.Name
		_ = x.Close() // the interface is gone, and its hooks with it
		delete(a.m, ifindex)
	}
	return name, ok, len(a.m) > 0
}

// closeAll detaches everything; safe to call more than once.
func (a *attachments) closeAll() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for idx, x := range a.m {
		if err := x.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(a.m, idx)
	}
	return errors.Join(errs...)
}

// watchLinks reports removed interfaces; the returned channel is closed
// when none of the monitored ones is left.
func watchLinks(ctx context.Context, nsName string, atts *attachments, log io.Writer) <-chan struct{} {
	gone := make(chan struct{})
	updates := make(chan netlink.LinkUpdate, 16)
	done := make(chan struct{})
	opts := netlink.LinkSubscribeOptions{ErrorCallback: func(error) {}}
	if nsName != "" {
		h, err := netns.GetFromName(nsName)
		if err != nil {
			fmt.Fprintf(log, "rttscope: warning: cannot watch interfaces in %s: %v\n", nsName, err)
			return gone
		}
		defer h.Close()
		opts.Namespace = &h
	}
	if err := netlink.LinkSubscribeWithOptions(updates, done, opts); err != nil {
		fmt.Fprintf(log, "rttscope: warning: cannot watch interfaces: %v\n", err)
		return gone
	}
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case u, ok := <-updates:
				if !ok {
					return
				}
				if u.Header.Type != unix.RTM_DELLINK {
					continue
				}
				name, found, left := atts.drop(int(u.Index))
				if !found {
					continue
				}
				fmt.Fprintf(log, "rttscope: interface %s disappeared; stopped watching it\n", name)
				if !left {
					close(gone)
					return
				}
			}
		}
	}()
	return gone
}
