package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/spec"
	"github.com/rogpeppe/go-internal/diff"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenPlans renders the plan of the examples for every profile, as
// users read it, and compares it with testdata/golden (go test -update).
func TestGoldenPlans(t *testing.T) {
	cfg, diags := spec.LoadPaths([]string{"../../examples"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, name := range bpf.ProfileNames() {
		t.Run(name, func(t *testing.T) {
			facts, err := bpf.Profile(name)
			if err != nil {
				t.Fatal(err)
			}
			out, diags := compiler.Compile(cfg, facts)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			var buf bytes.Buffer
			views.PlanHuman{W: &buf}.Plan(compiler.NewPlan(out))
			path := filepath.Join("testdata/golden", name+".plan")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(want, buf.Bytes()) {
				t.Errorf("%s differs from the output (run go test ./cmd/probectl -update and review the diff):\n%s",
					path, diff.Diff(path, want, "output", buf.Bytes()))
			}
		})
	}
}
