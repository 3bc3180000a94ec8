package main

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// TestLayering keeps the imports pointing down the pipeline, as
// ARCHITECTURE.md draws it: spec → compiler → runtime, bpf under all of
// them, and only cmd/probectl seeing everything. It reads the packages'
// own imports (not their tests').
func TestLayering(t *testing.T) {
	const mod = "github.com/probectl/probectl/"
	allowed := map[string][]string{
		"bpf":                                {},
		"spec":                               {"bpf"},
		"spec/spectest":                      {"spec"},
		"compiler":                           {"spec", "bpf"},
		"runtime":                            {"compiler", "bpf"},
		"examples":                           {},
		"cmd/vmexec":                         {},
		"cmd/vmexec/tpcapture":               {"bpf"},
		"cmd/vminit":                         {},
		"cmd/mksyscalls":                     {},
		"bench/refload":                      {},
		"bench/kperhit":                      {}, // its test imports compiler, runtime, spec, bpf
		"bench/routes":                       {}, // its tests import compiler, runtime, spec, bpf
		"bench/routes/mktable":               {"compiler"},
		"runtime/internal/uwork":             {},
		"metrics":                            {"runtime", "compiler", "bpf"},
		"fleet/api/v1alpha1":                 {},
		"fleet/kubetest":                     {"fleet/api/v1alpha1"},
		"fleet":                              {"spec", "compiler", "bpf", "fleet/api/v1alpha1"},
		"internal/flamegraph":                {"runtime", "bpf"},
		"internal/flamegraph/flamegraphtest": {},
		"cmd/probectl":                       {"bpf", "spec", "compiler", "runtime", "metrics", "examples", "fleet", "fleet/api/v1alpha1", "internal/flamegraph"},
	}
	// Packages that must not see HCL at all: a saved plan is self-contained.
	noHCL := map[string]bool{"bpf": true, "runtime": true, "metrics": true, "fleet/api/v1alpha1": true, "fleet/kubetest": true, "internal/flamegraph": true}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		seen[pkg] = true
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("package %s is not in ARCHITECTURE.md's layering (add it here and there)", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if noHCL[pkg] && strings.HasPrefix(imp, "github.com/hashicorp/hcl") {
				t.Errorf("%s imports %s: it must not see HCL", pkg, imp)
			}
			dep, ours := strings.CutPrefix(imp, mod)
			if !ours {
				continue
			}
			if i := sort.SearchStrings(sorted(ok), dep); i >= len(ok) || sorted(ok)[i] != dep {
				t.Errorf("%s imports %s: imports point down the pipeline (ARCHITECTURE.md); %s may import only %v", pkg, dep, pkg, ok)
			}
		}
	}
	for pkg := range allowed {
		if !seen[pkg] {
			t.Errorf("package %s is gone: update the layering", pkg)
		}
	}
}

func sorted(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
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
