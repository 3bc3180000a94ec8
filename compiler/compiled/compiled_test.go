package compiled_test

import (
	"testing"

	"github.com/probectl/probectl/compiler/compiled"
)

func TestLinearBuckets(t *testing.T) {
	const e62 = 1 << 62
	for _, tt := range []struct{ min, max, step, want int64 }{
		{0, 100, 10, 10}, {0, 101, 10, 11}, {0, 1, 1, 1},
		{-e62, e62, e62 / 2, 4}, // the replay: max - min overflows int64
		{-e62, e62, e62, 2},
		{-e62, e62, 3, 3074457345618258603},
		{-e62, e62, 1, 1<<63 - 1}, // 2^63 saturates
	} {
		if got := compiled.LinearBuckets(tt.min, tt.max, tt.step); got != tt.want {
			t.Errorf("LinearBuckets(%d, %d, %d) = %d, want %d", tt.min, tt.max, tt.step, got, tt.want)
		}
	}
}
