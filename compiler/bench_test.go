package compiler_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

func exampleFiles(b *testing.B) map[string][]byte {
	names, _ := filepath.Glob("../examples/*.hcl")
	files := map[string][]byte{}
	for _, n := range names {
		src, err := os.ReadFile(n)
		if err != nil {
			b.Fatal(err)
		}
		files[n] = src
	}
	return files
}

// BenchmarkParse: decoding and checking every example spec.
func BenchmarkParse(b *testing.B) {
	files := exampleFiles(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, diags := spec.Parse(files); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

// BenchmarkCompile: routes and code for every example, per profile.
func BenchmarkCompile(b *testing.B) {
	cfg, diags := spec.Parse(exampleFiles(b))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	for _, name := range []string{"linux-6.1-amd64", "linux-7.2-arm64"} {
		b.Run(name, func(b *testing.B) {
			f := mustProfile(b, name)
			b.ReportAllocs()
			for b.Loop() {
				if _, diags := compiler.Compile(cfg, f); diags.HasErrors() {
					b.Fatal(diags)
				}
			}
		})
	}
}
