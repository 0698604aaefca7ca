package lab

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParsePath parses a path description of the form
//
//	DELAY[/RETURN_DELAY][@RATE]
//
// DELAY is the one-way delay toward the server, RETURN_DELAY the one
// toward the client (default: same as DELAY), both Go durations ("20ms",
// "1.5ms", "0"). RATE is a bottleneck rate as accepted by ParseRate.
// Examples: "20ms", "20ms/10ms", "5ms@50mbit", "0@1gbit".
func ParsePath(s string) (PathSpec, error) {
	var p PathSpec
	str := strings.TrimSpace(s)
	if str == "" {
		return p, fmt.Errorf("empty path (want DELAY[/RETURN_DELAY][@RATE])")
	}
	if d, r, ok := strings.Cut(str, "@"); ok {
		rate, err := ParseRate(r)
		if err != nil {
			return p, err
		}
		if rate == 0 {
			return p, fmt.Errorf("rate %q must be positive (leave out @RATE for an unlimited path)", r)
		}
		p.RateBitsPerSec = rate
		str = d
	}
	there, back, hasBack := strings.Cut(str, "/")
	var err error
	if p.DelayToServer, err = parseDelay(there); err != nil {
		return p, err
	}
	p.DelayToClient = p.DelayToServer
	if hasBack {
		if p.DelayToClient, err = parseDelay(back); err != nil {
			return p, err
		}
	}
	return p, nil
}

func parseDelay(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad delay %q (want a duration such as 20ms)", s)
	}
	if d < 0 || d > MaxDelay {
		return 0, fmt.Errorf("delay %v out of range 0..%v", d, MaxDelay)
	}
	return d, nil
}

// ParseRate parses a rate in bits per second with an optional unit in the
// style of tc: "bit", "kbit", "mbit", "gbit", "tbit" (decimal, also
// "k", "m", "g", "t"), or bytes per second with "bps", "kbps", "mbps",
// "gbps". Case does not matter; a bare number is bit/s.
func ParseRate(s string) (uint64, error) {
	str := strings.ToLower(strings.TrimSpace(s))
	i := 0
	for i < len(str) && (str[i] >= '0' && str[i] <= '9' || str[i] == '.') {
		i++
	}
	num, unit := str[:i], strings.TrimSpace(str[i:])
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("bad rate %q (want e.g. 50mbit, 1gbit, 100kbit)", s)
	}
	mult := map[string]float64{
		"": 1, "bit": 1, "k": 1e3, "kbit": 1e3, "m": 1e6, "mbit": 1e6,
		"g": 1e9, "gbit": 1e9, "t": 1e12, "tbit": 1e12,
		"bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("bad rate unit %q in %q (use bit, kbit, mbit, gbit, or bps, kbps, mbps, gbps for bytes/s)", unit, s)
	}
	r := v * mult
	if r > math.MaxUint64/2 {
		return 0, fmt.Errorf("rate %q is too large", s)
	}
	return uint64(math.Round(r)), nil
}

// FormatRate renders bit/s compactly ("50mbit", "1.5gbit", "800kbit").
func FormatRate(r uint64) string {
	switch {
	case r == 0:
		return "unlimited"
	case r >= 1e9:
		return strconv.FormatFloat(float64(r)/1e9, 'f', -1, 64) + "gbit"
	case r >= 1e6:
		return strconv.FormatFloat(float64(r)/1e6, 'f', -1, 64) + "mbit"
	case r >= 1e3:
		return strconv.FormatFloat(float64(r)/1e3, 'f', -1, 64) + "kbit"
	}
	return strconv.FormatUint(r, 10) + "bit"
}

// String renders the spec in ParsePath syntax.
// Direct says whether the path has neither delay nor rate limit: it then
// needs no delay line, and the middlebox forwards straight to the server,
// so what is measured on it is the kernel's own forwarding.
func (p PathSpec) Direct() bool {
	return p.DelayToServer == 0 && p.DelayToClient == 0 && p.RateBitsPerSec == 0
}

func (p PathSpec) String() string {
	s := p.DelayToServer.String()
	if p.DelayToClient != p.DelayToServer {
		s += "/" + p.DelayToClient.String()
	}
	if p.RateBitsPerSec > 0 {
		s += "@" + FormatRate(p.RateBitsPerSec)
	}
	return s
}
