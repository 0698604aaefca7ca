package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/lab"
)

func init() { subcommands = append(subcommands, newLabCmd) }

const labLong = `Build a throw-away test network of network namespaces and keep it up until
interrupted (SIGINT, SIGTERM or SIGHUP), then tear it down again.

  +--------+ eth0       mb-cli +-----------+ mb-srv0    +---------+      eth0 +----------+
  | client |-------------------| middlebox |------------| delay 0 |-----------| server 0 |
  +--------+ 10.10.0.2         | forwards  | 10.20.0.1  +---------+ 10.20.0.2 +----------+
             fd00:10::2        | IPv4 and  | fd00:20::1           fd00:20::2
                    10.10.0.1  | IPv6      | mb-srv1    +---------+      eth0 +----------+
                    fd00:10::1 |           |------------| delay 1 |-----------| server 1 |
                               +-----------+ 10.20.1.1  +---------+ 10.20.1.2 +----------+
                                             fd00:20:1::1         fd00:20:1::2

Each --path adds a server behind the middlebox. Its one-way delays (and
optional bottleneck rate) are added between the middlebox and that server:
by netem when the kernel has it, otherwise by a user-space delay line that
runs inside this process in its own "delay" namespace (the delay boxes
exist only then; with netem the servers hang off the middlebox directly).
Path i uses 10.20.i.0/24 and fd00:20:i::/64 (middlebox .1 / ::1, server .2 / ::2); the
client is 10.10.0.2 / fd00:10::2 behind 10.10.0.1 / fd00:10::1.

Run rttscope on the middlebox to watch the client's flows, e.g.
  ip netns exec PREFIX-XXXXXX-mb rttscope monitor -i mb-cli

PATH is DELAY[/RETURN_DELAY][@RATE]: DELAY toward the server, RETURN_DELAY
toward the client (default: DELAY), RATE a bottleneck in both directions
(bit/s: 50mbit, 1gbit, 500kbit; or bytes/s: 10mbps). So "--path 20ms"
adds 40 ms of round-trip time.

Namespaces are named PREFIX-XXXXXX-{cli,mb,dlN,srvN} with a random XXXXXX.
If this process is killed with SIGKILL they stay behind until the next
"rttscope lab" removes them (or "ip netns del NAME"). Processes you start
inside them keep a namespace alive (unnamed) until they exit.`

func newLabCmd() *cobra.Command {
	var (
		paths     []string
		delays    []string
		prefix    string
		queue     int
		userspace bool
	)
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Build a client/middlebox/server namespace lab with delayed paths",
		Long:  labLong,
		Example: `  rttscope lab                                 # one server, 20 ms each way
  rttscope lab --path 5ms --path 20ms/10ms@50mbit
  rttscope lab --path 10ms@20mbit --queue 100`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Sprintf("lab takes no arguments (got %q); use --path", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := labConfig(append(paths, delays...), prefix, queue, userspace)
			if err != nil {
				return err
			}
			return runLab(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	f := cmd.Flags()
	f.StringArrayVar(&paths, "path", nil, "a path to one more server: DELAY[/RETURN_DELAY][@RATE] (repeatable; default 20ms)")
	f.StringSliceVar(&delays, "delay", nil, "comma-separated paths, same syntax as --path (e.g. --delay 20ms,5ms/1ms)")
	f.StringVar(&prefix, "prefix", lab.DefaultPrefix, "namespace name prefix (letters, digits, - and _; at most 16)")
	f.IntVar(&queue, "queue", lab.DefaultQueuePackets, "bottleneck queue limit in packets for rate-limited paths (drop tail)")
	f.BoolVar(&userspace, "userspace-delay", false, "use the user-space delay line even if the kernel has netem")
	return cmd
}

// labConfig turns the flag values into a lab configuration; every error
// is a one-line usageError.
func labConfig(specs []string, prefix string, queue int, userspace bool) (lab.Config, error) {
	cfg := lab.Config{Prefix: prefix, ForceUserspaceDelay: userspace}
	if len(specs) == 0 {
		specs = []string{"20ms"}
	}
	if queue <= 0 {
		return cfg, usageError{fmt.Sprintf("invalid --queue %d: must be a positive number of packets", queue)}
	}
	for _, s := range specs {
		p, err := lab.ParsePath(s)
		if err != nil {
			return cfg, usageError{fmt.Sprintf("invalid --path %q: %v", s, err)}
		}
		p.QueuePackets = queue
		cfg.Paths = append(cfg.Paths, p)
	}
	if len(cfg.Paths) > 64 {
		return cfg, usageError{fmt.Sprintf("too many paths (%d): at most 64", len(cfg.Paths))}
	}
	if prefix == "" || len(prefix) > 16 || strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return cfg, usageError{fmt.Sprintf("invalid --prefix %q: use 1 to 16 letters, digits, '-' or '_'", prefix)}
	}
	return cfg, nil
}

func runLab(parent context.Context, out io.Writer, cfg lab.Config) error {
	if os.Geteuid() != 0 {
		return errors.New("lab: must run as root (creates network namespaces)")
	}
	ignoreSIGPIPE()
	ctx, stop := stopContext(parent, true)
	defer stop()
	if removed, err := lab.CleanupStale(); len(removed) > 0 {
		fmt.Fprintf(out, "removed namespaces of labs whose process died: %s\n", strings.Join(removed, " "))
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "rttscope: warning: cleaning up stale labs: %v\n", err)
	}
	l, err := lab.New(ctx, cfg)
	if err != nil {
		return err
	}
	printLab(out, l)
	<-ctx.Done()
	fmt.Fprintln(out, "\ntearing the lab down")
	if l.DelayMethod == lab.DelayUserspace {
		for i, st := range l.DelayStats() {
			for _, d := range []struct {
				dir string
				s   lab.DirStats
			}{{"to server", st.ToServer}, {"to client", st.ToClient}} {
				fmt.Fprintf(out, "  path %d %s: %d forwarded, %d dropped (queue %d, ring %d, socket %d, oversize %d, send %d), release late by %v on average, %v at most\n",
					i, d.dir, d.s.Forwarded, d.s.Dropped(), d.s.QueueDrops, d.s.RingDrops, d.s.KernelDrops, d.s.Oversize, d.s.SendErrors, d.s.MeanLate, d.s.MaxLate)
			}
		}
	}
	return l.Close()
}

func printLab(out io.Writer, l *lab.Lab) {
	self := "rttscope"
	if exe, err := os.Executable(); err == nil {
		self = exe
		if abs, err := filepath.Abs(exe); err == nil {
			self = abs
		}
	}
	fmt.Fprintf(out, "lab up (delay by %s)\n\n", l.DelayMethod)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tNAMESPACE\tINTERFACE\tADDRESSES\tNOTE")
	fmt.Fprintf(tw, "client\t%s\t%s\t%s/24 %s/64\tdefault via middlebox\n", l.Client.Name, lab.ClientIf, l.ClientAddr4, l.ClientAddr6)
	fmt.Fprintf(tw, "middlebox\t%s\t%s\t%s/24 %s/64\ttoward client\n", l.Middlebox.Name, l.MiddleboxClientIf, l.MiddleboxAddr4, l.MiddleboxAddr6)
	for i := range l.Servers {
		fmt.Fprintf(tw, "\t\t%s\t%s/24 %s/64\ttoward server %d\n", l.MiddleboxServerIf[i], l.MiddleboxServerAddr4[i], l.MiddleboxServerAddr6[i], i)
	}
	for i, s := range l.Servers {
		p := l.Paths[i]
		rate := "unlimited"
		if p.RateBitsPerSec > 0 {
			rate = fmt.Sprintf("%s, queue %d pkts", lab.FormatRate(p.RateBitsPerSec), p.QueuePackets)
		}
		if d := l.Delays[i]; d != nil {
			how := "user-space delay line"
			if l.DelayMethod == lab.DelayNetem {
				how = "netem on both ends, bridged"
			}
			fmt.Fprintf(tw, "delay %d\t%s\t%s, %s\t\t%s\n", i, d.Name, lab.DelayIfMbox, lab.DelayIfServer, how)
		}
		fmt.Fprintf(tw, "server %d\t%s\t%s\t%s/24 %s/64\tpath %d: +%v to server, +%v to client, %s\n",
			i, s.Name, lab.ServerIf, l.ServerAddr4[i], l.ServerAddr6[i], i, p.DelayToServer, p.DelayToClient, rate)
	}
	_ = tw.Flush() // terminal text, like the lines above

	mb, cli, srv := l.Middlebox.Name, l.Client.Name, l.Servers[0].Name
	fmt.Fprintf(out, `
Try, in another terminal:
  ip netns exec %[1]s %[4]s monitor -i %[5]s
  ip netns exec %[2]s ping -c 5 %[6]s
  ip netns exec %[2]s ping -c 5 %[7]s
  ip netns exec %[3]s iperf3 -s -1 &  ip netns exec %[2]s iperf3 -c %[6]s -t 10
  ip netns exec %[1]s tcpdump -ni %[5]s

Press Ctrl-C to tear the lab down.
`, mb, cli, srv, self, l.MiddleboxClientIf, l.ServerAddr4[0], l.ServerAddr6[0])
}
