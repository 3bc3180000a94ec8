package metrics

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// family is one aggregation's metric family.
type family struct {
	name   string
	labels []string
	// cols are the key columns the labels are of, in order: all but the
	// stacks unless the aggregation exports them.
	cols []int
	desc *prometheus.Desc
}

// namer names the families of one scrape.
type namer struct {
	used map[string]bool
	// reserved are label names a wrapper adds to every series
	// (Collector.Reserved): a by column of that name becomes "by_NAME".
	reserved map[string]bool
}

func newNamer(reserved []string) *namer {
	n := &namer{used: map[string]bool{}, reserved: map[string]bool{AppliedLabel: true}}
	for _, r := range reserved {
		n.reserved[r] = true
	}
	return n
}

// family names an aggregation: probectl_<kind>_<probe kind>_<probe>_<name>,
// with _total for a counter (Monotonic: count, a sum that cannot fall),
// and one label per by column.
func (n *namer) family(p *runtime.ProbeState, agg *compiled.Aggregation) family {
	name := FamilyName(string(p.Address.Kind), p.Address.Name, string(agg.Kind), agg.Name)
	// Distinct names cannot meet after sanitizing (a changed part carries
	// a hash of the original), but names can meet as written, and so can
	// their series' names: a histogram x writes x_bucket, x_count and
	// x_sum, the names of a histogram x_count and x_sum (probe h's hist
	// x next to probe h_x's hist sum). Prometheus's registry leaves the
	// later family of such a clash out of the scrape, silently; it gets
	// a number instead.
	name = n.claim(name, agg)
	name += agg.UnitSuffix()
	if agg.Monotonic() {
		name += "_total"
	}
	cols, names := servedColumns(agg)
	labels := n.unreserved(LabelNames(names, agg.Kind.IsHistogram()))
	return family{name: name, labels: labels, cols: cols, desc: prometheus.NewDesc(name, labelValue(familyHelp(p, agg)), labels,
		prometheus.Labels{AppliedLabel: appliedSerial(p.PinDir)})}
}

// servedColumns are the key columns a scrape labels (a stack only when
// the aggregation exports stacks) and their label names: Label, or the
// column's name in a state written before labels.
func servedColumns(agg *compiled.Aggregation) ([]int, []string) {
	var cols []int
	var names []string
	for i, f := range agg.Key {
		if f.IsStack() && !agg.ExportStacks {
			continue
		}
		cols = append(cols, i)
		names = append(names, cmp.Or(f.Label, f.Name))
	}
	return cols, names
}

// familyHelp is the HELP text of agg's family.
func familyHelp(p *runtime.ProbeState, agg *compiled.Aggregation) string {
	help := fmt.Sprintf("%s %q of probe %s", agg.Kind, agg.Name, p.Address)
	if agg.Unit != "" {
		help += fmt.Sprintf(", in %s (measured in %s)", agg.BaseUnit, agg.Unit)
	}
	if agg.Kind == compiled.AggSum && !agg.Monotonic() {
		help += " (a gauge: its values may be negative)"
	}
	switch {
	case agg.Kind.IsHistogram() && !agg.HistSum:
		help += " (le is the bucket's highest value; _sum is NaN: the probe was applied before the kernel kept sums)"
	case agg.Kind.IsHistogram():
		help += " (le is the bucket's highest value)"
	}
	for _, f := range agg.Key {
		if f.IsStack() && !agg.ExportStacks {
			help += " (stacks added up: show, pprof and flame graphs have them; export_stacks serves them)"
			break
		}
	}
	return help
}

// series are the names the family of agg named name (without its unit
// and _total) writes in the exposition, the histogram's own name included
// (the registry checks it against the others' suffixes).
func series(name string, agg *compiled.Aggregation) []string {
	name += agg.UnitSuffix()
	switch {
	case agg.Monotonic():
		return []string{name + "_total"}
	case agg.Kind.IsHistogram():
		return []string{name, name + "_bucket", name + "_count", name + "_sum"}
	}
	return []string{name}
}

func (n *namer) clash(names []string) bool {
	for _, s := range names {
		if n.used[s] {
			return true
		}
	}
	return false
}

// Family is how a scrape names one aggregation: its metric family (with
// _total for a counter; a histogram's series add _bucket, _count and
// _sum) and the labels of its by columns, in order.
type Family struct {
	Name   string
	Labels []string
}

// Families names the aggregations of probes as a scrape of the workspace
// they are applied in does: probes in the state's order (by address),
// reserved as Collector.Reserved. The result has one slice per probe, one
// Family per aggregation.
func Families(probes []*runtime.ProbeState, reserved []string) [][]Family {
	n := newNamer(reserved)
	out := make([][]Family, len(probes))
	for i, p := range probes {
		for _, agg := range p.Aggregations {
			f := n.family(p, agg)
			out[i] = append(out[i], Family{Name: f.name, Labels: f.labels})
		}
	}
	return out
}

// FamilyName is the metric family of an aggregation, without its unit
// and the _total of counters (compiled.FamilyName).
func FamilyName(probeKind, probeName, aggKind, aggName string) string {
	return compiled.FamilyName(probeKind, probeName, aggKind, aggName)
}

// claim returns name, numbered when its series clash with a family named
// before, and marks its series used.
func (n *namer) claim(name string, agg *compiled.Aggregation) string {
	base := name
	for i := 2; n.clash(series(name, agg)); i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	for _, s := range series(name, agg) {
		n.used[s] = true
	}
	return name
}

// unreserved puts "by_" before every label a reserved name takes, as
// often as it takes to meet neither a reserved name nor another label.
// It changes labels in place and returns them.
func (n *namer) unreserved(labels []string) []string {
	taken := map[string]bool{}
	for _, l := range labels {
		taken[l] = true
	}
	for i, l := range labels {
		for n.reserved[l] || l != labels[i] && taken[l] {
			l = "by_" + l
		}
		taken[l] = true
		labels[i] = l
	}
	return labels
}

// LabelNames are the labels of an aggregation's by columns, in order:
// each column's name with anything but ASCII letters, digits and '_'
// turned into '_' (args.fd is args_fd), '_' before a leading digit,
// "by_" before a name Prometheus reserves ("__..."), "le" on a histogram
// becomes "by_le", and a name met twice gets "_2", "_3"...
func LabelNames(cols []string, histogram bool) []string {
	out := make([]string, len(cols))
	seen := map[string]bool{}
	for i, c := range cols {
		l := compiled.CleanName(c)
		if l == "" || l[0] >= '0' && l[0] <= '9' {
			l = "_" + l
		}
		base := l
		for n := 1; ; n++ {
			l = base
			if n > 1 {
				l += "_" + strconv.Itoa(n)
			}
			if strings.HasPrefix(l, "__") || histogram && l == "le" {
				l = "by_" + l
			}
			if !seen[l] {
				break
			}
		}
		seen[l] = true
		out[i] = l
	}
	return out
}

// labelValue makes a value Prometheus accepts: bytes that are not UTF-8
// become U+FFFD, as in show -json.
func labelValue(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
