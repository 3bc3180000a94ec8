package metrics

import (
	"math"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// A hist in ns is served in seconds: every bound is the bucket's highest
// ns over 1e9, as exact as a float64 holds it, each distinct and rising,
// and _sum the kernel's sum over 1e9; the family is named _seconds.
func TestHistogramInSeconds(t *testing.T) {
	agg := &compiler.Aggregation{Name: "lat", Kind: compiler.AggHist, Unit: "ns", BaseUnit: "seconds", PerBase: 1e9, HistSum: true}
	ranges := runtime.BucketRanges(agg)
	filled := []runtime.Bucket{{Low: ranges[64].Low, High: ranges[64].High, Count: 1}} // the open end: all bounds listed
	bounds, count := histogram(agg, ranges, filled)
	if count != 1 || len(bounds) != 64 {
		t.Fatalf("count %d, %d bounds; want 1 and 64", count, len(bounds))
	}
	prev := math.Inf(-1)
	for i := 0; i < 64; i++ {
		le := float64(ranges[i].High-1) / 1e9
		if _, ok := bounds[le]; !ok {
			t.Errorf("bucket [%d, %d): no bound %v", ranges[i].Low, ranges[i].High, le)
		}
		if le <= prev {
			t.Errorf("bound %v after %v", le, prev)
		}
		prev = le
	}
	if _, ok := bounds[1023e-9]; !ok { // [512, 1024): the literal parses to the same float64
		t.Errorf("no bound 1.023e-06 among %v", bounds)
	}

	p := &runtime.ProbeState{Description: compiler.Description{Address: bpf.Address{Kind: "kernel", Name: "io"}}}
	fam := newNamer(nil).family(p, agg)
	if fam.name != "probectl_hist_kernel_io_lat_seconds" {
		t.Errorf("family %s, want probectl_hist_kernel_io_lat_seconds", fam.name)
	}
	sum := int64(2501053576)
	ar := runtime.AggregationResult{Name: "lat", Kind: agg.Kind, Entries: []runtime.Entry{{Buckets: filled, Sum: &sum}}}
	ms, _, _ := collect(fam, agg, ar, 100)
	if len(ms) != 1 || ms[0].GetHistogram().GetSampleSum() != 2.501053576 {
		t.Errorf("metrics %v, want one of _sum 2.501053576", ms)
	}
}

// Without export_stacks a stack column is no label: keys that differ only
// in their stacks are one series, their counts added; with it, the stack
// is the label.
func TestStacksAddedUp(t *testing.T) {
	p := &runtime.ProbeState{Description: compiler.Description{Address: bpf.Address{Kind: "profile", Name: "cpu"}}}
	for _, export := range []bool{false, true} {
		agg := &compiler.Aggregation{Name: "samples", Kind: compiler.AggCount, ExportStacks: export,
			Key: []compiler.KeyField{{Name: "comm", Label: "comm", Kind: compiler.KeyComm}, {Name: "kstack", Label: "kstack", Kind: compiler.KeyKStack}}}
		var ar runtime.AggregationResult
		for i, stack := range []string{"a;b", "a;c", "d"} {
			v := int64(i + 1)
			ar.Entries = append(ar.Entries, runtime.Entry{Key: runtime.OrderedKey{{Name: "comm", Value: "w"}, {Name: "kstack", Value: stack}}, Value: &v})
		}
		fam := newNamer(nil).family(p, agg)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) { emitAggregation(ch, fam, agg, ar, 100, 0) }))
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 {
			t.Fatalf("export_stacks %v: %v %v", export, mfs, err)
		}
		series := mfs[0].GetMetric()
		switch {
		case !export && (len(series) != 1 || series[0].GetCounter().GetValue() != 6 || labelOf(series[0], "comm") != "w" || labelOf(series[0], "kstack") != ""):
			t.Errorf("stacks added up: %v, want one series comm=w of 6", series)
		case export && (len(series) != 3 || labelOf(series[0], "kstack") == ""):
			t.Errorf("export_stacks: %v, want 3 series with kstack", series)
		}
	}
}
