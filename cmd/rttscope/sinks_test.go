package main

// Tests of the Kafka and Prometheus sinks end to end, with real servers
// (internal/testservers): a Kafka broker that is stopped for 20 s in the
// middle of a run, and a Prometheus server that scrapes a live monitor.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rttscope/rttscope/internal/recordpb"
	"github.com/rttscope/rttscope/internal/testservers"
	"github.com/rttscope/rttscope/internal/testutil"
)

// brokerDowntime is how long TestReplayKafkaBrokerStopped keeps the broker
// down (issue #11 asks for 20 s).
const brokerDowntime = 20 * time.Second

// connectionKey is the Kafka message key the sink gives a json record of
// a flow (kafkasink.flowKey): protocol and both endpoints, lower first.
func connectionKey(t *testing.T, m map[string]any) string {
	t.Helper()
	ep := func(ip, port string) netip.AddrPort {
		a, err := netip.ParseAddr(m[ip].(string))
		if err != nil {
			t.Fatalf("%s in %v: %v", ip, m, err)
		}
		p, _ := strconv.Atoi(fmt.Sprint(m[port]))
		return netip.AddrPortFrom(a, uint16(p))
	}
	a, b := ep("src_ip", "src_port"), ep("dest_ip", "dest_port")
	if a.Compare(b) > 0 {
		a, b = b, a
	}
	return fmt.Sprintf("%s %s %s", m["protocol"], a, b)
}

// labFlowAddrs are the addresses of flows [first, first+n) of labFrames.
func labFlowAddrs(first, n int) []netip.Addr {
	var out []netip.Addr
	for i := range 8 {
		out = append(out, netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}))
	}
	for i := first; i < first+n; i++ {
		out = append(out, netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)}))
	}
	return out
}

// TestReplayKafkaBrokerStopped replays a lab capture fed through a pipe to
// jsonl files and to a real Kafka broker at once, with addresses
// anonymized (pfx). After the first part the
// broker is stopped for 20 s while the second part is replayed: the
// client's buffer (200 messages) fills and the rest is spooled to disk.
// When the broker is back and the input ends, the topic holds every
// record of the files exactly once, and each flow's records in one
// partition in the order of the files, and no message or key shows a
// real address.
func TestReplayKafkaBrokerStopped(t *testing.T) {
	testutil.RequireRoot(t)
	k := testservers.StartKafka(t)
	const topic = "rtt-site1"
	k.CreateTopic(t, topic, 4)
	dir := t.TempDir()
	bufA, bufAB := twoPartCapture(t, 200)
	out := filepath.Join(dir, "rtt.jsonl")
	cmd, stdin, stderr := startReplayPipe(t, "-r", "0", "--local-net", "10.1.0.0/16", "--workers", "1", "--stats",
		"-F", "jsonl", "-w", out, "--anonymize", "pfx", "--anon-key-file", writeKey(t, 32),
		"--kafka", "brokers="+k.Addr+",topic="+topic+",buffer=200,spool-dir="+dir)
	if _, err := stdin.Write(bufA.Bytes()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // part A replayed and produced
	k.Stop()
	stopped := time.Now()
	if _, err := stdin.Write(bufAB.Bytes()[bufA.Len():]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(stopped.Add(brokerDowntime)))
	spoolFiles, _ := filepath.Glob(filepath.Join(dir, "rttscope-kafka-spool-*"))
	k.Start()
	_ = stdin.Close() // the end of input ends the replay
	if err := cmd.Wait(); err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	if len(spoolFiles) != 1 {
		t.Errorf("spool files during the run: %v", spoolFiles)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "rttscope-kafka-spool-*")); len(left) != 0 {
		t.Errorf("spool file left after the run: %v", left)
	}
	counts := regexp.MustCompile(`kafka: (\d+) messages produced, (\d+) acknowledged, (\d+) spooled, (\d+) dropped`).FindStringSubmatch(stderr.String())
	if counts == nil {
		t.Fatalf("no kafka summary on stderr:\n%s", stderr.String())
	}
	t.Logf("kafka sink: %s", counts[0])
	if counts[1] != counts[2] || counts[3] == "0" || counts[4] != "0" {
		t.Errorf("want every message acknowledged, some spooled, none dropped: %s", counts[0])
	}

	fileBytes, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	file := normalizeJSONL(t, fileBytes)
	// Every event, the stats record and the anonymization key's record.
	n, _ := statsEvents(t, fileBytes)
	if uint64(len(file)) != n+2 {
		t.Fatalf("%d records in the file, the stats record counts %d events (+ stats and anon_key)", len(file), n)
	}
	// Each flow's records in file order, by connection key.
	want := map[string][]string{}
	for _, line := range file {
		var m map[string]any
		_ = json.Unmarshal([]byte(line), &m)
		key := "" // records about the run (stats, key notices) have no key
		if _, ok := m["src_ip"]; ok {
			key = connectionKey(t, m)
		}
		want[key] = append(want[key], line)
	}
	got := map[string][]string{}
	partition := map[string]int32{}
	total := 0
	real := append(labFlowAddrs(0, 200), labFlowAddrs(1000, 200)...)
	for p, recs := range k.ReadAll(t, topic) {
		for _, r := range recs {
			if leaks := testutil.Leaks(string(r.Key)+" "+string(r.Value), real...); len(leaks) > 0 {
				t.Fatalf("message %q %q shows real addresses %v", r.Key, r.Value, leaks)
			}
			key := string(r.Key)
			if q, ok := partition[key]; ok && q != p && key != "" {
				t.Fatalf("connection %q in partitions %d and %d", key, q, p)
			}
			partition[key] = p
			got[key] = append(got[key], normalizeJSONL(t, r.Value)...)
			total++
		}
	}
	if total != len(file) {
		t.Errorf("%d messages in the topic, %d records in the file", total, len(file))
	}
	for key, lines := range want {
		if !slices.Equal(got[key], lines) {
			t.Fatalf("connection %q: the topic has\n%s\nthe file has\n%s", key, strings.Join(got[key], "\n"), strings.Join(lines, "\n"))
		}
	}
	t.Logf("%d records (%d connections) in the topic exactly once, each connection's in file order, after %v without broker", total, len(want)-1, brokerDowntime)
}

// promExpect is what the aggregated records of the file say about one
// prefix: sample count and native histogram buckets (upper bound ->
// count), each kernel bin in the bucket of its midpoint.
type promExpect struct {
	count  uint64
	native map[float64]uint64
}

func (e *promExpect) String() string { return fmt.Sprintf("%d samples", e.count) }

// fileAggregates sums the aggregated records of a jsonl file by prefix.
func fileAggregates(t *testing.T, path string) map[string]*promExpect {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*promExpect{}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r struct {
			Type      string
			IPPrefix  string       `json:"ip_prefix"`
			Count     uint64       `json:"count_rtt"`
			Histogram [][3]*uint64 `json:"rtt_histogram"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if r.Type != "aggregate" {
			continue
		}
		e := out[r.IPPrefix]
		if e == nil {
			e = &promExpect{native: map[float64]uint64{}}
			out[r.IPPrefix] = e
		}
		e.count += r.Count
		for _, bin := range r.Histogram {
			mid := float64(*bin[0]) / 1e9
			if bin[1] != nil {
				mid = (float64(*bin[0]) + float64(*bin[1])) / 2e9
			}
			// Native schema 4: bucket (2^((i-1)/16), 2^(i/16)].
			up := math.Pow(2, math.Ceil(math.Log2(mid)*16)/16)
			e.native[up] += *bin[2]
		}
	}
	return out
}

// TestMonitorAllSinks runs a live monitor in aggregated mode (1 s
// intervals, addresses anonymized as prefixes) on the lab's middlebox with
// all three sinks at once: jsonl files, Kafka (protobuf, a real broker)
// and /metrics, which a real Prometheus server scrapes every second. Once
// the traffic has stopped, Prometheus's query API returns for every prefix
// the histogram count of the file's aggregated records, and each native
// bucket their bins' counts; /metrics shows no real prefix. After the run
// the topic holds as many records as the file, with the same sample
// counts per prefix.
func TestMonitorAllSinks(t *testing.T) {
	l := needCLILab(t)
	k := testservers.StartKafka(t)
	const topic = "rtt-lab"
	k.CreateTopic(t, topic, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // the port is free for the monitor
	prom := testservers.StartPrometheus(t, addr)
	out := filepath.Join(t.TempDir(), "agg.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, "monitor", "--netns", l.Middlebox.Name, "-i", l.MiddleboxClientIf,
		"-T", "-C", "--aggregate", "1s", "-F", "jsonl", "-w", out, "--metrics-addr", addr,
		"--kafka", "brokers="+k.Addr+",topic="+topic+",format=protobuf",
		"--anonymize", "pfx", "--anon-key-file", writeKey(t, 32))
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitOutput(t, cmd, &stderr, "watching "+l.MiddleboxClientIf)
	labTraffic(ctx, t, l)
	time.Sleep(2500 * time.Millisecond) // two more intervals: the last samples are in the file
	want := fileAggregates(t, out)
	var samples uint64
	for _, e := range want {
		samples += e.count
	}
	if samples == 0 {
		t.Fatalf("no RTT sample in the aggregated records:\n%v\n%s", want, stderr.String())
	}
	// Wait (for a scrape after the last record) until Prometheus has
	// every prefix's count; the limit only turns a mismatch into a failure.
	// The file is read again on every try: on a loaded machine an interval
	// can end after the first read and add a record (a late sample, or a
	// prefix whose only traffic was a flow's last packets) that the next
	// scrape has and the first read had not.
	var got map[string]float64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		want = fileAggregates(t, out)
		res, err := prom.Query(ctx, "histogram_count(rttscope_rtt_seconds)")
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]float64{}
		for _, s := range res {
			got[s.Metric["prefix"]] = s.Value
		}
		same := len(got) == len(want)
		for p, e := range want {
			same = same && got[p] == float64(e.count)
		}
		if same {
			samples = 0
			for _, e := range want {
				samples += e.count
			}
			break
		}
		if time.Now().After(deadline) {
			// The verdict first, then only the series it is about:
			// a long log gets cut in the middle.
			t.Errorf("Prometheus has histogram counts %v, the file's aggregated records %v; targets %s", got, want, prom.TargetHealth())
			r, _ := http.Get("http://" + addr + "/metrics")
			if r != nil {
				b, _ := io.ReadAll(r.Body)
				_ = r.Body.Close()
				var counts []string
				for _, line := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(line, "rttscope_rtt_seconds_count") || strings.HasPrefix(line, "rttscope_aggregated_samples_total") {
						counts = append(counts, line)
					}
				}
				t.Logf("/metrics now:\n%s", strings.Join(counts, "\n"))
			}
			t.FailNow()
		}
	}
	res, err := prom.Query(ctx, "rttscope_rtt_seconds")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res {
		p := s.Metric["prefix"]
		if s.Histogram == nil {
			t.Fatalf("%s: not a native histogram: %+v", p, s)
		}
		buckets := map[float64]uint64{}
		for _, b := range s.Histogram.Buckets {
			// Bounds are powers of 2^(1/16): match the computed ones
			// up to float rounding.
			up := math.Pow(2, math.Round(math.Log2(b.Upper)*16)/16)
			buckets[up] = uint64(b.Count)
		}
		if fmt.Sprint(buckets) != fmt.Sprint(want[p].native) {
			t.Errorf("%s: Prometheus native buckets %v, file %v", p, buckets, want[p].native)
		}
	}
	// No real prefix in what Prometheus scrapes.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, a := range labAddrs(l) {
		bits := 48
		if a.Is4() {
			bits = 24
		}
		real := netip.PrefixFrom(a, bits).Masked().String()
		if strings.Contains(string(body), `prefix="`+real+`"`) {
			t.Errorf("/metrics shows the real prefix %s", real)
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("monitor: %v\n%s", err, stderr.String())
	}
	t.Logf("%d samples in %d prefixes: Prometheus's counts and native buckets equal the aggregated records %v", samples, len(want), got)

	// Kafka got the file's records: as many, and the same samples per
	// prefix (the file is complete now that the monitor has exited).
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Count(b, []byte("\n"))
	final := fileAggregates(t, out)
	inKafka := map[string]uint64{}
	msgs := 0
	for _, recs := range k.ReadAll(t, topic) {
		for _, r := range recs {
			msgs++
			var rec recordpb.Record
			if err := proto.Unmarshal(r.Value, &rec); err != nil {
				t.Fatal(err)
			}
			if a := rec.GetAggregate(); a != nil {
				addr, _ := netip.AddrFromSlice(a.PrefixAddr)
				p := netip.PrefixFrom(addr, int(a.PrefixBits)).String()
				if string(r.Key) != p {
					t.Errorf("aggregate of %s has key %q", p, r.Key)
				}
				inKafka[p] += a.Count
			}
		}
	}
	if msgs != lines {
		t.Errorf("%d messages in the topic, %d records in the file", msgs, lines)
	}
	for p, e := range final {
		if inKafka[p] != e.count {
			t.Errorf("%s: %d samples in Kafka, %d in the file", p, inKafka[p], e.count)
		}
	}
	t.Logf("Kafka: %d messages, samples per prefix %v", msgs, inKafka)
}

// TestSinkUsageErrors checks the refusals of bad sink flags: exit 2, one
// line naming the flag, nothing created.
func TestSinkUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kafka", "topic=t", "x.pcap"}, "--kafka: brokers=HOST:PORT is missing"},
		{[]string{"--kafka", "brokers=h:1", "x.pcap"}, "topic=NAME is missing"},
		{[]string{"--kafka", "brokers=h:1,topic=t,format=avro", "x.pcap"}, `format="avro": want jsonl or protobuf`},
		{[]string{"--kafka", "brokers=h:1,topic=t,colour=red", "x.pcap"}, `unknown key "colour"`},
		{[]string{"--kafka", "brokers=h:1,topic=t,sasl=plain", "x.pcap"}, "sasl needs sasl-user and sasl-password-file"},
		{[]string{"--kafka", "brokers=h:1,topic=t", "--spool-size", "0", "x.pcap"}, "kafka=spool needs --spool-size > 0"},
		{[]string{"--spool-size", "1M", "x.pcap"}, "--spool-size needs --kafka"},
		{[]string{"--sink-policy", "files=spool", "x.pcap"}, "only kafka spools"},
		{[]string{"--sink-policy", "printer=drop", "x.pcap"}, `unknown sink "printer"`},
		{[]string{"--sink-policy", "metrics=lose", "x.pcap"}, `invalid sink policy "lose"`},
		{[]string{"--sink-policy", "kafka", "x.pcap"}, `invalid --sink-policy "kafka": want SINK=POLICY`},
		{[]string{"--metrics-max-prefixes", "5", "x.pcap"}, "--metrics-max-prefixes needs --metrics-addr"},
		{[]string{"--metrics-addr", "127.0.0.1:0", "--metrics-max-prefixes", "0", "x.pcap"}, "at least 1"},
	} {
		err := runReplayArgs(t, append([]string{"-w", filepath.Join(dir, "out")}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 2 || strings.Contains(err.Error(), "\n") {
			t.Errorf("replay %v: %v (exit %d), want a one-line usage error with %q", tc.args, err, exitCode(err), tc.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused runs created files: %v", ents)
	}
}
