package compiler

import (
	"fmt"
	"math"
	"testing"
)

// linearBucketOf is the reference lhist bucket: 0 below min, n+1 at or
// above max, else 1 + (v - min) / step, in exact arithmetic.
func linearBucketOf(v, min, max, step int64) int64 {
	switch {
	case v < min:
		return 0
	case v >= max:
		return LinearBuckets(min, max, step) + 1
	}
	return 1 + int64((uint64(v)-uint64(min))/uint64(step))
}

// lhist buckets at the edges of ranges as wide as spec allows (±2^62),
// where max - min overflows int64: the replay of issue 7 filed 5 under
// [max, inf).
func TestLinearBucketsExtreme(t *testing.T) {
	requireRoot(t)
	const e62 = int64(1) << 62
	for _, r := range []struct{ min, max, step int64 }{
		{-e62, e62, e62 / 2}, // the replay
		{-e62, e62, e62},
		{-e62, e62, (e62 / 500) + 1}, // 1000 buckets, the last partial
		{e62 - 10, e62, 3},
		{-e62, -e62 + 7, 2},
		{-1, 1, 1},
	} {
		var values []int64
		for _, base := range []int64{r.min, r.max, 0, r.min + r.step, r.max - r.step} {
			values = append(values, base-1, base, base+1)
		}
		values = append(values, math.MinInt64, math.MaxInt64, 5)
		for _, v := range values {
			p, a := action(t, fmt.Sprintf("    lhist \"l\" {\n value = %d\n min = %d\n max = %d\n step = %d\n }", v, r.min, r.max, r.step))
			if got, want := runValue(t, p, a, true), linearBucketOf(v, r.min, r.max, r.step); got != want {
				t.Errorf("lhist [%d, %d) step %d: bucket of %d = %d, want %d", r.min, r.max, r.step, v, got, want)
			}
		}
	}
	if n := LinearBuckets(-e62, e62, e62/2); n != 4 {
		t.Errorf("the replay has %d buckets, want 4", n)
	}
	if b := linearBucketOf(5, -e62, e62, e62/2); b != 3 {
		t.Errorf("5 falls in bucket %d, want 3: [0, 2^61)", b)
	}
}
