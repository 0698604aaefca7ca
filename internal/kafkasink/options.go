// Package kafkasink is the Kafka sink (--kafka, docs/sinks.md): a
// format.Writer that produces each record as one Kafka message, jsonl or
// protobuf (internal/recordpb), keyed so that a flow's records stay in
// order in one partition. It uses franz-go with the idempotent producer and
// acks from all in-sync replicas by default. What the client cannot buffer
// (the brokers are unreachable or slow) goes to an on-disk spool bounded by
// a size, produced in order once the client has room again.
package kafkasink

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rttscope/rttscope/internal/flagval"
)

// Options configure the Kafka sink. ParseSpec fills them from --kafka.
type Options struct {
	// Brokers are the seed brokers (HOST:PORT).
	Brokers []string
	Topic   string
	// Key is what messages are keyed by: "flow" (a connection, both
	// directions) or "prefix" (the pair of the /24 or /48 prefixes of its
	// addresses; aggregated records by their prefix).
	Key string
	// Format of the message values: "jsonl" (one json line) or
	// "protobuf" (one rttscope.v1.Record).
	Format string
	// Compression of record batches: zstd, lz4, snappy, gzip or none.
	Compression string
	// Acks: "all" (every in-sync replica; the idempotent producer),
	// "leader" or "none" (both without idempotence).
	Acks string
	// Buffer is how many messages the client holds in memory, waiting for
	// the brokers, before the spool takes the next ones.
	Buffer int
	// SpoolDir holds the spool file; SpoolSize bounds it (bytes; 0: no
	// spool, what does not fit in Buffer is dropped).
	SpoolDir  string
	SpoolSize int64
	// CloseTimeout bounds how long the end of the run waits for the
	// brokers to take the spool and acknowledge what is buffered; what is
	// left then is counted as dropped.
	CloseTimeout time.Duration
	// TLS connects with TLS; TLSCA (PEM file) replaces the system roots,
	// TLSCert and TLSKey (PEM files) authenticate the client,
	// TLSServerName overrides the name checked in the broker certificate.
	TLS                                   bool
	TLSCA, TLSCert, TLSKey, TLSServerName string
	// SASL is the mechanism: "" (none), "plain", "scram-sha-256" or
	// "scram-sha-512"; the password is read from SASLPasswordFile (so it
	// is not on the command line).
	SASL, SASLUser, SASLPasswordFile string
}

// Defaults of ParseSpec.
const (
	DefaultBuffer       = 10_000
	DefaultCloseTimeout = 30 * time.Second
)

// Values of the keys that take a fixed set.
var (
	keys          = []string{"flow", "prefix"}
	formats       = []string{"jsonl", "protobuf"}
	compressions  = []string{"zstd", "lz4", "snappy", "gzip", "none"}
	acksNames     = []string{"all", "leader", "none"}
	saslNames     = []string{"plain", "scram-sha-256", "scram-sha-512"}
	specKeysOrder = []string{"brokers", "topic", "key", "format", "compression", "acks", "buffer", "spool-dir", "close-timeout",
		"tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "sasl", "sasl-user", "sasl-password-file"}
)

// SpecHelp describes the --kafka value.
const SpecHelp = "brokers=HOST:PORT[,HOST:PORT...],topic=T[,key=flow|prefix][,format=jsonl|protobuf][,compression=zstd|lz4|snappy|gzip|none]" +
	"[,acks=all|leader|none][,buffer=N][,spool-dir=DIR][,close-timeout=D][,tls][,tls-ca=F][,tls-cert=F,tls-key=F][,tls-server-name=N]" +
	"[,sasl=plain|scram-sha-256|scram-sha-512,sasl-user=U,sasl-password-file=F]"

// ParseSpec reads the --kafka value: comma-separated KEY=VALUE (tls alone
// turns TLS on); a value without "=" after brokers= is another broker.
func ParseSpec(spec string) (Options, error) {
	o := Options{Key: "flow", Format: "jsonl", Compression: "zstd", Acks: "all", Buffer: DefaultBuffer,
		SpoolDir: os.TempDir(), CloseTimeout: DefaultCloseTimeout}
	last := ""
	for part := range strings.SplitSeq(spec, ",") {
		if part == "" {
			continue
		}
		k, v, hasValue := strings.Cut(part, "=")
		if !hasValue {
			switch {
			case part == "tls":
				o.TLS, last = true, ""
				continue
			case last == "brokers":
				o.Brokers = append(o.Brokers, part)
				continue
			}
			return o, fmt.Errorf("%q: want KEY=VALUE (%s)", part, strings.Join(specKeysOrder, ", "))
		}
		last = k
		if err := o.set(k, v); err != nil {
			return o, err
		}
	}
	return o, o.Validate()
}

// set sets one key.
func (o *Options) set(k, v string) error {
	var err error
	switch k {
	case "brokers":
		o.Brokers = append(o.Brokers, v)
	case "topic":
		o.Topic = v
	case "key":
		err = oneOf(&o.Key, k, v, keys)
	case "format":
		err = oneOf(&o.Format, k, v, formats)
	case "compression":
		err = oneOf(&o.Compression, k, v, compressions)
	case "acks":
		err = oneOf(&o.Acks, k, v, acksNames)
	case "buffer":
		var n int64
		if _, serr := fmt.Sscan(v, &n); serr != nil || n < 1 || n > 10_000_000 {
			return fmt.Errorf("buffer=%q: want a number of messages from 1 to 10000000", v)
		}
		o.Buffer = int(n)
	case "spool-dir":
		o.SpoolDir = v
	case "close-timeout":
		d, derr := time.ParseDuration(v)
		if derr != nil || d < 0 {
			return fmt.Errorf("close-timeout=%q: want a duration such as 30s", v)
		}
		o.CloseTimeout = d
	case "tls-ca":
		o.TLSCA, o.TLS = v, true
	case "tls-cert":
		o.TLSCert, o.TLS = v, true
	case "tls-key":
		o.TLSKey, o.TLS = v, true
	case "tls-server-name":
		o.TLSServerName, o.TLS = v, true
	case "sasl":
		err = oneOf(&o.SASL, k, v, saslNames)
	case "sasl-user":
		o.SASLUser = v
	case "sasl-password-file":
		o.SASLPasswordFile = v
	default:
		return fmt.Errorf("unknown key %q (valid: %s)", k, strings.Join(specKeysOrder, ", "))
	}
	return err
}

func oneOf(p *string, k, v string, names []string) error {
	if err := flagval.OneOf(p, names...).Set(v); err != nil {
		return fmt.Errorf("%s=%q: %w", k, v, err)
	}
	return nil
}

// Validate reports the first thing missing or not going together.
func (o *Options) Validate() error {
	if len(o.Brokers) == 0 {
		return errors.New("brokers=HOST:PORT is missing")
	}
	for _, b := range o.Brokers {
		if !strings.Contains(b, ":") {
			return fmt.Errorf("broker %q: want HOST:PORT", b)
		}
	}
	switch {
	case o.Topic == "":
		return errors.New("topic=NAME is missing")
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return errors.New("tls-cert and tls-key go together")
	case o.SASL != "" && (o.SASLUser == "" || o.SASLPasswordFile == ""):
		return errors.New("sasl needs sasl-user and sasl-password-file")
	case o.SASL == "" && (o.SASLUser != "" || o.SASLPasswordFile != ""):
		return errors.New("sasl-user and sasl-password-file need sasl=MECHANISM")
	case o.SpoolSize < 0:
		return errors.New("--spool-size must not be negative")
	}
	return nil
}
