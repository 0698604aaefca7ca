package format

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rttscope/rttscope/internal/events"
)

// renderWith is render with options (Location UTC, StatsTo captured).
func renderWith(t *testing.T, name string, opts Options, evs []any) (out, side []byte) {
	t.Helper()
	var o, s bytes.Buffer
	opts.Location, opts.StatsTo = time.UTC, &s
	w, err := New(name, &o, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if k, ok := ev.(*events.AnonKey); ok {
			if err := w.WriteAnonKey(k); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeAll(t, w, []any{ev})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return o.Bytes(), s.Bytes()
}

// dropped returns the fixture as the privacy writer makes it with
// --anonymize drop: numbers instead of addresses and prefixes.
func dropped() []any {
	evs := fixture()
	for _, ev := range evs {
		switch e := ev.(type) {
		case *events.RTT:
			dropFlow(&e.Flow)
		case *events.FlowEvent:
			dropFlow(&e.Flow)
		case *events.FlowSummary:
			dropFlow(&e.Flow)
		case *events.Aggregate:
			e.PrefixID = uint64(e.Prefix.Bits())
			e.Prefix = netip.Prefix{}
		}
	}
	return evs
}

func dropFlow(f *events.Flow) {
	f.ID = uint64(f.Src.Port) + uint64(f.Dst.Port) // any number, the same in both directions
	f.Src.IP, f.Dst.IP = netip.Addr{}, netip.Addr{}
}

// jsonObjects splits json or jsonl output into its objects.
func jsonObjects(t *testing.T, name string, out []byte) []json.RawMessage {
	t.Helper()
	var objs []json.RawMessage
	if name == "json" {
		if err := json.Unmarshal(out, &objs); err != nil {
			t.Fatalf("not a json array: %v\n%s", err, out)
		}
		return objs
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		objs = append(objs, json.RawMessage(l))
	}
	return objs
}

func validate(t *testing.T, sch *jsonschema.Schema, obj []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(obj))
	if err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s: schema: %v", obj, err)
	}
}

// TestDroppedAddresses: a flow without addresses shows its number in every
// format ("#ID" in flow names, flow_id in json), a prefix without address
// its prefix_id, and nothing of an address is left.
func TestDroppedAddresses(t *testing.T) {
	sch := compileSchema(t)
	evs := dropped()
	for _, name := range Names() {
		out, side := renderWith(t, name, Options{}, evs)
		all := string(out) + string(side)
		for _, real := range []string{"10.0.0", "2001:db8", "192.0.2.1", "192.168.1.10", "_ip"} {
			if strings.Contains(all, real) {
				t.Errorf("%s: output contains %q:\n%s", name, real, all)
			}
		}
		switch name {
		case "standard":
			for _, want := range []string{"TCP #40443:40000+#40443:443 opening due to SYN", " 40 ms 40 ms TCP #40443:443+#40443:40000\n",
				": #24 -> rxpkts=13, ", ": #48 -> rxpkts=3, "} {
				if !strings.Contains(all, want) {
					t.Errorf("standard: no %q in\n%s", want, all)
				}
			}
		case "ppviz":
			if !strings.Contains(all, " #9320:4660+#9320:4660\n") {
				t.Errorf("ppviz: no ICMPv6 flow number in\n%s", all)
			}
		default:
			objs := jsonObjects(t, name, out)
			if len(objs) != len(evs) {
				t.Fatalf("%s: %d objects, want %d", name, len(objs), len(evs))
			}
			for i, obj := range objs {
				validate(t, sch, obj)
				var m map[string]any
				if err := json.Unmarshal(obj, &m); err != nil {
					t.Fatal(err)
				}
				switch ev := evs[i].(type) {
				case *events.Aggregate:
					if ev.Meta != nil {
						continue
					}
					if ev.Global != nil {
						if m["type"] != "aggregate_global" {
							t.Errorf("%s: want the global record", obj)
						}
						continue
					}
					if m["prefix_id"] != float64(ev.PrefixID) {
						t.Errorf("%s: prefix_id %v, want %d", obj, m["prefix_id"], ev.PrefixID)
					}
				case *events.Stats:
				default:
					if m["flow_id"] == nil {
						t.Errorf("%s: no flow_id", obj)
					}
				}
			}
		}
	}
	// The schema refuses a flow with both or neither.
	for _, bad := range []string{
		`{"timestamp":1,"flow_id":3,"src_ip":"1.2.3.4","src_port":1,"dest_port":1,"protocol":"TCP","flow_event":"opening","reason":"SYN","triggered_by":"src"}`,
		`{"timestamp":1,"src_port":1,"dest_port":1,"protocol":"TCP","flow_event":"opening","reason":"SYN","triggered_by":"src"}`,
		`{"timestamp":1,"type":"aggregate","interval_start":0,"count_rtt":0}`,
	} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(inst) == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
}

// TestMinimal: --minimal leaves the packet and byte counters out of
// samples, aggregated records and flow summaries in every format, and
// keeps the RTTs.
func TestMinimal(t *testing.T) {
	sch := compileSchema(t)
	// Stats records keep their counters: they are rttscope's. ePPing's
	// global record is nothing but counters: it is left out (checked
	// below).
	var evs []any
	for _, ev := range fixture() {
		if a, ok := ev.(*events.Aggregate); ok && a.Global != nil {
			if out, _ := renderWith(t, "jsonl", Options{Minimal: true}, []any{ev}); len(out) != 0 {
				t.Errorf("--minimal wrote the global record: %s", out)
			}
			continue
		}
		if _, ok := ev.(*events.Stats); !ok {
			evs = append(evs, ev)
		}
	}
	for _, name := range Names() {
		out, _ := renderWith(t, name, Options{Minimal: true}, evs)
		full, _ := renderWith(t, name, Options{}, evs)
		s := string(out)
		for _, counter := range []string{"sent_packets", "sent_bytes", "rec_packets", "rec_bytes", "rx_stats", "tx_stats", `"packets"`, `"bytes"`, " pkts ", "rx=", "tx="} {
			if strings.Contains(s, counter) {
				t.Errorf("%s --minimal: %q in\n%s", name, counter, s)
			}
		}
		// The RTT part is unchanged: the same number of lines, and the
		// standard and ppviz sample lines are identical.
		if strings.Count(s, "\n") != strings.Count(string(full), "\n") {
			t.Errorf("%s: %d lines minimal, %d full", name, strings.Count(s, "\n"), strings.Count(string(full), "\n"))
		}
		if name == "ppviz" && s != string(full) {
			t.Errorf("ppviz has no counters, yet minimal output differs:\n%s\n%s", s, full)
		}
		if name == "json" || name == "jsonl" {
			for i, obj := range jsonObjects(t, name, out) {
				validate(t, sch, obj)
				if e, ok := evs[i].(*events.RTT); ok && !strings.Contains(string(obj), `"rtt":`+itoa(int64(e.RTT))+`,`) {
					t.Errorf("%s: RTT %d missing", obj, e.RTT)
				}
			}
		}
	}
}

func itoa(v int64) string { return string(appendInt(nil, "", v)[3:]) }

// TestAnonKeyRecord: the key record goes into the stream for json and
// jsonl and to StatsTo for standard and ppviz, never with more than the
// scheme and the key's id.
func TestAnonKeyRecord(t *testing.T) {
	sch := compileSchema(t)
	k := &events.AnonKey{Time: 5_000_000_000, Scheme: "pfx+ports", KeyID: "0a1b2c3d", Rotated: true}
	for _, name := range Names() {
		out, side := renderWith(t, name, Options{}, []any{&events.AnonKey{Scheme: "det", KeyID: "ffff0000"}, k})
		switch name {
		case "standard", "ppviz":
			want := "00:00:00.000000000 anonymization: scheme=det key_id=ffff0000 first\n" +
				"00:00:05.000000000 anonymization: scheme=pfx+ports key_id=0a1b2c3d rotated\n"
			if string(side) != want || len(out) != 0 {
				t.Errorf("%s: side %q out %q, want side %q", name, side, out, want)
			}
		default:
			objs := jsonObjects(t, name, out)
			if len(objs) != 2 {
				t.Fatalf("%s: %d objects", name, len(objs))
			}
			want := `{"timestamp":5000000000,"type":"anonymization","scheme":"pfx+ports","key_id":"0a1b2c3d","key":"rotated"}`
			if string(objs[1]) != want {
				t.Errorf("%s: %s, want %s", name, objs[1], want)
			}
			for _, obj := range objs {
				validate(t, sch, obj)
			}
		}
	}
}
