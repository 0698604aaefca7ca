package stats

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	if got := Median([]time.Duration{3, 1, 2}); got != 2 {
		t.Fatalf("odd: %v", got)
	}
	if got := Median([]time.Duration{4, 1, 3, 2}); got != 2 {
		t.Fatalf("even (integer mean of 2 and 3): %v", got)
	}
	if got := Median([]float64{1, 2}); got != 1.5 {
		t.Fatalf("float: %v", got)
	}
	if got := Median[int](nil); got != 0 {
		t.Fatalf("empty: %v", got)
	}
	in := []int{3, 1, 2}
	Median(in)
	if in[0] != 3 {
		t.Fatal("input modified")
	}
}
