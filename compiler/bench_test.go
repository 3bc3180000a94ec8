package compiler_test

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

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

// sums is a tracepoint probe with one sum per value.
func sums(values ...string) string {
	var b strings.Builder
	b.WriteString("probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_enter_getppid\"\n  on_entry {\n")
	for i, v := range values {
		fmt.Fprintf(&b, "    sum \"s%d\" {\n      value = %s\n    }\n", i, v)
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// chain is "pid + pid + ... + pid" with n terms.
func chain(n int) string { return strings.TrimSuffix(strings.Repeat("pid + ", n), " + ") }

// BenchmarkParseLong: checking a value of 50000 terms (10.6 s and 5 GB
// before issue 7: every node kept its own copy of its text).
func BenchmarkParseLong(b *testing.B) {
	files := map[string][]byte{"long.hcl": []byte(sums(chain(50000)))}
	b.ReportAllocs()
	for b.Loop() {
		if _, diags := spec.Parse(files); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

// A 50000-term value (10.6 s and 5 GB to check before issue 7) checks and
// compiles in linear time and memory.
func TestLongExpressionCompiles(t *testing.T) {
	src := sums(chain(50000))
	goruntime.GC()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	start := time.Now()
	out := compileText(t, mustProfile(t, "linux-7.2-amd64"), src)
	took := time.Since(start)
	goruntime.ReadMemStats(&after)
	n := out.Probes[0].Programs[0].InstructionCount()
	t.Logf("50000 terms: %d instructions, checked and compiled in %v, %d MB allocated", n, took, (after.TotalAlloc-before.TotalAlloc)>>20)
	if n < 50000*6 {
		t.Errorf("%d instructions for 50000 terms", n)
	}
}

// thousand is a spec of n tracepoint probes, each counting by comm.
func thousand(n int) map[string][]byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "probe \"tracepoint\" \"p%d\" {\n  event = \"syscalls:sys_enter_openat\"\n  on_entry {\n    count \"calls\" { by = [comm] }\n  }\n}\n", i)
	}
	return map[string][]byte{"thousand.hcl": []byte(b.String())}
}

// BenchmarkPlan1000: what "probectl plan -target PROFILE" does for 1,000
// probes: parse, compile and make the plan (issue 12's goal: 100 ms).
func BenchmarkPlan1000(b *testing.B) {
	files := thousand(1000)
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
		compiler.NewPlan(out)
	}
}

// BenchmarkPlanGlob50k: resolving and planning a glob over 50,000
// candidate functions (issue 12's goal: 200 ms), against a profile given
// that many functions.
func BenchmarkPlanGlob50k(b *testing.B) {
	f := *mustProfile(b, "linux-7.2-amd64")
	f.Functions = make([]string, 50000)
	for i := range f.Functions {
		f.Functions[i] = fmt.Sprintf("fn_%05d", i)
	}
	files := map[string][]byte{"glob.hcl": []byte(`probe "kernel" "all" {
  functions = ["fn_*"]
  on_entry {
    count "calls" { by = [func] }
  }
}
`)}
	b.ReportAllocs()
	for b.Loop() {
		cfg, diags := spec.Parse(files)
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		out, diags := compiler.Compile(cfg, &f)
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if n := len(out.Probes[0].Functions); n != 50000 {
			b.Fatalf("%d functions", n)
		}
		compiler.NewPlan(out)
	}
}
