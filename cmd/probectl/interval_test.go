package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
)

func val(n int64) *int64 { return &n }

// run -interval prints what each interval added: counts and sums less
// the previous totals (keys that added nothing left out), histograms
// from their lowest to their highest bucket that grew; min and max as
// they are.
func TestIntervalResults(t *testing.T) {
	key := func(c string) runtime.OrderedKey { return runtime.OrderedKey{{Name: "comm", Value: c}} }
	hist := func(counts ...uint64) []runtime.Bucket {
		var out []runtime.Bucket
		for i, n := range counts {
			out = append(out, runtime.Bucket{Low: int64(1) << i, High: int64(2) << i, Count: n})
		}
		return out
	}
	results := func(a, b, c int64, mx int64, buckets []runtime.Bucket) []runtime.ProbeResult {
		return []runtime.ProbeResult{{Address: "tracepoint.t", Aggregations: []runtime.AggregationResult{
			{Name: "calls", Kind: compiler.AggCount, ByFields: []string{"comm"}, Entries: []runtime.Entry{
				{Key: key("a"), Value: val(a)}, {Key: key("b"), Value: val(b)}, {Key: key("c"), Value: val(c)}}},
			{Name: "most", Kind: compiler.AggMax, ByFields: []string{"comm"}, Entries: []runtime.Entry{{Key: key("a"), Value: val(mx)}}},
			{Name: "sizes", Kind: compiler.AggHist, Entries: []runtime.Entry{{Key: runtime.OrderedKey{}, Buckets: buckets}}},
		}}}
	}
	prev := results(10, 5, 0, 7, hist(1, 0, 3, 0, 2))
	cur := results(10, 9, 20, 9, hist(1, 0, 4, 0, 2, 5))
	var b bytes.Buffer
	views.WriteResults(&b, intervalResults(prev, cur))
	want := `tracepoint.t

  count "calls"
    comm  count
    c        20
    b         4

  max "most"
    comm  max
    a       9

  hist "sizes"
    [4, 8)                      1 |@@@@@@@@@@                                          |
    [8, 16)                     0 |                                                    |
    [16, 32)                    0 |                                                    |
    [32, 64)                    5 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
`
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := intervalResults(nil, cur); len(got) != 1 || *got[0].Aggregations[0].Entries[0].Value != 10 {
		t.Errorf("the first interval is the totals: %+v", got)
	}
	// Nothing new: no entries.
	b.Reset()
	views.WriteResults(&b, intervalResults(cur, cur))
	if n := strings.Count(b.String(), "(no data)"); n != 2 {
		t.Errorf("an interval that added nothing:\n%s", b.String())
	}
}
