package testservers

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// Kafka is a single-node broker (broker and KRaft controller in one JVM)
// run by scripts/kafka/broker.sh.
type Kafka struct {
	// Addr is the PLAINTEXT listener, 127.0.0.1:PORT.
	Addr  string
	t     testing.TB
	dir   string
	cport int
	jvm   string // RTTSCOPE_KAFKA_JVM for broker.sh ("": its defaults)
	cmd   *exec.Cmd
	done  chan struct{}
}

// brokerScript is scripts/kafka/broker.sh of this source tree.
func brokerScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kafka", "broker.sh")
}

// StartKafka starts a broker with a log directory of its own on free
// ports, waiting until it accepts connections. The broker is killed at the
// end of the test.
func StartKafka(t testing.TB) *Kafka { return startKafka(t, "") }

// StartKafkaJIT is StartKafka with the JVM's full JIT and a 1 GiB heap:
// slower to start, faster once warm (benchmarks).
func StartKafkaJIT(t testing.TB) *Kafka {
	return startKafka(t, "-Xms1g -Xmx1g -XX:+UseParallelGC")
}

func startKafka(t testing.TB, jvm string) *Kafka {
	t.Helper()
	libs := kafkaLibs()
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+KafkaVersion+".jar")); err != nil {
		missing(t, "no Kafka jars in "+libs)
	}
	if _, err := exec.LookPath("java"); err != nil {
		missing(t, "no java")
	}
	k := &Kafka{t: t, dir: t.TempDir(), cport: freePort(t), jvm: jvm}
	k.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	k.Start()
	t.Cleanup(k.kill)
	return k
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
	_, port, _ := net.SplitHostPort(k.Addr)
	k.cmd = exec.Command(brokerScript(), k.dir, port, strconv.Itoa(k.cport))
	k.cmd.Env = append(os.Environ(), "RTTSCOPE_KAFKA_LIBS="+kafkaLibs())
	if k.jvm != "" {
		k.cmd.Env = append(k.cmd.Env, "RTTSCOPE_KAFKA_JVM="+k.jvm)
	}
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

// TopicBytes is the size of the topic's log segments on the broker's disk.
func (k *Kafka) TopicBytes(t testing.TB, topic string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k.dir, "data", topic+"-*", "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no log segments of %s: %v", topic, err)
	}
	var n int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}
