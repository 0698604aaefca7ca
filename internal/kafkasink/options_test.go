package kafkasink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseSpec reads every key and the brokers list.
func TestParseSpec(t *testing.T) {
	o, err := ParseSpec("brokers=a:1,b:2,topic=rtt,key=prefix,format=protobuf,compression=lz4,acks=leader,buffer=5,spool-dir=/x,close-timeout=3s,tls,tls-server-name=k")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Brokers, " ") != "a:1 b:2" || o.Topic != "rtt" || o.Key != "prefix" || o.Format != "protobuf" ||
		o.Compression != "lz4" || o.Acks != "leader" || o.Buffer != 5 || o.SpoolDir != "/x" || o.CloseTimeout != 3*time.Second ||
		!o.TLS || o.TLSServerName != "k" {
		t.Fatalf("%+v", o)
	}
	d, err := ParseSpec("brokers=h:9092,topic=t")
	if err != nil || d.Key != "flow" || d.Format != "jsonl" || d.Compression != "zstd" || d.Acks != "all" || d.Buffer != DefaultBuffer || d.TLS {
		t.Fatalf("defaults %+v %v", d, err)
	}
	for spec, want := range map[string]string{
		"":                                "brokers=HOST:PORT is missing",
		"brokers=h,topic=t":               `broker "h": want HOST:PORT`,
		"brokers=h:1,topic=t,acks=2":      `acks="2": want all, leader or none`,
		"brokers=h:1,topic=t,buffer=0":    "buffer=\"0\"",
		"brokers=h:1,topic=t,tls-cert=c":  "tls-cert and tls-key go together",
		"brokers=h:1,topic=t,sasl-user=u": "need sasl=MECHANISM",
		"topic=t,h:2":                     `"h:2": want KEY=VALUE`,
	} {
		if _, err := ParseSpec(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
}

// TestSASLPasswordFile: the password comes from a private file; a file
// others can read is refused.
func TestSASLPasswordFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := ParseSpec("brokers=h:1,topic=t,sasl=scram-sha-256,sasl-user=u,sasl-password-file=" + p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.clientOptions(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable password file: %v", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := o.clientOptions(); err != nil {
		t.Fatal(err)
	}
}
