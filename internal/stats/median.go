// Package stats has the small order statistics that reports and tests share.
package stats

import "slices"

// Number is what Median averages.
type Number interface {
	~int | ~int64 | ~uint64 | ~float64
}

// Median returns the median of xs (any order; xs is not modified), the mean
// of the two middle values for an even count, and 0 for none.
func Median[T Number](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
