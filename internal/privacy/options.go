// Package privacy applies rttscope's privacy options (docs/privacy.md) to
// every record on its way to an output, in the process, before any file,
// socket, terminal or sink sees it: addresses anonymized (or dropped and
// replaced by per-run flow numbers), ports optionally permuted, times made
// relative and coarsened, and counters left out (--minimal).
//
// Wrap puts a Writer in front of a format.Writer; everything the monitor
// and replay write goes through it. The kernel still sees and aggregates
// real addresses (prefixes are computed on them); only what leaves the
// process is changed. Keys live in memory only and are never printed: an
// AnonKey record names each key by anon.KeyID.
package privacy

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/rttscope/rttscope/internal/anon"
	"github.com/rttscope/rttscope/internal/format"
)

// Options are the privacy choices of one run; the zero value changes
// nothing.
type Options struct {
	// Anonymize is the address mode as given on the command line: none,
	// drop, pfx, cryptopan, det or trunc:V4BITS,V6BITS ("" = none).
	Anonymize string
	// KeyFile holds the key (hex or raw) of a keyed mode; "" means a
	// random key made at start and never written anywhere.
	KeyFile string
	// KeyRotate, when > 0, starts a new key after this much traffic time.
	KeyRotate time.Duration
	// AnonymizePorts maps ports and ICMP echo identifiers with a keyed
	// permutation per protocol.
	AnonymizePorts bool
	// RelativeTime makes every timestamp relative to the run's origin
	// (Writer.SetOrigin; else the first record).
	RelativeTime bool
	// TimeResolution, when > 0, rounds reported times (not RTTs) down to
	// a multiple of it.
	TimeResolution time.Duration
	// Minimal keeps only what RTT analysis needs: no packet or byte
	// counters, no flow events; it implies RelativeTime.
	Minimal bool
}

// AddFlags defines the privacy flags on fs, writing into o.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Anonymize, "anonymize", "none", "address anonymization: none, drop (no addresses; flows numbered per run), pfx (ipcrypt-pfx, prefix-preserving), cryptopan (Crypto-PAn, prefix-preserving), det (ipcrypt-deterministic; printed as IPv6) or trunc:V4BITS,V6BITS (keep the first bits); see docs/privacy.md")
	fs.StringVar(&o.KeyFile, "anon-key-file", "", "key for pfx, cryptopan, det and --anonymize-ports, as hex or raw bytes (32 bytes for pfx and cryptopan, 16 for det and ports only); the file must not be readable by group or others (default: a random key that only lives in memory)")
	fs.DurationVar(&o.KeyRotate, "anon-key-rotate", 0, "start a new key after this much traffic time (an anonymization record with the new key's id marks the change; 0 = one key per run)")
	fs.BoolVar(&o.AnonymizePorts, "anonymize-ports", false, "map ports and ICMP echo identifiers with a keyed permutation per protocol")
	fs.BoolVar(&o.RelativeTime, "relative-time", false, "report times relative to the start of the run (replay: its first packet), so that the standard format shows the elapsed HH:MM:SS")
	fs.DurationVar(&o.TimeResolution, "time-resolution", 0, "round reported times (not RTTs) down to a multiple of this (e.g. 1s)")
	fs.BoolVar(&o.Minimal, "minimal", false, "keep only what RTT analysis needs: addresses (as --anonymize makes them), ports, RTTs and relative times; no packet or byte counters, no flow events")
}

// Validate reports the first option that cannot work, in the words of the
// command line.
func (o Options) Validate() error {
	m, err := o.mode()
	if err != nil {
		return err
	}
	switch {
	case o.KeyFile != "" && m.KeySize() == 0 && !o.AnonymizePorts:
		return fmt.Errorf("--anon-key-file: --anonymize %s takes no key (only pfx, cryptopan, det and --anonymize-ports do)", m)
	case o.KeyRotate < 0:
		return errors.New("--anon-key-rotate must be >= 0")
	case o.KeyRotate > 0 && m.KeySize() == 0 && !o.AnonymizePorts:
		return fmt.Errorf("--anon-key-rotate: --anonymize %s has no key to rotate", m)
	case o.TimeResolution < 0:
		return errors.New("--time-resolution must be >= 0")
	}
	return nil
}

func (o Options) mode() (anon.Mode, error) {
	if o.Anonymize == "" {
		return anon.ParseMode("none")
	}
	return anon.ParseMode(o.Anonymize)
}

// Active reports whether o changes anything.
func (o Options) Active() bool {
	m, err := o.mode()
	return err != nil || m.Kind != "none" || o.AnonymizePorts || o.RelativeTime || o.TimeResolution > 0 || o.Minimal
}

// KeepsAddresses reports whether real addresses are written (--anonymize
// none), so a command can warn when --minimal is given without it.
func (o Options) KeepsAddresses() bool {
	m, err := o.mode()
	return err == nil && m.Kind == "none"
}

// FormatOptions sets what the format writer must do for o: leave out
// counters (Minimal) and show relative times of day in UTC, so that the
// standard format's HH:MM:SS is the time elapsed since the origin.
func (o Options) FormatOptions(f *format.Options) {
	f.Minimal = o.Minimal
	if o.RelativeTime || o.Minimal {
		f.Location = time.UTC
	}
}
