package spec_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/spectest"
)

func TestInvalidFixtures(t *testing.T) {
	fixtures := spectest.Load(t, "testdata/invalid")
	for _, f := range fixtures {
		t.Run(filepath.Base(f.Name), func(t *testing.T) {
			if len(f.Want) == 0 {
				t.Fatal("fixture has no # ERROR: marker")
			}
			_, diags := spec.Parse(map[string][]byte{f.Name: f.Source})
			f.Check(t, diags)
		})
	}
}

// The examples are valid, and between them use every probe kind and every
// action: examples/ is one spec set, and each file of examples/bpftrace
// one of its own (their tables share names).
func TestExamplesAreValid(t *testing.T) {
	sets := [][]string{{"../examples"}}
	tools, err := filepath.Glob("../examples/bpftrace/*.hcl")
	if err != nil || len(tools) == 0 {
		t.Fatalf("no examples/bpftrace/*.hcl: %v", err)
	}
	for _, f := range tools {
		sets = append(sets, []string{f})
	}
	kinds := map[string]bool{}
	actions := map[spec.ActionKind]bool{}
	for _, paths := range sets {
		cfg, diags := spec.LoadPaths(paths)
		if len(diags) > 0 {
			t.Fatalf("%s: diagnostics: %v", paths[0], diags)
		}
		for _, p := range cfg.Probes {
			kinds[string(p.Addr.Kind)] = true
			for _, a := range p.Actions() {
				actions[a.Kind] = true
			}
		}
	}
	if len(kinds) != len(bpf.Kinds) {
		t.Errorf("examples cover probe kinds %v, want all of %v", kinds, bpf.Kinds)
	}
	for _, k := range spec.ActionKinds {
		if !actions[k] {
			t.Errorf("no example uses %s", k)
		}
	}
}

func TestContractExample(t *testing.T) {
	cfg, diags := spec.LoadPaths([]string{"../examples/quickstart.hcl"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := []string{}
	for _, p := range cfg.Probes {
		got = append(got, p.Addr.String())
	}
	want := []string{"kernel.vfs_latency", "user.mallocs", "tracepoint.opens"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("probes = %v, want %v", got, want)
	}
	p := cfg.Probes[0]
	if p.EntryDataSize != 8 || p.SaveSize() != 8 || p.Entry.When == nil || len(p.Exit.Actions) != 2 {
		t.Errorf("vfs_latency decoded wrong: %+v", p)
	}
}

func TestDirectoryWithoutSpecs(t *testing.T) {
	_, diags := spec.LoadPaths([]string{t.TempDir()})
	if !diags.HasErrors() {
		t.Fatal("an empty directory should be an error")
	}
	_, diags = spec.LoadPaths([]string{filepath.Join(os.TempDir(), "does-not-exist.hcl")})
	if !diags.HasErrors() {
		t.Fatal("a missing file should be an error")
	}
}
