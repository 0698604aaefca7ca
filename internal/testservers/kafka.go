package testservers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// KafkaVersion is the broker the tests run: kafka.version of
// scripts/kafka/pom.xml.
const KafkaVersion = "4.1.1"

// kafkaLibs is where scripts/kafka/fetch.sh puts the jars;
// RTTSCOPE_KAFKA_LIBS overrides it.
func kafkaLibs() string {
	if d := os.Getenv("RTTSCOPE_KAFKA_LIBS"); d != "" {
		return d
	}
	return "/var/cache/rttscope/kafka/" + KafkaVersion + "/lib"
}

// Kafka is a single-node broker (broker and KRaft controller in one JVM).
type Kafka struct {
	// Addr is the PLAINTEXT listener, 127.0.0.1:PORT.
	Addr string
	t    testing.TB
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartKafka formats a log directory and starts a broker on it, waiting
// until it accepts connections. The broker is killed at the end of the
// test.
func StartKafka(t testing.TB) *Kafka {
	t.Helper()
	libs := kafkaLibs()
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+KafkaVersion+".jar")); err != nil {
		missing(t, "no Kafka jars in "+libs)
	}
	if _, err := exec.LookPath("java"); err != nil {
		missing(t, "no java")
	}
	k := &Kafka{t: t, dir: t.TempDir()}
	port, cport := freePort(t), freePort(t)
	k.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%d
listeners=PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d
advertised.listeners=PLAINTEXT://%s
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%s
num.partitions=4
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
`, cport, k.Addr, cport, k.Addr, filepath.Join(k.dir, "data"))
	if err := os.WriteFile(filepath.Join(k.dir, "server.properties"), []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	format := k.java("kafka.tools.StorageTool", "format", "-t", base64.RawURLEncoding.EncodeToString(id), "-c", filepath.Join(k.dir, "server.properties"))
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("kafka storage format: %v\n%s", err, out)
	}
	k.Start()
	t.Cleanup(k.kill)
	return k
}

// java returns the command running class with the Kafka jars.
func (k *Kafka) java(class string, args ...string) *exec.Cmd {
	a := []string{"-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Dlog4j2.level=warn", "-cp", filepath.Join(kafkaLibs(), "*"), class}
	return exec.Command("java", append(a, args...)...)
}

// Start starts the broker (again, after Stop) and waits until its
// listener accepts connections.
func (k *Kafka) Start() {
	k.t.Helper()
	log, err := os.OpenFile(filepath.Join(k.dir, "kafka.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		k.t.Fatal(err)
	}
	defer log.Close()
	k.cmd = k.java("kafka.Kafka", filepath.Join(k.dir, "server.properties"))
	k.cmd.Stdout, k.cmd.Stderr = log, log
	if err := k.cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(k.cmd, k.done)
	// The limit only turns a broker that never comes up into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", k.Addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-k.done:
			k.t.Fatalf("kafka exited at start:\n%s", k.Log())
		case <-ctx.Done():
			k.t.Fatalf("kafka did not listen on %s:\n%s", k.Addr, k.Log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop shuts the broker down (SIGTERM, as an operator would; SIGKILL if
// it has not exited after a minute) and waits until it has.
func (k *Kafka) Stop() {
	if k.cmd == nil {
		return
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(time.Minute):
		_ = k.cmd.Process.Kill()
		<-k.done
	}
	k.cmd = nil
}

// kill ends the broker at the end of the test.
func (k *Kafka) kill() {
	if k.cmd != nil {
		_ = k.cmd.Process.Kill()
		<-k.done
		k.cmd = nil
	}
}

// Log returns the broker's output so far (for failure messages).
func (k *Kafka) Log() string {
	b, _ := os.ReadFile(filepath.Join(k.dir, "kafka.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}
