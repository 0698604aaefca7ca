// Package testservers starts the real servers that the sinks' tests talk
// to (docs/sinks.md, "Tests"): an Apache Kafka broker in KRaft mode from
// the Maven Central jars that scripts/kafka/fetch.sh caches, and a
// Prometheus server (Debian's package). Each listens on 127.0.0.1 on free
// ports, keeps its data in the test's temporary directory and is killed
// when the test ends, also when it fails.
package testservers

import (
	"net"
	"os"
	"testing"
)

// missing reports a server that is not installed: a failure in CI (which
// runs scripts/setup.sh, which installs it), a skip with the reason
// elsewhere.
func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: run scripts/setup.sh", what)
	}
	t.Skipf("%s (scripts/setup.sh installs it)", what)
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
