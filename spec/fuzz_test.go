package spec_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/spectest"
)

// FuzzParse: any input either decodes or yields diagnostics that point
// inside the file; it never panics.
func FuzzParse(f *testing.F) {
	spectest.AddSeeds(f, "../examples/*.hcl", "../examples/bpftrace/*.hcl", "testdata/invalid/*.hcl", "testdata/seeds/*.hcl")
	// Around the input limits (testdata/invalid has 1001 parentheses).
	for _, expr := range []string{
		strings.Repeat("!", spec.MaxNesting) + "true ? 1 : 0",
		strings.Repeat("-", spec.MaxNesting) + "1",
		strings.Repeat("pid == 1 ? 1 : ", spec.MaxNesting) + "0",
		strings.Repeat(`"${`, spec.MaxNesting/2) + "1" + strings.Repeat(`}"`, spec.MaxNesting/2),
		"-9223372036854775808 - -(-9223372036854775808)",
		chain(1000),
	} {
		f.Add([]byte(tracepointValue(expr)))
	}
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
		// Every policy checks any spec set, however decoded (validate
		// enforces one on a set with errors).
		if cfg != nil {
			for _, c := range spec.DenyClasses {
				p, _ := spec.ParsePolicy(string(c.Class))
				for _, d := range cfg.Enforce(p) {
					if d.Subject == nil || d.Subject.Start.Byte < 0 || d.Subject.End.Byte > len(src) {
						t.Fatalf("-deny %s: diagnostic range %v outside the %d-byte file", c.Class, d.Subject, len(src))
					}
				}
			}
		}
	})
}
