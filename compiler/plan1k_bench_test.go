package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// mixed is a spec of n probes, a third of each kind (issue 22): tracepoints
// counting by comm, kernel functions with entry and exit histograms, and
// uprobes of libc's malloc and free ("libc", looked up in ld.so.cache).
func mixed(n int) map[string][]byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "probe \"tracepoint\" \"plan1k_t%d\" {\n  event = \"syscalls:sys_enter_openat\"\n  on_entry {\n    count \"tcalls\" { by = [comm] }\n  }\n}\n", i)
		case 1:
			fmt.Fprintf(&b, "probe \"kernel\" \"plan1k_k%d\" {\n  functions = [\"ksys_write\"]\n  on_entry {\n    save = { start = ktime }\n  }\n  on_exit {\n    hist \"klat\" { value = ktime - entry.start }\n  }\n}\n", i)
		case 2:
			fmt.Fprintf(&b, "probe \"user\" \"plan1k_u%d\" {\n  binary    = \"libc\"\n  functions = [\"malloc\", \"free\"]\n  on_entry {\n    hist \"ubytes\" { value = arg0 }\n  }\n}\n", i)
		}
	}
	return map[string][]byte{"mixed.hcl": []byte(b.String())}
}

// planMixed parses, compiles and plans the n-probe mixed spec, as
// "probectl plan -target linux-7.2-amd64" does.
func planMixed(b *testing.B, n int) {
	files := mixed(n)
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
