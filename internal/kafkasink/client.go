package kafkasink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// clientOptions are the franz-go options for o.
func (o *Options) clientOptions() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.DefaultProduceTopic(o.Topic),
		// The client may hold a little more than Buffer: the spool keeps
		// the rest (Writer.room).
		kgo.MaxBufferedRecords(o.Buffer),
		kgo.ProducerBatchCompression(codec(o.Compression)),
	}
	switch o.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks())) // idempotent: franz-go's default
	case "leader":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "none":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	if o.TLS {
		c, err := o.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	if o.SASL != "" {
		m, err := o.saslMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func codec(name string) kgo.CompressionCodec {
	switch name {
	case "zstd":
		return kgo.ZstdCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "snappy":
		return kgo.SnappyCompression()
	case "gzip":
		return kgo.GzipCompression()
	}
	return kgo.NoCompression()
}

// tlsConfig reads the CA and client certificate files.
func (o *Options) tlsConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.TLSServerName}
	if o.TLSCA != "" {
		pem, err := os.ReadFile(o.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("kafka tls-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka tls-ca: no PEM certificate in %s", o.TLSCA)
		}
	}
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("kafka tls-cert/tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// saslMechanism reads the password file (first line; the file must not be
// readable by others, like --anon-key-file).
func (o *Options) saslMechanism() (sasl.Mechanism, error) {
	st, err := os.Stat(o.SASLPasswordFile)
	if err != nil {
		return nil, fmt.Errorf("kafka sasl-password-file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("kafka sasl-password-file %s: readable by group or others (mode %o): chmod 600 it", o.SASLPasswordFile, st.Mode().Perm())
	}
	b, err := os.ReadFile(o.SASLPasswordFile)
	if err != nil {
		return nil, fmt.Errorf("kafka sasl-password-file: %w", err)
	}
	pass, _, _ := strings.Cut(string(b), "\n")
	if pass == "" {
		return nil, errors.New("kafka sasl-password-file: empty password")
	}
	switch o.SASL {
	case "plain":
		return plain.Auth{User: o.SASLUser, Pass: pass}.AsMechanism(), nil
	case "scram-sha-256":
		return scram.Auth{User: o.SASLUser, Pass: pass}.AsSha256Mechanism(), nil
	}
	return scram.Auth{User: o.SASLUser, Pass: pass}.AsSha512Mechanism(), nil
}
