package metrics

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxSeries is the default bound on the aggregation series of one
// scrape.
const DefaultMaxSeries = 100000

// Collector reads one workspace's applied probes at each scrape.
type Collector struct {
	// StateDir and Workspace name the workspace, as runtime.Open takes them.
	StateDir, Workspace string
	// MaxSeries bounds the aggregation series of one scrape (a histogram
	// counts its buckets, +Inf, _sum and _count); 0 is DefaultMaxSeries. A
	// scrape over it returns the series that fit (probe by probe, each
	// aggregation's keys largest first, as show orders them) and
	// probectl_scrape_series_cut says how many were left out.
	MaxSeries int
	// Reserved are label names the caller adds to every series (with
	// prometheus.WrapCollectorWith, to serve several workspaces from one
	// registry): a by column of such a name is labelled "by_NAME".
	Reserved []string
}

// The names of the per-probe metrics (and probectl_up), for what reads
// them: probectl dashboard.
const (
	Up                 = "probectl_up"
	ProbeUp            = "probectl_probe_up"
	ProbeHits          = "probectl_probe_hits_total"
	ProbeMissedHits    = "probectl_probe_missed_hits_total"
	ProbeDroppedKeys   = "probectl_probe_dropped_keys_total"
	ProbeDroppedEvents = "probectl_probe_dropped_events_total"
)

var (
	descUp = prometheus.NewDesc(Up,
		"1 when the workspace's state could be read at this scrape, 0 when not.", []string{"workspace"}, nil)
	descLeftovers = prometheus.NewDesc("probectl_leftover_probe_dirs",
		"Probe directories under the workspace's pins that its state does not record: an interrupted apply's, links attached, until the next apply or destroy removes them.", []string{"workspace"}, nil)
	descCut = prometheus.NewDesc("probectl_scrape_series_cut",
		"Aggregation series left out of this scrape by the max_series bound.", nil, nil)
	descProbeUp = prometheus.NewDesc(ProbeUp,
		"1 when the probe's maps could be read at this scrape, 0 when not (pins gone, a map replaced).", []string{"probe"}, nil)
	descInfo = prometheus.NewDesc("probectl_probe_info",
		"An applied probe: its route, link families (comma-separated) and spec digest.", []string{"probe", "route", "attach", "digest"}, nil)
	descDrift = prometheus.NewDesc("probectl_probe_drift",
		"How many things about the probe differ from what was applied (a pin or link gone, a map or program replaced, a user probe's binary replaced): probectl status lists them.", []string{"probe"}, nil)
	descHits = prometheus.NewDesc(ProbeHits,
		"Runs of the probe's entry or exit handler.", []string{"probe", "handler", AppliedLabel}, nil)
	descMissed = prometheus.NewDesc(ProbeMissedHits,
		"Hits the kernel did not deliver to the probe (recursion, full rethook pools, another BPF program running on the CPU).", []string{"probe", AppliedLabel}, nil)
	descDroppedKeys = prometheus.NewDesc(ProbeDroppedKeys,
		"Observations an aggregation dropped: its map held max_keys keys.", []string{"probe", "aggregation", AppliedLabel}, nil)
	descDroppedEvents = prometheus.NewDesc(ProbeDroppedEvents,
		"Events the probe could not write: its ring buffer was full.", []string{"probe", AppliedLabel}, nil)
)

// AppliedLabel is on every counter of a probe, and on its aggregations:
// the serial of the apply that made the probe. A probe replaced (another
// spec, a drift repaired) starts its counters again from 0, and a counter
// that restarts but outgrows its old value between two scrapes would hide
// the reset from Prometheus (increase() would report too little): with the
// label, the replaced probe's series are new series.
const AppliedLabel = "applied"

// appliedSerial is the serial a probe's pin directory ends with
// ("KIND-NAME-SERIAL").
func appliedSerial(pinDir string) string {
	base := filepath.Base(pinDir)
	return base[strings.LastIndexByte(base, '-')+1:]
}

// Describe sends nothing: the families depend on what is applied at each
// scrape, so the collector is unchecked.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads the workspace's state and maps and sends their metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	w, err := runtime.Open(c.StateDir, c.Workspace)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0, c.Workspace)
		return
	}
	defer w.Close()
	s, err := w.Inspect()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0, c.Workspace)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1, c.Workspace)
	if left, err := w.Leftovers(s); err == nil {
		ch <- prometheus.MustNewConstMetric(descLeftovers, prometheus.GaugeValue, float64(len(left)), c.Workspace)
	}
	for _, st := range w.Status(s) {
		collectStatus(ch, st)
	}
	budget := c.MaxSeries
	if budget <= 0 {
		budget = DefaultMaxSeries
	}
	cut := 0
	names := newNamer(c.Reserved)
	for i, r := range w.ReadForScrape(s.Probes) {
		p := s.Probes[i]
		probe := labelValue(r.Address)
		if r.Error != "" {
			ch <- prometheus.MustNewConstMetric(descProbeUp, prometheus.GaugeValue, 0, probe)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descProbeUp, prometheus.GaugeValue, 1, probe)
		for j, ar := range r.Aggregations {
			ch <- prometheus.MustNewConstMetric(descDroppedKeys, prometheus.CounterValue, float64(ar.Dropped), probe, labelValue(ar.Name), appliedSerial(p.PinDir))
			fam := names.family(p, p.Aggregations[j])
			budget, cut = emitAggregation(ch, fam, p.Aggregations[j], ar, budget, cut)
		}
	}
	ch <- prometheus.MustNewConstMetric(descCut, prometheus.GaugeValue, float64(cut))
}

// collectStatus sends one probe's info, drift and, when it has no drift,
// its counters.
func collectStatus(ch chan<- prometheus.Metric, st runtime.ProbeStatus) {
	probe := labelValue(st.Address.String())
	attach := make([]string, len(st.Attach))
	for i, f := range st.Attach {
		attach[i] = string(f)
	}
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1,
		probe, labelValue(string(st.Route)), labelValue(strings.Join(attach, ",")), labelValue(st.Digest))
	ch <- prometheus.MustNewConstMetric(descDrift, prometheus.GaugeValue, float64(len(st.Drift)), probe)
	if len(st.Drift) > 0 {
		// Its counters were not read: no series rather than zeros,
		// which Prometheus would take for a counter reset.
		return
	}
	applied := appliedSerial(st.PinDir)
	ch <- prometheus.MustNewConstMetric(descHits, prometheus.CounterValue, float64(st.EntryHits), probe, "entry", applied)
	ch <- prometheus.MustNewConstMetric(descHits, prometheus.CounterValue, float64(st.ExitHits), probe, "exit", applied)
	ch <- prometheus.MustNewConstMetric(descMissed, prometheus.CounterValue, float64(st.Missed), probe, applied)
	ch <- prometheus.MustNewConstMetric(descDroppedEvents, prometheus.CounterValue, float64(st.DroppedEvents), probe, applied)
}

// emitAggregation sends one aggregation's series while the budget lasts and
// returns what is left of it and the series cut so far.
func emitAggregation(ch chan<- prometheus.Metric, fam family, agg *compiled.Aggregation, ar runtime.AggregationResult, budget, cut int) (int, int) {
	var ranges []runtime.Bucket
	if agg.Kind.IsHistogram() {
		ranges = runtime.BucketRanges(agg)
	}
	// What fits is the largest entries, as show orders them: sort only
	// when not everything may fit.
	cost := len(ar.Entries)
	if len(ranges) > 0 {
		cost *= len(ranges) + 2
	}
	if cost > budget {
		runtime.SortEntries(ar.Entries)
	}
	for _, s := range sameLabelsMerged(agg.Kind, ar.Entries, fam.cols) {
		e, values := s.entry, s.values
		if !agg.Kind.IsHistogram() {
			if budget < 1 {
				cut++
				continue
			}
			budget--
			// A count, or a sum that cannot fall, is a counter of what
			// the kernel stores, unsigned; a sum that may fall (Signed),
			// min and max are gauges.
			vt, v := prometheus.GaugeValue, float64(*e.Value)
			if agg.Monotonic() {
				vt, v = prometheus.CounterValue, float64(uint64(*e.Value))
			}
			v = agg.Served(v)
			emit(ch, fam.desc, func() (prometheus.Metric, error) {
				return prometheus.NewConstMetric(fam.desc, vt, v, values...)
			})
			continue
		}
		bounds, count := histogram(agg, ranges, e.Buckets)
		series := len(bounds) + 3 // the buckets, +Inf, _sum, _count
		if budget < series {
			cut += series
			continue
		}
		budget -= series
		sum := math.NaN() // a probe applied before the kernel kept sums
		if e.Sum != nil {
			sum = agg.Served(float64(*e.Sum))
		}
		emit(ch, fam.desc, func() (prometheus.Metric, error) {
			return prometheus.NewConstHistogram(fam.desc, count, sum, bounds, values...)
		})
	}
	return budget, cut
}

// labeledEntry is an entry with its label values.
type labeledEntry struct {
	entry  runtime.Entry
	values []string
}

// sameLabelsMerged gives each entry the label values of its columns cols,
// and merges the entries whose label values are equal (keys that differ
// only in bytes that are not UTF-8, or decode to the same text: a cgroup
// made again under its old path; keys that differ only in the stacks a
// scrape does not serve): Prometheus refuses two series of one name and
// labels. Counts and sums add, min and max keep theirs, buckets add. The
// order is the entries', each merged one at its first.
func sameLabelsMerged(kind compiled.AggregationKind, entries []runtime.Entry, cols []int) []labeledEntry {
	out := make([]labeledEntry, 0, len(entries))
	at := make(map[string]int, len(entries))
	for _, e := range entries {
		values, id := labelValues(e, cols)
		i, seen := at[id]
		if !seen {
			at[id] = len(out)
			out = append(out, labeledEntry{entry: e, values: values})
			continue
		}
		merge(kind, &out[i].entry, e)
	}
	return out
}

// labelValues are the values of e's columns cols (empty past its key),
// and an id that is equal for equal values.
func labelValues(e runtime.Entry, cols []int) ([]string, string) {
	values := make([]string, len(cols))
	var id strings.Builder
	for i, c := range cols {
		if c < len(e.Key) {
			values[i] = labelValue(e.Key[c].Text())
		}
		fmt.Fprintf(&id, "%d:%s", len(values[i]), values[i])
	}
	return values, id.String()
}

// merge adds e into m, an entry of the same labels: buckets and counts
// add, min and max keep theirs.
func merge(kind compiled.AggregationKind, m *runtime.Entry, e runtime.Entry) {
	if kind.IsHistogram() {
		m.Buckets = append(append([]runtime.Bucket(nil), m.Buckets...), e.Buckets...)
		if m.Sum != nil && e.Sum != nil {
			sum := *m.Sum + *e.Sum
			m.Sum = &sum
		}
		return
	}
	if m.Value == nil || e.Value == nil {
		return
	}
	v := *m.Value
	switch kind {
	case compiled.AggMin:
		v = min(v, *e.Value)
	case compiled.AggMax:
		v = max(v, *e.Value)
	default:
		v += *e.Value
	}
	m.Value = &v
}

func emit(ch chan<- prometheus.Metric, desc *prometheus.Desc, build func() (prometheus.Metric, error)) {
	m, err := build()
	if err != nil {
		m = prometheus.NewInvalidMetric(desc, err)
	}
	ch <- m
}

// histogram turns an entry's buckets into Prometheus's cumulative ones.
// Values are integers, so the bucket [lo, hi) holds exactly the values
// <= hi-1: its le is hi-1 (the <0 bucket of hist is le="-1", [0, 1) is
// le="0", [2^k, 2^(k+1)) is le="2^(k+1)-1"; lhist's below-min bucket is
// le="min-1"). The open end ([2^62, max] or [max, ...)) is +Inf, which
// Prometheus derives from the count. A hist lists its buckets up to the
// highest one filled (the rest would repeat the count; all 64 when the
// open end is filled, so a quantile there is 2^62-1, not a lower bound);
// an lhist lists all of them.
func histogram(agg *compiled.Aggregation, ranges []runtime.Bucket, buckets []runtime.Bucket) (map[float64]uint64, uint64) {
	byLow := make(map[int64]uint64, len(buckets))
	for _, b := range buckets {
		byLow[b.Low] += b.Count
	}
	last := len(ranges) - 2 // the last bounded bucket
	if agg.Kind == compiled.AggHist {
		last = 1 // le="0" at least
		for i := range ranges {
			if byLow[ranges[i].Low] > 0 {
				last = max(last, min(i, len(ranges)-2))
			}
		}
	}
	out := make(map[float64]uint64, last+1)
	var cum uint64
	for i := 0; i <= last; i++ {
		cum += byLow[ranges[i].Low]
		out[agg.Served(float64(ranges[i].High-1))] = cum
	}
	cum += byLow[ranges[len(ranges)-1].Low]
	return out, cum
}
