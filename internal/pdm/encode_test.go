package pdm

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The vectors of SPEC §3: delta, value, scale.
var vectors = []struct {
	d     time.Duration
	value uint16
	scale uint8
}{
	{time.Nanosecond, 0xEE6B, 14},
	{time.Microsecond, 0xE8D4, 24},
	{time.Millisecond, 0xE35F, 34},
	{time.Second, 0xDE0B, 44},
	{3 * time.Second, 0xA688, 46},
}

func TestEncodeVectors(t *testing.T) {
	for _, v := range vectors {
		value, scale := Encode(uint64(v.d))
		if value != v.value || scale != v.scale {
			t.Errorf("Encode(%v) = %#04x/%d, want %#04x/%d", v.d, value, scale, v.value, v.scale)
		}
	}
}

func TestEncodeZeroAndLimits(t *testing.T) {
	if v, s := Encode(0); v != 0 || s != 0 {
		t.Errorf("Encode(0) = %#x/%d, want 0/0", v, s)
	}
	// The largest delta: 2^64-1 ns is 1.8e28 as, 94 bits, scale 78.
	v, s := Encode(math.MaxUint64)
	if s != 78 || v < 0x8000 {
		t.Errorf("Encode(max) = %#x/%d, want a normalised value with scale 78", v, s)
	}
	// A 1 s delta must decode to 1 s, not the 0.42 s a scale one bit
	// short gives.
	if d := Decode(Encode(uint64(time.Second))); d < 999*time.Millisecond || d > time.Second {
		t.Errorf("1 s decodes as %v", d)
	}
}

// checkRoundTrip asserts that decode(encode(ns)) is within 2^-15 relative
// of ns, from below (the encoding truncates), with a normalised value.
func checkRoundTrip(t *testing.T, ns uint64, value uint16, scale uint8) {
	t.Helper()
	got := DecodeNs(value, scale)
	x := float64(ns)
	if got > x*(1+1e-12) || (x-got)/x >= math.Ldexp(1, -15) {
		t.Fatalf("ns=%d: encoded %#04x/%d decodes as %.3f (relative error %.3g)", ns, value, scale, got, (x-got)/x)
	}
	if value < 0x8000 {
		t.Fatalf("ns=%d: value %#04x not normalised (top bit clear)", ns, value)
	}
}

// TestEncodeProperty: 1 ns .. 1 h, log-uniform random plus every power of
// two and its neighbours (the carries and shift boundaries).
func TestEncodeProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, ns := range propertyInputs(r, 200000) {
		v, s := Encode(ns)
		checkRoundTrip(t, ns, v, s)
	}
}

func propertyInputs(r *rand.Rand, n int) []uint64 {
	const hour = uint64(time.Hour)
	var in []uint64
	for b := range 42 { // 2^42 ns > 1 h
		p := uint64(1) << b
		for _, x := range []uint64{p - 1, p, p + 1} {
			if x >= 1 && x <= hour {
				in = append(in, x)
			}
		}
	}
	in = append(in, hour, hour-1, 18446744073, 18446744074) // 2^64 as
	for range n {
		e := r.Float64() * math.Log(float64(hour))
		in = append(in, max(1, min(hour, uint64(math.Exp(e)))))
	}
	return in
}
