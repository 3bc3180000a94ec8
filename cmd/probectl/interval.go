package main

import (
	"sort"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
)

// intervalResults is what cur added since prev, for run -interval:
// counts, sums and histogram buckets less what prev had for the same key
// (a key that added nothing is left out; a histogram shows from its lowest
// to its highest bucket that grew). Min and max cannot be taken back: they
// are as cur has them, since the start. prev nil: cur as it is.
func intervalResults(prev, cur []runtime.ProbeResult) []runtime.ProbeResult {
	if prev == nil {
		return cur
	}
	before := map[string]map[string]runtime.Entry{} // address and aggregation, then key
	for _, pr := range prev {
		for _, ar := range pr.Aggregations {
			m := map[string]runtime.Entry{}
			for _, e := range ar.Entries {
				m[views.KeyText(e.Key)] = e
			}
			before[pr.Address+"\x00"+ar.Name] = m
		}
	}
	out := make([]runtime.ProbeResult, len(cur))
	for i, pr := range cur {
		out[i] = pr
		out[i].Aggregations = make([]runtime.AggregationResult, len(pr.Aggregations))
		for j, ar := range pr.Aggregations {
			old := before[pr.Address+"\x00"+ar.Name]
			if ar.Kind == compiler.AggMin || ar.Kind == compiler.AggMax || old == nil {
				out[i].Aggregations[j] = ar
				continue
			}
			d := ar
			d.Entries = []runtime.Entry{}
			for _, e := range ar.Entries {
				if e, ok := entryDelta(old[views.KeyText(e.Key)], e); ok {
					d.Entries = append(d.Entries, e)
				}
			}
			sort.SliceStable(d.Entries, func(a, b int) bool { return weight(d.Entries[a]) > weight(d.Entries[b]) })
			out[i].Aggregations[j] = d
		}
	}
	return out
}

// entryDelta is cur less old (old zero when the key is new); false when
// nothing was added.
func entryDelta(old, cur runtime.Entry) (runtime.Entry, bool) {
	if cur.Value != nil {
		v := *cur.Value
		if old.Value != nil {
			v -= *old.Value
		}
		cur.Value = &v
		return cur, v != 0
	}
	was := map[int64]uint64{}
	for _, b := range old.Buckets {
		was[b.Low] = b.Count
	}
	var buckets []runtime.Bucket
	first, last := -1, -1
	for _, b := range cur.Buckets {
		b.Count -= min(b.Count, was[b.Low])
		if b.Count > 0 {
			if first < 0 {
				first = len(buckets)
			}
			last = len(buckets)
		}
		buckets = append(buckets, b)
	}
	if first < 0 {
		return cur, false
	}
	cur.Buckets = buckets[first : last+1]
	return cur, true
}

// weight orders entries: the value, or a histogram's count.
func weight(e runtime.Entry) int64 {
	if e.Value != nil {
		return *e.Value
	}
	var n int64
	for _, b := range e.Buckets {
		n += int64(b.Count)
	}
	return n
}
