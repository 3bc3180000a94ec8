package spec_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/spec"
)

// addSeeds adds every spec file in the examples and fixtures as seeds.
func addSeeds(f *testing.F, globs ...string) {
	for _, g := range globs {
		names, _ := filepath.Glob(g)
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzParse: any input either decodes or yields diagnostics that point
// inside the file; it never panics.
func FuzzParse(f *testing.F) {
	addSeeds(f, "../examples/*.hcl", "testdata/invalid/*.hcl")
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := spec.Parse(map[string][]byte{"fuzz.hcl": src})
		for _, d := range diags {
			if d.Severity != hcl.DiagError {
				continue
			}
			if d.Summary == "" {
				t.Fatalf("diagnostic without a summary: %#v", d)
			}
			if d.Subject != nil && (d.Subject.Start.Byte < 0 || d.Subject.End.Byte > len(src)) {
				t.Fatalf("diagnostic range %v outside the %d-byte file", d.Subject, len(src))
			}
		}
		if !diags.HasErrors() && cfg == nil {
			t.Fatal("no config and no errors")
		}
	})
}
