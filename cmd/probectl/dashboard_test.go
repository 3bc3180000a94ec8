package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/metrics"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
)

// dashboardTarget is the profile the checked-in dashboards are compiled
// for (make dashboards).
const dashboardTarget = "linux-6.12-amd64"

// dashboardExamples are the specs deploy/dashboards has a dashboard of.
func dashboardExamples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples: %v %v", files, err)
	}
	return files
}

func dashboardFile(example string) string {
	return filepath.Join("../../deploy/dashboards", strings.TrimSuffix(filepath.Base(example), ".hcl")+".json")
}

// TestDashboardsCurrent: the checked-in dashboards are what probectl
// dashboard makes of the examples now (-update, or make dashboards,
// rewrites them).
func TestDashboardsCurrent(t *testing.T) {
	for _, ex := range dashboardExamples(t) {
		var out, errb bytes.Buffer
		if code := run([]string{"dashboard", "-target", dashboardTarget, ex}, &out, &errb); code != 0 {
			t.Fatalf("probectl dashboard %s: exit %d\n%s", ex, code, errb.String())
		}
		file := dashboardFile(ex)
		if *update {
			if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v (make dashboards writes it)", file, err)
			continue
		}
		if !bytes.Equal(b, out.Bytes()) {
			t.Errorf("%s is stale: run make dashboards (or go test ./cmd/probectl -run TestDashboardsCurrent -update) and review the diff", file)
		}
	}
}

// knownPanelTypes are Grafana's built-in panel types the dashboards may use.
var knownPanelTypes = map[string]bool{"row": true, "timeseries": true, "heatmap": true, "stat": true, "gauge": true, "bargauge": true, "table": true}

// TestDashboardStructure checks each checked-in dashboard as Grafana's
// dashboard schema has it: the required fields, panels with unique ids,
// grid positions inside the 24 columns and not overlapping, a known type,
// the data source variable on every panel and query, queries with an
// expression; one panel per aggregation; and every metric an expression
// reads is one the collector serves for that spec.
func TestDashboardStructure(t *testing.T) {
	for _, ex := range dashboardExamples(t) {
		b, err := os.ReadFile(dashboardFile(ex))
		if err != nil {
			t.Fatal(err)
		}
		checkDashboard(t, dashboardFile(ex), ex, b)
	}
	// The bpftrace examples' dashboards, made here (not checked in):
	// stacks, decoded keys, several aggregations per probe.
	files, err := filepath.Glob("../../examples/bpftrace/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("bpftrace examples: %v %v", files, err)
	}
	for _, ex := range files {
		var out, errb bytes.Buffer
		if code := run([]string{"dashboard", "-target", dashboardTarget, ex}, &out, &errb); code != 0 {
			t.Errorf("probectl dashboard %s: exit %d\n%s", ex, code, errb.String())
			continue
		}
		checkDashboard(t, ex, ex, out.Bytes())
	}
}

// checkDashboard checks one dashboard (file names it) of the spec ex.
func checkDashboard(t *testing.T, file, ex string, b []byte) {
	t.Helper()
	var d struct {
		Title         *string           `json:"title"`
		UID           *string           `json:"uid"`
		SchemaVersion *int              `json:"schemaVersion"`
		Version       *int              `json:"version"`
		Time          map[string]string `json:"time"`
		Panels        []struct {
			ID         *int                      `json:"id"`
			Type       string                    `json:"type"`
			Title      string                    `json:"title"`
			GridPos    *struct{ X, Y, W, H int } `json:"gridPos"`
			Datasource map[string]string         `json:"datasource"`
			Targets    []struct {
				RefID      string            `json:"refId"`
				Expr       string            `json:"expr"`
				Format     string            `json:"format"`
				Datasource map[string]string `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Errorf("%s: not a dashboard: %v", file, err)
		return
	}
	if d.Title == nil || *d.Title == "" || d.UID == nil || len(*d.UID) > 40 || d.SchemaVersion == nil || *d.SchemaVersion < 36 || d.Version == nil || d.Time["from"] == "" {
		t.Errorf("%s: title, uid (at most 40 bytes), schemaVersion (36 or later), version and time are required", file)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "datasource" && v.Query != "prometheus" {
			t.Errorf("%s: $%s is a data source variable of %v, want prometheus", file, v.Name, v.Query)
		}
	}
	if vars["datasource"] != "datasource" || vars["instance"] != "query" {
		t.Errorf("%s: variables %v, want datasource (a Prometheus) and instance", file, vars)
	}

	cfg, diags := spec.LoadPaths([]string{ex})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	facts, err := engine.TargetFacts(dashboardTarget, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, diags := compiler.Compile(cfg, facts)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	served, aggs := servedNames(out)

	ids := map[int]bool{}
	cells := map[[2]int]int{}
	panels := 0
	for _, p := range d.Panels {
		where := fmt.Sprintf("%s: panel %q", file, p.Title)
		if p.ID == nil || ids[*p.ID] {
			t.Errorf("%s: no id, or one another panel has", where)
		} else {
			ids[*p.ID] = true
		}
		if !knownPanelTypes[p.Type] {
			t.Errorf("%s: type %q", where, p.Type)
		}
		g := p.GridPos
		if g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v, want one inside the 24 columns", where, g)
			continue
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Errorf("%s overlaps panel %d at (%d, %d)", where, other, x, y)
				}
				cells[[2]int{x, y}] = *p.ID
			}
		}
		if p.Type == "row" {
			continue
		}
		panels++
		if p.Datasource["uid"] != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("%s: data source %v and %d queries, want ${datasource} and at least one", where, p.Datasource, len(p.Targets))
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || q.Datasource["uid"] != "${datasource}" {
				t.Errorf("%s: a query without expr, refId or the data source: %+v", where, q)
			}
			// No example exports stacks: none is a series to query.
			if strings.Contains(q.Expr, "kstack") || strings.Contains(q.Expr, "ustack") {
				t.Errorf("%s: a query of stack series: %s", where, q.Expr)
			}
			if (p.Type == "heatmap") != (q.Format == "heatmap") {
				t.Errorf("%s: a %s panel with a query of format %q", where, p.Type, q.Format)
			}
			names := exprMetrics(q.Expr)
			if len(names) == 0 {
				t.Errorf("%s: %s reads no metric", where, q.Expr)
			}
			for _, n := range names {
				if !served[n] {
					t.Errorf("%s: %s reads %s, which the collector does not serve for %s", where, q.Expr, n, ex)
				}
			}
		}
	}
	if panels != aggs+4 {
		t.Errorf("%s: %d panels, want one per aggregation (%d) and 4 of the probes' counters", file, panels, aggs)
	}
}

// servedNames are the metric names the collector serves for a compiled
// spec set once applied, as a scrape names them, and how many aggregations
// it has.
func servedNames(out *compiler.Output) (map[string]bool, int) {
	served := map[string]bool{}
	for _, n := range []string{metrics.Up, metrics.ProbeUp, metrics.ProbeHits, metrics.ProbeMissedHits, metrics.ProbeDroppedKeys, metrics.ProbeDroppedEvents} {
		served[n] = true
	}
	probes := make([]*runtime.ProbeState, len(out.Probes))
	for i, p := range out.Probes {
		probes[i] = &runtime.ProbeState{Description: p.Description, Aggregations: p.Aggregations}
	}
	sort.SliceStable(probes, func(i, j int) bool { return probes[i].Address.Less(probes[j].Address) })
	aggs := 0
	for i, fams := range metrics.Families(probes, nil) {
		for j, f := range fams {
			aggs++
			if probes[i].Aggregations[j].Kind.IsHistogram() {
				for _, s := range []string{"_bucket", "_count", "_sum"} {
					served[f.Name+s] = true
				}
				continue
			}
			served[f.Name] = true
		}
	}
	return served, aggs
}

// exprMetrics are the metric names a PromQL expression reads: the
// identifiers before a selector's brace.
func exprMetrics(expr string) []string {
	var out []string
	for i := 0; i < len(expr); i++ {
		if expr[i] != '{' {
			continue
		}
		j := i
		for j > 0 && isNameByte(expr[j-1]) {
			j--
		}
		if j < i {
			out = append(out, expr[j:i])
		}
	}
	return out
}

func isNameByte(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// dashboardQueries are the expressions of a dashboard's panels, with the
// variables given values: every instance, a one-minute rate window.
func dashboardQueries(t *testing.T, dashboard []byte) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			out = append(out, strings.NewReplacer("$instance", ".*", "$__rate_interval", "1m").Replace(q.Expr))
		}
	}
	return out
}
