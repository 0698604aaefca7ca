package main

// Parsers of ePPing's output formats (standard, ppviz, json, jsonl), used
// to compare ePPing's own output with rttscope's (epping_test.go). The
// standard and ppviz parsers accept exactly ePPing's layout (column order,
// units, separators): an rttscope line that differs in any of them does
// not parse.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// epEvent is one per-event record (RTT sample or flow event) in any format.
type epEvent struct {
	line  int
	rtt   bool   // an RTT sample; else a flow event
	time  int64  // Unix ns (json), ns since local midnight (standard); ppviz: see timeText
	flow  string // SRC:SPORT+DST:DPORT
	proto string // empty in ppviz, which has no protocol column
	// RTT samples
	rttNS, minNS int64
	// json only
	counters      [4]uint64 // sent_packets, sent_bytes, rec_packets, rec_bytes
	matchOnEgress bool
	hasJSON       bool
	// flow events
	flowEvent, reason, source string
	// ppviz: the time as written (ePPing: %.9g)
	timeText string
}

func (e epEvent) String() string {
	if e.rtt {
		return fmt.Sprintf("line %d: RTT %s %s rtt=%dns min=%dns counters=%v egress=%v t=%d",
			e.line, e.proto, e.flow, e.rttNS, e.minNS, e.counters, e.matchOnEgress, e.time)
	}
	return fmt.Sprintf("line %d: %s %s %s due to %s from %s t=%d", e.line, e.proto, e.flow, e.flowEvent, e.reason, e.source, e.time)
}

var (
	// HH:MM:SS.nnnnnnnnn <rtt> ms <min_rtt> ms <PROTO> <flow>
	epStdRTT = regexp.MustCompile(`^(\d\d:\d\d:\d\d\.\d{9}) (\S+) ms (\S+) ms (\S+) (\S+\+\S+)$`)
	// HH:MM:SS.nnnnnnnnn <PROTO> <flow> opening|closing due to <reason> from <source>
	epStdFlow = regexp.MustCompile(`^(\d\d:\d\d:\d\d\.\d{9}) (\S+) (\S+\+\S+) (opening|closing) due to (SYN|SYN-ACK|first observed packet|FIN|RST|flow timeout) from (src|dest|garbage collection)$`)
	// <time_s> <rtt_s> <min_rtt_s> <flow>
	epPPViz = regexp.MustCompile(`^(\S+) (\S+) (\S+) (\S+\+\S+)$`)
)

// parseClock parses HH:MM:SS.nnnnnnnnn into ns since midnight.
func parseClock(s string) (int64, error) {
	t, err := time.Parse("15:04:05.000000000", s)
	if err != nil {
		return 0, err
	}
	return int64(t.Hour())*int64(time.Hour) + int64(t.Minute())*int64(time.Minute) +
		int64(t.Second())*int64(time.Second) + int64(t.Nanosecond()), nil
}

// parseG parses a number printed with C's %g and checks that it is printed
// as %.<digits>g prints it, so that the column is ePPing's shape too.
func parseG(s string, digits int, scale float64) (int64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if g := strconv.FormatFloat(v, 'g', digits, 64); g != s && fmt.Sprintf("%.*g", digits, v) != s {
		return 0, fmt.Errorf("%q is not printed as %%.%dg (%q)", s, digits, g)
	}
	return int64(v*scale + 0.5), nil
}

// parseStandard parses per-event standard output.
func parseStandard(b []byte) ([]epEvent, error) {
	var out []epEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if m := epStdRTT.FindStringSubmatch(l); m != nil {
			t, err := parseClock(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			r, err1 := parseG(m[2], 6, 1e6)
			mn, err2 := parseG(m[3], 6, 1e6)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("line %d: %q: %w", n, l, errors.Join(err1, err2))
			}
			out = append(out, epEvent{line: n, rtt: true, time: t, rttNS: r, minNS: mn, proto: m[4], flow: m[5]})
			continue
		}
		if m := epStdFlow.FindStringSubmatch(l); m != nil {
			t, err := parseClock(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			out = append(out, epEvent{line: n, time: t, proto: m[2], flow: m[3], flowEvent: m[4], reason: m[5], source: m[6]})
			continue
		}
		return nil, fmt.Errorf("line %d is not an ePPing standard line: %q", n, l)
	}
	return out, sc.Err()
}

// parsePPViz parses ppviz output. Times are kept as text and as Unix ns.
func parsePPViz(b []byte) ([]epEvent, error) {
	var out []epEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		m := epPPViz.FindStringSubmatch(sc.Text())
		if m == nil {
			return nil, fmt.Errorf("line %d is not a ppviz line: %q", n, sc.Text())
		}
		t, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		r, err1 := strconv.ParseFloat(m[2], 64)
		mn, err2 := strconv.ParseFloat(m[3], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: %w", n, errors.Join(err1, err2))
		}
		out = append(out, epEvent{line: n, rtt: true, time: int64(t * 1e9), timeText: m[1],
			rttNS: int64(r*1e9 + 0.5), minNS: int64(mn*1e9 + 0.5), flow: m[4]})
	}
	return out, sc.Err()
}

// epJSON is an ePPing json object of any record type.
type epJSON struct {
	Timestamp     int64   `json:"timestamp"`
	SrcIP         string  `json:"src_ip"`
	SrcPort       uint16  `json:"src_port"`
	DestIP        string  `json:"dest_ip"`
	DestPort      uint16  `json:"dest_port"`
	Protocol      string  `json:"protocol"`
	RTT           *int64  `json:"rtt"`
	MinRTT        int64   `json:"min_rtt"`
	SentPackets   uint64  `json:"sent_packets"`
	SentBytes     uint64  `json:"sent_bytes"`
	RecPackets    uint64  `json:"rec_packets"`
	RecBytes      uint64  `json:"rec_bytes"`
	MatchOnEgress bool    `json:"match_on_egress"`
	FlowEvent     *string `json:"flow_event"`
	Reason        string  `json:"reason"`
	TriggeredBy   string  `json:"triggered_by"`
	Type          string  `json:"type"` // rttscope's own records (stats, ...)
}

// parseJSONEvents parses json (one array) or jsonl (one object a line)
// output, keeping RTT and flow events; it returns how many other records
// there were.
func parseJSONEvents(b []byte, lines bool) ([]epEvent, int, error) {
	var raws []json.RawMessage
	if lines {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(l, "[") {
				return nil, 0, fmt.Errorf("jsonl line is an array: %.40q", l)
			}
			raws = append(raws, json.RawMessage(l))
		}
	} else if err := json.Unmarshal(b, &raws); err != nil {
		return nil, 0, fmt.Errorf("json output is not one array: %w", err)
	}
	var out []epEvent
	others := 0
	for i, r := range raws {
		var j epJSON
		dec := json.NewDecoder(bytes.NewReader(r))
		if err := dec.Decode(&j); err != nil {
			return nil, 0, fmt.Errorf("record %d: %w", i+1, err)
		}
		e := epEvent{line: i + 1, time: j.Timestamp, proto: j.Protocol, hasJSON: true,
			flow: fmt.Sprintf("%s:%d+%s:%d", j.SrcIP, j.SrcPort, j.DestIP, j.DestPort)}
		switch {
		case j.RTT != nil && j.Type == "":
			e.rtt, e.rttNS, e.minNS = true, *j.RTT, j.MinRTT
			e.counters = [4]uint64{j.SentPackets, j.SentBytes, j.RecPackets, j.RecBytes}
			e.matchOnEgress = j.MatchOnEgress
		case j.FlowEvent != nil && j.Type == "":
			e.flowEvent, e.reason, e.source = *j.FlowEvent, j.Reason, j.TriggeredBy
		default:
			others++
			continue
		}
		out = append(out, e)
	}
	return out, others, nil
}
