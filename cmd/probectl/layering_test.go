package main

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestLayering keeps the imports pointing down the pipeline, as
// ARCHITECTURE.md draws it: spec → compiler → runtime, bpf under all of
// them, and only cmd/probectl seeing everything. It reads the packages'
// own imports (not their tests'), and every package they reach.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", modPath+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	graph := importGraph{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		graph[fields[0]] = fields[1:]
	}
	for _, v := range layeringViolations(graph, layers) {
		t.Error(v)
	}
}

// TestLayeringSeesThroughImports replays how runtime and metrics came to
// reach HCL while importing neither spec nor HCL: through the compiler
// (compiler.Probe carried the spec's probe), which runtime was allowed to
// import. The check must name the path.
func TestLayeringSeesThroughImports(t *testing.T) {
	graph := importGraph{}
	for pkg := range layers {
		graph[modPath+pkg] = nil
	}
	graph[modPath+"compiler"] = []string{modPath + "spec", modPath + "bpf", "github.com/hashicorp/hcl/v2"}
	graph[modPath+"spec"] = []string{modPath + "bpf", "github.com/hashicorp/hcl/v2"}
	graph["github.com/hashicorp/hcl/v2"] = []string{"github.com/hashicorp/hcl/v2/hclsyntax"}
	graph["github.com/hashicorp/hcl/v2/hclsyntax"] = nil
	graph[modPath+"runtime"] = []string{modPath + "compiler"}
	graph[modPath+"metrics"] = []string{modPath + "runtime"}
	before := maps.Clone(layers)
	before["runtime"] = []string{"compiler", "bpf"}
	got := strings.Join(layeringViolations(graph, before), "\n")
	for _, want := range []string{
		"runtime reaches spec (through compiler)",
		"runtime reaches github.com/hashicorp/hcl/v2 (through compiler)",
		"runtime reaches github.com/hashicorp/hcl/v2/hclsyntax (through compiler)",
		"metrics reaches spec (through runtime)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the check does not say %q; it says:\n%s", want, got)
		}
	}
}

const modPath = "github.com/probectl/probectl/"

// layers says which of probectl's packages each package may import.
var layers = map[string][]string{
	"bpf":                    {"bpf/sys"},
	"bpf/sys":                {},
	"bpf/symbols":            {"bpf"},
	"spec":                   {"bpf"},
	"spec/spectest":          {"spec"},
	"spec/bpftrace":          {"spec", "bpf", "internal/bttext"},
	"compiler/internal/emit": {},
	"compiler/compiled":      {"bpf", "bpf/sys"},
	"compiler":               {"spec", "compiler/compiled", "compiler/internal/emit", "bpf", "bpf/symbols"},
	"runtime":                {"compiler/compiled", "bpf", "bpf/sys", "bpf/symbols", "internal/pods"},
	"examples":               {},
	"cmd/vmexec":             {},
	"cmd/vmexec/tpcapture":   {"bpf"},
	"cmd/vminit":             {},
	"cmd/mksyscalls":         {},
	"bench/refload":          {},
	"bench/kperhit":          {}, // its test imports compiler, runtime, spec, bpf
	"bench/routes":           {}, // its tests import compiler, runtime, spec, bpf
	"bench/routes/mktable":   {"compiler"},
	"runtime/internal/uwork": {},
	"metrics":                {"runtime", "compiler/compiled", "bpf"},
	"fleet/api/v1alpha1":     {},
	"fleet/kubetest":         {"fleet/api/v1alpha1"},
	"fleet":                  {"spec", "compiler", "bpf", "fleet/api/v1alpha1"},
	"fleet/podwatch":         {"internal/pods"},
	"cmd/probectl":           {"bpf", "bpf/symbols", "spec", "spec/bpftrace", "compiler", "compiler/compiled", "runtime", "metrics", "examples", "fleet", "fleet/api/v1alpha1", "internal/engine", "internal/termtext", "internal/eventfile", "internal/flamegraph", "internal/views", "internal/buildinfo", "fleet/podwatch", "internal/pods", "internal/bttext"},

	// The engines of commands, out of package main.
	"internal/termtext":                  {},
	"internal/bttext":                    {},
	"internal/pods":                      {},
	"internal/pods/podstest":             {},
	"internal/buildinfo":                 {},
	"internal/engine":                    {"spec", "compiler", "compiler/compiled", "runtime", "metrics", "bpf", "fleet", "fleet/api/v1alpha1", "internal/termtext"},
	"internal/eventfile":                 {"runtime", "bpf"},
	"internal/flamegraph":                {"runtime", "bpf", "bpf/symbols"},
	"internal/flamegraph/flamegraphtest": {},
	"internal/cgrouptest":                {},
	"internal/testenv":                   {},
	"internal/views":                     {"compiler/compiled", "runtime", "metrics", "bpf", "bpf/symbols", "fleet", "internal/termtext", "internal/buildinfo"},
}

// specFree are the packages that must not reach spec or HCL, directly or
// through any package they import: a saved plan is self-contained, and
// what runtime and metrics read is what the state recorded.
var specFree = []string{"bpf", "bpf/sys", "bpf/symbols", "compiler/internal/emit", "compiler/compiled", "runtime", "metrics", "runtime/internal/uwork", "fleet/api/v1alpha1", "fleet/kubetest", "internal/eventfile", "internal/flamegraph", "internal/flamegraph/flamegraphtest", "internal/buildinfo", "internal/pods", "internal/cgrouptest", "internal/testenv", "internal/bttext"}

// importGraph maps a package's import path to its imports.
type importGraph map[string][]string

// layeringViolations checks graph (every package reached from probectl's
// own) against the allowed imports and specFree.
func layeringViolations(graph importGraph, allowed map[string][]string) []string {
	var out []string
	seen := map[string]bool{}
	for path, imports := range graph {
		pkg, ours := strings.CutPrefix(path, modPath)
		if !ours {
			continue
		}
		seen[pkg] = true
		ok, known := allowed[pkg]
		if !known {
			out = append(out, fmt.Sprintf("package %s is not in ARCHITECTURE.md's layering (add it here and there)", pkg))
			continue
		}
		for _, imp := range imports {
			if dep, ours := strings.CutPrefix(imp, modPath); ours && !slices.Contains(ok, dep) {
				out = append(out, fmt.Sprintf("%s imports %s: imports point down the pipeline (ARCHITECTURE.md); %s may import only %v", pkg, dep, pkg, ok))
			}
		}
	}
	for pkg := range allowed {
		if !seen[pkg] {
			out = append(out, fmt.Sprintf("package %s is gone: update the layering", pkg))
		}
	}
	for _, pkg := range specFree {
		via := graph.reach(modPath + pkg)
		for _, dep := range slices.Sorted(maps.Keys(via)) {
			name := strings.TrimPrefix(dep, modPath)
			if name == "spec" || strings.HasPrefix(dep, "github.com/hashicorp/hcl") {
				out = append(out, fmt.Sprintf("%s reaches %s (through %s): it must not see spec or HCL", pkg, name, strings.TrimPrefix(via[dep], modPath)))
			}
		}
	}
	sort.Strings(out)
	return out
}

// reach returns every package that from imports, directly or not, each
// with the import of from it is reached through.
func (g importGraph) reach(from string) map[string]string {
	via := map[string]string{}
	var walk func(pkg, first string)
	walk = func(pkg, first string) {
		for _, imp := range g[pkg] {
			if _, done := via[imp]; done {
				continue
			}
			f := first
			if f == "" {
				f = imp
			}
			via[imp] = f
			walk(imp, f)
		}
	}
	walk(from, "")
	return via
}

// TestStartupWeight keeps out of the probectl binary the packages whose
// initialisation every command would pay at start, Kubernetes or not:
// controller-runtime and client-go's scheme of every Kubernetes type (with
// them, a one-probe apply took 40 ms and 12 MiB more; fleet.Client talks
// to the API server through the dynamic client instead). Tests may use
// them.
func TestStartupWeight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	heavy := []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go/kubernetes/scheme", "k8s.io/api/"}
	for _, dep := range strings.Fields(string(out)) {
		for _, h := range heavy {
			if strings.HasPrefix(dep, h) {
				t.Errorf("the probectl binary links %s: every command would initialise it at start (see fleet.Client)", dep)
			}
		}
	}
}
