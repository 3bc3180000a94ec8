package compiler_test

import (
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// planMixed parses, compiles and plans the n-probe mixed spec, as
// "probectl plan -target linux-7.2-amd64" does.
func planMixed(b *testing.B, n int) {
	files := compiler.MixedSpec(n)
	f := mustProfile(b, "linux-7.2-amd64")
	b.ReportAllocs()
	for b.Loop() {
		cfg, diags := spec.Parse(files)
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		out, diags := compiler.Compile(cfg, f)
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if len(out.Probes) != n {
			b.Fatalf("%d probes planned, want %d", len(out.Probes), n)
		}
		compiler.NewPlan(out)
	}
}

// BenchmarkPlan1000Mixed against BenchmarkPlan1Mixed: issue 22's goal is
// 100 ms for the thousand.
func BenchmarkPlan1000Mixed(b *testing.B) { planMixed(b, 1000) }

// BenchmarkPlan1Mixed is one probe of each kind's first: a tracepoint.
func BenchmarkPlan1Mixed(b *testing.B) { planMixed(b, 1) }

// BenchmarkPlan3Mixed is one probe of each kind.
func BenchmarkPlan3Mixed(b *testing.B) { planMixed(b, 3) }
