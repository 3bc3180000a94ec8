package metrics

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Hostile probe and aggregation names become valid, distinct metric names.
func TestFamilyNameHostile(t *testing.T) {
	names := []string{"calls", "a.b", "a_b", "a-b", "a b", "", "0lead", "é", "\x1b[2J", "\xff\xfe", "a\nb", "{x=\"y\"}", "__name__", strings.Repeat("x", 300)}
	seen := map[string]string{}
	for _, probe := range names {
		for _, agg := range names {
			n := FamilyName("user", probe, "count", agg)
			if !metricName.MatchString(n) {
				t.Errorf("FamilyName(%q, %q) = %q: not a metric name", probe, agg, n)
			}
			key := probe + "\x00" + agg
			if prev, ok := seen[n]; ok && prev != key {
				t.Errorf("FamilyName: %q and %q both give %q", prev, key, n)
			}
			seen[n] = key
		}
	}
	if got := FamilyName("kernel", "vfs_latency", "hist", "by_func"); got != "probectl_hist_kernel_vfs_latency_by_func" {
		t.Errorf("a clean name changed: %s", got)
	}
	if got := FamilyName("kernel", "a-b", "count", "n"); !regexp.MustCompile(`^probectl_count_kernel_a_b_[0-9a-f]{8}_n$`).MatchString(got) {
		t.Errorf("a sanitized part carries a hash: %s", got)
	}
}

func TestLabelNames(t *testing.T) {
	for _, c := range []struct {
		cols []string
		hist bool
		want string
	}{
		{[]string{"comm", "func"}, false, "comm func"},
		{[]string{"args.fd", "args_fd", "args fd"}, false, "args_fd args_fd_2 args_fd_3"},
		{[]string{"le", "comm"}, true, "by_le comm"},
		{[]string{"le"}, false, "le"},
		{[]string{"__name__", "0x", "", "\xff"}, false, "by___name__ _0x _ by___2"},
	} {
		got := LabelNames(c.cols, c.hist)
		if strings.Join(got, " ") != c.want {
			t.Errorf("LabelNames(%q, %v) = %q, want %q", c.cols, c.hist, got, c.want)
		}
		for _, l := range got {
			if !labelName.MatchString(l) || strings.HasPrefix(l, "__") {
				t.Errorf("LabelNames(%q): %q is not a label name", c.cols, l)
			}
		}
		// The family builds: its labels are valid and distinct.
		d := prometheus.NewDesc("x", "x", got, nil)
		if _, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, 1, make([]string, len(got))...); err != nil {
			t.Errorf("LabelNames(%q) = %q: %v", c.cols, got, err)
		}
	}
}

// aggregation builds an aggregation result of n keys, as runtime reads it.
func aggregation(kind compiler.AggregationKind, n int) (*runtime.ProbeState, *compiler.Aggregation, runtime.AggregationResult) {
	p := &runtime.ProbeState{Description: compiler.Description{Address: bpf.Address{Kind: "user", Name: "p\x1b-\xff"}}}
	agg := &compiler.Aggregation{Name: "by le", Kind: kind, Key: []compiler.KeyField{{Name: "le", Kind: compiler.KeyString}}}
	ar := runtime.AggregationResult{Name: agg.Name, Kind: kind}
	for i := 0; i < n; i++ {
		e := runtime.Entry{Key: runtime.OrderedKey{{Name: "le", Value: "k\xff" + strings.Repeat("x", i)}}}
		if kind.IsHistogram() {
			e.Buckets = []runtime.Bucket{{Low: 0, High: 1, Count: 2}, {Low: 4, High: 8, Count: 3}}
		} else {
			v := int64(n - i)
			e.Value = &v
		}
		ar.Entries = append(ar.Entries, e)
	}
	return p, agg, ar
}

func collect(fam family, agg *compiler.Aggregation, ar runtime.AggregationResult, budget int) ([]*dto.Metric, int, int) {
	ch := make(chan prometheus.Metric, len(ar.Entries))
	left, cut := emitAggregation(ch, fam, agg, ar, budget, 0)
	close(ch)
	var out []*dto.Metric
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			panic(err)
		}
		out = append(out, &d)
	}
	return out, left, cut
}

// The max_series guard: what fits is returned, largest first, and the rest
// is counted.
func TestMaxSeries(t *testing.T) {
	p, agg, ar := aggregation(compiler.AggCount, 10)
	fam := newNamer(nil).family(p, agg)
	if !metricName.MatchString(fam.name) || !strings.HasSuffix(fam.name, "_total") || fam.labels[0] != "le" {
		t.Fatalf("family %q labels %q", fam.name, fam.labels)
	}
	ms, left, cut := collect(fam, agg, ar, 4)
	if len(ms) != 4 || left != 0 || cut != 6 {
		t.Fatalf("budget 4 of 10 counters: %d sent, %d left, %d cut; want 4, 0, 6", len(ms), left, cut)
	}
	for i, m := range ms {
		if got := m.GetCounter().GetValue(); got != float64(10-i) {
			t.Errorf("series %d = %v, want %d (largest first)", i, got, 10-i)
		}
		if v := labelOf(m, "le"); v != "k\uFFFD"+strings.Repeat("x", i) {
			t.Errorf("label value %q: bytes that are not UTF-8 become U+FFFD", v)
		}
	}
	if ms, left, cut := collect(fam, agg, ar, 100); len(ms) != 10 || left != 90 || cut != 0 {
		t.Errorf("budget 100: %d sent, %d left, %d cut", len(ms), left, cut)
	}

	// A histogram costs its buckets, +Inf, _sum and _count: [0,1) and
	// [4,8) filled → le -1, 0, 1, 3, 7: 8 series each.
	p, agg, ar = aggregation(compiler.AggHist, 5)
	fam = newNamer(nil).family(p, agg)
	if fam.labels[0] != "by_le" {
		t.Errorf("a histogram's by column le is %q, want by_le", fam.labels[0])
	}
	// A wrapper's label (the node agent's probeset) is kept free.
	if fam := newNamer([]string{"le", "by_le"}).family(p, agg); fam.labels[0] != "by_by_le" {
		t.Errorf("with le and by_le reserved, the by column le is %q, want by_by_le", fam.labels[0])
	}
	ms, left, cut = collect(fam, agg, ar, 20)
	if len(ms) != 2 || left != 4 || cut != 24 {
		t.Fatalf("budget 20 of 5 histograms of 8 series: %d sent, %d left, %d cut; want 2, 4, 24", len(ms), left, cut)
	}
	h := ms[0].GetHistogram()
	var got []string
	for _, b := range h.GetBucket() {
		got = append(got, strings.TrimSuffix(strings.TrimSuffix(b.String(), " "), " "))
	}
	want := map[float64]uint64{-1: 0, 0: 2, 1: 2, 3: 2, 7: 5}
	if len(h.GetBucket()) != len(want) || h.GetSampleCount() != 5 {
		t.Fatalf("buckets %v count %d", got, h.GetSampleCount())
	}
	for _, b := range h.GetBucket() {
		if want[b.GetUpperBound()] != b.GetCumulativeCount() {
			t.Errorf("le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want[b.GetUpperBound()])
		}
	}
}

// The open ends: hist's [2^62, max] bucket and lhist's [max, ...) are
// +Inf, counted only in _count; lhist's <min bucket is le=min-1.
func TestHistogramEnds(t *testing.T) {
	agg := &compiler.Aggregation{Kind: compiler.AggHist}
	ranges := runtime.BucketRanges(agg)
	top := ranges[len(ranges)-1]
	b, n := histogram(agg, ranges, []runtime.Bucket{{Low: ranges[0].Low, High: 0, Count: 1}, {Low: top.Low, High: top.High, Count: 7}})
	if n != 8 || len(b) != 64 || b[-1] != 1 || b[float64(int64(1)<<62-1)] != 1 {
		t.Errorf("hist ends: %d buckets, count %d, le=-1 %d", len(b), n, b[-1])
	}
	lin := &compiler.Aggregation{Kind: compiler.AggLHist, LinearMin: 10, LinearMax: 35, LinearStep: 10}
	ranges = runtime.BucketRanges(lin)
	b, n = histogram(lin, ranges, []runtime.Bucket{{Low: ranges[0].Low, Count: 1}, {Low: 30, Count: 2}, {Low: 35, Count: 4}})
	want := map[float64]uint64{9: 1, 19: 1, 29: 1, 34: 3}
	if n != 7 || len(b) != len(want) {
		t.Fatalf("lhist: %v count %d", b, n)
	}
	for le, c := range want {
		if b[le] != c {
			t.Errorf("lhist le=%v: %d, want %d", le, b[le], c)
		}
	}
}

// Names that meet as written are told apart, and the namer gives the
// later one _2.
func TestFamilyClash(t *testing.T) {
	n := newNamer(nil)
	agg := func(name string) *compiler.Aggregation {
		return &compiler.Aggregation{Name: name, Kind: compiler.AggCount}
	}
	probe := func(name string) *runtime.ProbeState {
		return &runtime.ProbeState{Description: compiler.Description{Address: bpf.Address{Kind: "user", Name: name}}}
	}
	a := n.family(probe("a_b"), agg("c"))
	b := n.family(probe("a"), agg("b_c"))
	if a.name != "probectl_count_user_a_b_c_total" || b.name != "probectl_count_user_a_b_c_2_total" {
		t.Errorf("clash: %s, %s", a.name, b.name)
	}
}

// Families names as a scrape does, in the order given: the clash, and the
// labels of a histogram's by columns.
func TestFamilies(t *testing.T) {
	p1 := &runtime.ProbeState{Description: compiler.Description{Address: bpf.Address{Kind: "user", Name: "a_b"}},
		Aggregations: []*compiler.Aggregation{{Name: "c", Kind: compiler.AggCount}, {Name: "h", Kind: compiler.AggHist, Key: []compiler.KeyField{{Name: "le"}, {Name: "args.fd"}}}}}
	p2 := &runtime.ProbeState{Description: compiler.Description{Address: bpf.Address{Kind: "user", Name: "a"}},
		Aggregations: []*compiler.Aggregation{{Name: "b_c", Kind: compiler.AggCount}}}
	got := fmt.Sprint(Families([]*runtime.ProbeState{p1, p2}, nil))
	want := "[[{probectl_count_user_a_b_c_total []} {probectl_hist_user_a_b_h [by_le args_fd]}] [{probectl_count_user_a_b_c_2_total []}]]"
	if got != want {
		t.Errorf("Families:\n got %s\nwant %s", got, want)
	}
}

// collectorFunc is a collector of what fn sends, unchecked.
type collectorFunc func(chan<- prometheus.Metric)

func (collectorFunc) Describe(chan<- *prometheus.Desc)      {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

// Two keys that differ only in bytes that are not UTF-8 (a user names a
// process "\xff", another "\xfe", or "\uFFFD" itself), or decoded to the
// same text (a cgroup removed and made again: two ids, one path), are one
// series: their values are merged, not one series dropped from the scrape
// with an error.
func TestSameLabelsMerge(t *testing.T) {
	for _, kind := range []compiler.AggregationKind{compiler.AggCount, compiler.AggMin, compiler.AggMax, compiler.AggHist} {
		p, agg, ar := aggregation(kind, 3)
		for i, k := range []string{"\xff", "\xfe", "\uFFFD"} {
			ar.Entries[i].Key[0].Value = k
		}
		fam := newNamer(nil).family(p, agg)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) { emitAggregation(ch, fam, agg, ar, 100, 0) }))
		mfs, err := reg.Gather()
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		if len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
			t.Errorf("%s: %v", kind, mfs)
			continue
		}
		m := mfs[0].GetMetric()[0]
		want := map[compiler.AggregationKind]float64{compiler.AggCount: 6, compiler.AggMin: 1, compiler.AggMax: 3}[kind]
		switch kind {
		case compiler.AggHist:
			if got := m.GetHistogram().GetSampleCount(); got != 15 {
				t.Errorf("hist: count %d, want 15", got)
			}
		case compiler.AggCount:
			if got := m.GetCounter().GetValue(); got != want {
				t.Errorf("%s: %v, want %v", kind, got, want)
			}
		default:
			if got := m.GetGauge().GetValue(); got != want {
				t.Errorf("%s: %v, want %v", kind, got, want)
			}
		}
	}
}

// A histogram's series (x_bucket, x_count, x_sum) are not another
// family's name: such a clash made the registry drop both families from
// the scrape, with nothing to tell. Here every family of a scrape whose
// names would meet so is served, each with its own name.
func TestFamilySeriesClash(t *testing.T) {
	probe := func(name string) *runtime.ProbeState {
		return &runtime.ProbeState{Description: compiler.Description{Address: bpf.Address{Kind: "tracepoint", Name: name}}}
	}
	hist := func(name string) *compiler.Aggregation {
		return &compiler.Aggregation{Name: name, Kind: compiler.AggHist}
	}
	type use struct {
		probe string
		agg   *compiler.Aggregation
	}
	uses := []use{
		{"h", hist("x")},
		{"h", hist("x_count")},
		{"h_x", hist("sum")},          // probectl_hist_tracepoint_h_x_sum, hist x's _sum
		{"h", hist("x_count_bucket")}, // x_count is x_count_2 now: no clash
		{"h", hist("z_bucket")},
		{"h", hist("z")}, // z_bucket, the one before
		{"h", &compiler.Aggregation{Name: "y", Kind: compiler.AggCount}},
		{"h", &compiler.Aggregation{Name: "y_total", Kind: compiler.AggCount}}, // y_total_total: no clash
	}
	n := newNamer(nil)
	var fams []family
	for _, u := range uses {
		fams = append(fams, n.family(probe(u.probe), u.agg))
	}
	var got []string
	for _, f := range fams {
		got = append(got, f.name)
	}
	want := []string{
		"probectl_hist_tracepoint_h_x",
		"probectl_hist_tracepoint_h_x_count_2",
		"probectl_hist_tracepoint_h_x_sum_2",
		"probectl_hist_tracepoint_h_x_count_bucket",
		"probectl_hist_tracepoint_h_z_bucket",
		"probectl_hist_tracepoint_h_z_2",
		"probectl_count_tracepoint_h_y_total",
		"probectl_count_tracepoint_h_y_total_total",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("families:\n got %q\nwant %q", got, want)
	}
	// Prometheus's registry serves every one of them.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) {
		for i, f := range fams {
			_, agg, ar := aggregation(uses[i].agg.Kind, 2)
			agg.Name = uses[i].agg.Name
			emitAggregation(ch, f, agg, ar, 1000, 0)
		}
	}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	if len(mfs) != len(uses) {
		t.Errorf("%d families served, want %d", len(mfs), len(uses))
	}
}

// labelOf is the value of a metric's label name.
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
