package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/metrics"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newDashboardCmd() *cobra.Command {
	var target, title string
	cmd := &cobra.Command{
		Use:   "dashboard [-target auto|PROFILE|FILE] [-title TITLE] PATH...",
		Short: "Print a Grafana dashboard for the metrics of the specs",
		Long: `Dashboard compiles the specs as plan does, for the target kernel, and
prints a Grafana dashboard (JSON, to import) for the metrics that
"probectl serve" and "probectl agent" serve for them once applied
(README, "Dashboards"): a row per probe, with a panel per aggregation (a
heatmap of the buckets of hist and lhist, the rate of count and sum, min
and max as they are), and a row of the probes' hits, missed hits, dropped
keys and dropped events. The data source is a variable ($datasource, any
Prometheus), and $instance picks the hosts. Metric names are the ones the
collector gives the aggregations, in the order of a workspace that holds
only these specs (names that meet get _2 in that order).

  -target auto     the running kernel (the probes it cannot attach are left out)
  -target PROFILE  a built-in profile: ` + fmt.Sprint(bpf.ProfileNames()) + `
  -target FILE     facts written by "probectl target -o FILE"
  -title TITLE     the dashboard's title (default: probectl and the files' names)

Exit status: 0, 1 errors.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, out, err := compileTarget(cmd, target, args, spec.Policy{})
			if err != nil {
				return err
			}
			if title == "" {
				title = dashboardTitle(args)
			}
			b, err := json.MarshalIndent(newDashboard(title, out), "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
	cmd.Flags().StringVar(&target, "target", "auto", "auto, a profile name, or a facts file")
	cmd.Flags().StringVar(&title, "title", "", "the dashboard's title")
	return cmd
}

// dashboardTitle is "probectl: " and the specs' names, without .hcl.
func dashboardTitle(paths []string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(filepath.Base(p), ".hcl")
	}
	return "probectl: " + strings.Join(names, ", ")
}

// grafanaSchemaVersion is the dashboard schema the JSON follows (Grafana 10
// and 11 read it; later versions migrate it on import).
const grafanaSchemaVersion = 39

// Panel geometry: Grafana's grid is 24 columns wide.
const (
	panelWidth  = 12
	panelHeight = 8
)

// datasource is every panel's and query's data source: the variable.
var datasource = map[string]any{"type": "prometheus", "uid": "${datasource}"}

// instanceSel selects the hosts the $instance variable picks.
const instanceSel = `instance=~"$instance"`

// dashboardLayout places panels: rows across the grid, two panels a line.
type dashboardLayout struct {
	panels []map[string]any
	id     int
	x, y   int
}

func (l *dashboardLayout) row(title string) {
	if l.x > 0 {
		l.x, l.y = 0, l.y+panelHeight
	}
	l.id++
	l.panels = append(l.panels, map[string]any{
		"id": l.id, "type": "row", "title": title, "collapsed": false, "panels": []any{},
		"gridPos": map[string]int{"x": 0, "y": l.y, "w": 24, "h": 1},
	})
	l.y++
}

func (l *dashboardLayout) panel(p map[string]any) {
	l.id++
	p["id"] = l.id
	p["datasource"] = datasource
	p["gridPos"] = map[string]int{"x": l.x, "y": l.y, "w": panelWidth, "h": panelHeight}
	l.panels = append(l.panels, p)
	l.x += panelWidth
	if l.x >= 24 {
		l.x, l.y = 0, l.y+panelHeight
	}
}

// target is one query of a panel.
func target(ref, expr, legend string, heatmap bool) map[string]any {
	t := map[string]any{"refId": ref, "datasource": datasource, "expr": expr, "legendFormat": legend, "range": true}
	if heatmap {
		t["format"] = "heatmap"
	}
	return t
}

// legend writes the by columns' labels ("{{comm}} {{func}}"); "" for none,
// which Grafana shows as the series' labels.
func legend(labels []string) string {
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = "{{" + l + "}}"
	}
	return strings.Join(parts, " ")
}

// by is PromQL's "by (a, b)" over labels, empty without any.
func by(labels []string) string {
	return "by (" + strings.Join(labels, ", ") + ") "
}

// newDashboard makes the dashboard of a compiled spec set.
func newDashboard(title string, out *compiler.Output) map[string]any {
	probes := make([]*runtime.ProbeState, len(out.Probes))
	for i, p := range out.Probes {
		probes[i] = &runtime.ProbeState{Description: p.Description, Aggregations: p.Aggregations}
	}
	// The state's order, as a scrape names them.
	sort.SliceStable(probes, func(i, j int) bool { return probes[i].Address.Less(probes[j].Address) })
	families := metrics.Families(probes, nil)

	l := &dashboardLayout{}
	var addrs []string
	for i, p := range probes {
		addr := p.Address.String()
		addrs = append(addrs, addr)
		l.row(addr)
		for j, agg := range p.Aggregations {
			l.aggregation(addr, agg, families[i][j])
		}
	}
	l.counters(addrs)

	sum := sha256.Sum256([]byte(strings.Join(addrs, "\n") + "\n" + title))
	return map[string]any{
		"title":         title,
		"uid":           "probectl-" + hex.EncodeToString(sum[:])[:16],
		"description":   "Generated by probectl dashboard from the specs' aggregations: " + strings.Join(addrs, ", ") + ".",
		"tags":          []string{"probectl"},
		"schemaVersion": grafanaSchemaVersion,
		"version":       1,
		"editable":      true,
		"graphTooltip":  1,
		"timezone":      "browser",
		"time":          map[string]string{"from": "now-1h", "to": "now"},
		"refresh":       "30s",
		"annotations":   map[string]any{"list": []any{}},
		"links":         []any{},
		"panels":        l.panels,
		"templating":    dashboardVariables(),
	}
}

// dashboardVariables are $datasource and $instance.
func dashboardVariables() map[string]any {
	return map[string]any{"list": []any{
		map[string]any{
			"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
			"current": map[string]any{}, "hide": 0, "refresh": 1, "regex": "", "options": []any{},
		},
		map[string]any{
			"name": "instance", "label": "Instance", "type": "query", "datasource": datasource,
			"definition": "label_values(" + metrics.Up + ", instance)",
			"query":      map[string]any{"query": "label_values(" + metrics.Up + ", instance)", "refId": "instance"},
			"current":    map[string]any{}, "hide": 0, "refresh": 2, "regex": "", "options": []any{},
			"includeAll": true, "multi": true, "allValue": ".*", "sort": 1,
		},
	}}
}

// aggregation places the panel of one aggregation of the probe at addr,
// whose metric family is f.
func (l *dashboardLayout) aggregation(addr string, agg *compiler.Aggregation, f metrics.Family) {
	sel := "{" + instanceSel + "}"
	name := fmt.Sprintf("%s %q", agg.Kind, agg.Name)
	switch agg.Kind {
	case compiler.AggHist, compiler.AggLHist:
		l.panel(heatmap(name, addr, f, sel))
	case compiler.AggCount, compiler.AggSum:
		if !agg.Monotonic() { // a gauge: its value since it was applied
			expr := fmt.Sprintf("sum %s(%s%s)", by(f.Labels), f.Name, sel)
			if len(f.Labels) == 0 {
				expr = fmt.Sprintf("sum(%s%s)", f.Name, sel)
			}
			l.panel(timeseries(name, fmt.Sprintf("%s of %s since it was applied (a gauge: its values may be negative).", name, addr), "short",
				target("A", expr, legend(f.Labels), false)))
			return
		}
		sum := "sum "
		if len(f.Labels) > 0 {
			sum += by(f.Labels)
		}
		expr := fmt.Sprintf("%s(rate(%s%s[$__rate_interval]))", sum, f.Name, sel)
		unit := "ops" // count: calls per second
		if agg.Kind == compiler.AggSum {
			unit = "short"
		}
		l.panel(timeseries(name, fmt.Sprintf("%s of %s, per second.", name, addr), unit,
			target("A", expr, legend(f.Labels), false)))
	case compiler.AggMin, compiler.AggMax:
		fn := string(agg.Kind)
		expr := fmt.Sprintf("%s %s(%s%s)", fn, by(f.Labels), f.Name, sel)
		if len(f.Labels) == 0 {
			expr = fmt.Sprintf("%s(%s%s)", fn, f.Name, sel)
		}
		l.panel(timeseries(name, fmt.Sprintf("%s of %s since it was applied.", name, addr), "short",
			target("A", expr, legend(f.Labels), false)))
	}
}

// heatmap is the heatmap panel of a hist or lhist: every key's buckets
// added, the distribution of all of them.
func heatmap(name, addr string, f metrics.Family, sel string) map[string]any {
	expr := fmt.Sprintf("sum by (le) (increase(%s_bucket%s[$__rate_interval]))", f.Name, sel)
	return map[string]any{
		"type": "heatmap", "title": name,
		"description": fmt.Sprintf("%s of %s: observations per bucket and interval, every key added (le is the bucket's highest integer).", name, addr),
		"targets":     []any{target("A", expr, "{{le}}", true)},
		"options": map[string]any{
			"calculate": false,
			"yAxis":     map[string]any{"axisPlacement": "left"},
			"cellGap":   1,
			"color":     map[string]any{"mode": "scheme", "scheme": "Oranges", "scale": "exponential", "exponent": 0.5, "fill": "dark-orange", "steps": 64},
			"rowsFrame": map[string]any{"layout": "auto"},
			"tooltip":   map[string]any{"mode": "single", "yHistogram": false},
			"legend":    map[string]any{"show": true},
			"exemplars": map[string]any{"color": "rgba(255,0,255,0.7)"},
		},
	}
}

// counters places the row of the probes' own counters, for the probes
// at addrs.
func (l *dashboardLayout) counters(addrs []string) {
	quoted := make([]string, len(addrs))
	for i, a := range addrs {
		quoted[i] = regexp.QuoteMeta(a)
	}
	sel := fmt.Sprintf(`{%s, probe=~%s}`, instanceSel, strconv.Quote(strings.Join(quoted, "|")))
	l.row("probes: hits, missed hits, drops")
	for _, c := range []struct {
		title, desc, metric string
		labels              []string
	}{
		{"hits", "Runs of each probe's entry and exit handlers, per second.", metrics.ProbeHits, []string{"probe", "handler"}},
		{"missed hits", "Hits the kernel did not deliver to the probe (recursion, full rethook pools, another BPF program on the CPU), per second.", metrics.ProbeMissedHits, []string{"probe"}},
		{"dropped keys", "Observations dropped because an aggregation's map held max_keys keys, per second.", metrics.ProbeDroppedKeys, []string{"probe", "aggregation"}},
		{"dropped events", "Events that found the event buffer full, per second.", metrics.ProbeDroppedEvents, []string{"probe"}},
	} {
		expr := fmt.Sprintf("sum %s(rate(%s%s[$__rate_interval]))", by(c.labels), c.metric, sel)
		l.panel(timeseries(c.title, c.desc, "ops", target("A", expr, legend(c.labels), false)))
	}
}

// timeseries is a time series panel of one query.
func timeseries(title, desc, unit string, t map[string]any) map[string]any {
	return map[string]any{
		"type": "timeseries", "title": title, "description": desc,
		"targets": []any{t},
		"fieldConfig": map[string]any{
			"defaults":  map[string]any{"unit": unit, "custom": map[string]any{"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never"}},
			"overrides": []any{},
		},
		"options": map[string]any{
			"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		},
	}
}
