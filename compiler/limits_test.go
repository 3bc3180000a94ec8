package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// compileErrors compiles src for facts and returns the errors; the spec
// itself must be valid.
func compileErrors(t *testing.T, facts *bpf.Facts, src string) hcl.Diagnostics {
	t.Helper()
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = compiler.Compile(cfg, facts)
	return diags
}

// wantError checks that diags is one error with that summary on that line.
func wantError(t *testing.T, diags hcl.Diagnostics, summary string, line int) {
	t.Helper()
	if len(diags) != 1 || diags[0].Summary != summary || diags[0].Subject == nil || diags[0].Subject.Start.Line != line {
		t.Fatalf("want one %q on line %d, got %v", summary, line, diags)
	}
	t.Logf("%s: %s", diags[0].Subject, diags[0].Detail)
}

// The kernel loads at most 1000000 instructions: a larger program is
// refused at its largest construct.
func TestProgramTooLarge(t *testing.T) {
	cpus := strings.Repeat("cpu+", 49999) + "cpu" // 5 instructions a term
	src := sums("pid", cpus, cpus, cpus, cpus)
	wantError(t, compileErrors(t, mustProfile(t, "linux-7.2-amd64"), src), "Program too large", 7)
}

// 63 aggregations and the stats map are 64 maps, which the kernel takes
// (the verifier loads it, as root); the 64th aggregation is refused at
// plan time (testdata/invalid/too_many_maps.hcl).
func TestMapsPerProgram(t *testing.T) {
	var counts strings.Builder
	for i := range compiler.MaxMaps - 1 {
		fmt.Fprintf(&counts, "    count \"c%d\" {}\n", i)
	}
	out := compileText(t, mustProfile(t, "linux-7.2-amd64"),
		"probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_enter_getppid\"\n  on_entry {\n"+counts.String()+"  }\n}\n")
	if len(out.Probes[0].Maps) != compiler.MaxMaps {
		t.Fatalf("%d maps", len(out.Probes[0].Maps))
	}
	if kernel := requireBPF(t); loadAll(t, out, kernel) != 1 {
		t.Fatal("the program did not load")
	}
}

// One multi link attaches at most 2^20 functions.
func TestMultiLinkLimit(t *testing.T) {
	facts := mustProfile(t, "linux-7.2-amd64")
	for i := range compiler.MaxKprobeMulti + 1 {
		facts.Functions = append(facts.Functions, fmt.Sprintf("f%07d", i))
	}
	diags := compileErrors(t, facts, `probe "kernel" "all" {
  functions = ["f*"]
  on_entry {
    count "c" {}
  }
}`)
	wantError(t, diags, "Too many functions for one link", 2)
}
