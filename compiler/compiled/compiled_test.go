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

// The layout of an aggregation's map: keyed counts, sums and histograms
// share one value a key; min, max and those without by are per-CPU, sized
// to their keys (one, or the buckets), never above max_keys.
func TestAggregationLayout(t *testing.T) {
	by := []compiled.KeyField{{Name: "comm"}}
	for _, tt := range []struct {
		agg     compiled.Aggregation
		shared  bool
		entries int
	}{
		{compiled.Aggregation{Kind: compiled.AggCount, Key: by, MaxKeys: 10240}, true, 10240},
		{compiled.Aggregation{Kind: compiled.AggSum, Key: by, MaxKeys: 10240}, true, 10240},
		{compiled.Aggregation{Kind: compiled.AggHist, Key: by, MaxKeys: 10240}, true, 10240},
		{compiled.Aggregation{Kind: compiled.AggLHist, Key: by, MaxKeys: 500, LinearMin: 0, LinearMax: 100, LinearStep: 10}, true, 500},
		{compiled.Aggregation{Kind: compiled.AggMin, Key: by, MaxKeys: 10240}, false, 10240},
		{compiled.Aggregation{Kind: compiled.AggMax, Key: by, MaxKeys: 10240}, false, 10240},
		{compiled.Aggregation{Kind: compiled.AggCount, MaxKeys: 10240}, false, 1},
		{compiled.Aggregation{Kind: compiled.AggMax, MaxKeys: 10240}, false, 1},
		{compiled.Aggregation{Kind: compiled.AggHist, MaxKeys: 10240}, false, compiled.Log2Buckets},
		{compiled.Aggregation{Kind: compiled.AggHist, MaxKeys: 10}, false, 10},
		{compiled.Aggregation{Kind: compiled.AggLHist, MaxKeys: 10240, LinearMin: 0, LinearMax: 101, LinearStep: 10}, false, 13},
	} {
		if got, entries := tt.agg.SharedValue(), tt.agg.MapEntries(); got != tt.shared || entries != tt.entries {
			t.Errorf("%s with %d key fields, max_keys %d: shared %v, %d entries; want %v, %d",
				tt.agg.Kind, len(tt.agg.Key), tt.agg.MaxKeys, got, entries, tt.shared, tt.entries)
		}
	}
}
