package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rttscope/rttscope/internal/demo"
	"github.com/rttscope/rttscope/internal/format"
	"github.com/rttscope/rttscope/internal/lab"
	"github.com/rttscope/rttscope/internal/sampling"
)

func init() { subcommands = append(subcommands, newDemoCmd) }

const demoLong = `Show rttscope at work in about 15 seconds, on a throw-away lab (see
"rttscope lab") that is torn down at the end, on error and on Ctrl-C:

  client ── middlebox ══ path 0 (10 ms round trip) ══ server 0
                      ══ path 1 (40 ms round trip) ══ server 1

rttscope monitors the middlebox's server-facing interfaces (TCP and ICMP)
while the client pings every server (IPv4 and IPv6) and then sends a paced
TCP bulk transfer to each. The RTT samples are printed live on stdout (in
the --format of "rttscope monitor"), progress on stderr, and at the end a
summary per path: the configured RTT next to the medians of the client's
own pings and of rttscope's ICMP and TCP samples. With a machine format
(ppviz, json, jsonl) the summary goes to stderr so stdout stays parseable.

The delay of a path sits between the middlebox and the server, so the
monitor sees the path's RTT: what the client's ping sees minus the short
client-middlebox leg. Needs root.`

func newDemoCmd() *cobra.Command {
	cfg := demo.Config{Sampling: sampling.Default(), Duration: demo.DefaultDuration}
	var (
		paths     []string
		formatArg string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run rttscope on a throw-away lab with two paths and print what it measures",
		Long:  demoLong,
		Example: `  sudo rttscope demo
  sudo rttscope demo --path 2ms --path 30ms/10ms --duration 20s
  sudo rttscope demo --format jsonl --rate-limit 0 > samples.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := demoPaths(&cfg, paths); err != nil {
				return err
			}
			return runDemo(cmd, cfg, formatArg)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&paths, "path", nil, "a path to one more server: DELAY[/RETURN_DELAY][@RATE] as in \"rttscope lab\" (repeatable; default 5ms and 20ms, i.e. 10 ms and 40 ms round trip)")
	fl.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the traffic phase: pings for the first half, TCP bulk transfers for the second")
	fl.VarP(formatFlag(&formatArg), "format", "F", "output format of the live samples: "+strings.Join(format.Names(), ", "))
	cfg.Sampling.AddFlags(fl, func(name string) bool { return name == "rate-limit" })
	fl.Lookup("rate-limit").Usage = "monitor's minimum time between two timestamps of one flow direction: milliseconds (e.g. 100) or a duration (e.g. 250us); 0 samples every new identifier"
	return cmd
}

// demoPaths checks the paths and the duration into cfg; every error is a
// one-line usageError.
func demoPaths(cfg *demo.Config, paths []string) error {
	for _, s := range paths {
		p, err := lab.ParsePath(s)
		if err != nil {
			return usageError{fmt.Sprintf("invalid --path %q: %v", s, err)}
		}
		cfg.Paths = append(cfg.Paths, p)
	}
	if len(cfg.Paths) > 8 {
		return usageError{fmt.Sprintf("too many paths (%d): the demo takes at most 8", len(cfg.Paths))}
	}
	if cfg.Duration < demo.MinDuration {
		return usageError{fmt.Sprintf("invalid --duration %v: at least %v", cfg.Duration, demo.MinDuration)}
	}
	return nil
}

func runDemo(cmd *cobra.Command, cfg demo.Config, formatArg string) error {
	if os.Geteuid() != 0 {
		return demo.ErrNotRoot
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	out, err := format.New(formatArg, stdout, format.Options{StatsTo: stderr})
	if err != nil {
		return usageError{err.Error()}
	}
	cfg.Output = out
	cfg.Progress = prefixWriter{stderr}
	ignoreSIGPIPE()
	ctx, stop := stopContext(cmd.Context(), true)
	defer stop()

	res, err := demo.Run(ctx, cfg)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if res != nil && len(res.Paths) > 0 && (err == nil || res.Interrupted) {
		summaryTo := stdout
		if formatArg != "standard" {
			summaryTo = stderr
		}
		fmt.Fprintln(summaryTo)
		if res.Interrupted {
			fmt.Fprintln(summaryTo, "interrupted: figures so far")
		}
		if werr := res.WriteSummary(summaryTo); err == nil {
			err = werr
		}
	}
	if err == nil && res != nil && res.Interrupted {
		return errors.New("demo interrupted")
	}
	return err
}

// prefixWriter marks progress lines that do not carry rttscope's name yet
// (the monitor's own log lines already start with "rttscope:").
type prefixWriter struct{ w io.Writer }

func (p prefixWriter) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), "rttscope") {
		return p.w.Write(b)
	}
	if _, err := io.WriteString(p.w, "rttscope demo: "+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
