package spec_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// Diagnostics whose detail says what to write instead.
func TestDiagnosticDetails(t *testing.T) {
	for _, tt := range []struct{ kind, handler, expr, summary, detail string }{
		{"tracepoint", "on_entry", `{ big = args.count > 10 }`, "Field cannot hold this", "The values of fields = { ... } are integers and strings"},
		{"tracepoint", "on_entry", `{ who = pid > 1 ? comm : comm }`, "Strings cannot be chosen", "Choose with when"},
		{"kernel", "on_exit", `{ f = ret.sk_state }`, "Unsupported traversal", `cast(ret, "struct NAME").FIELD`},
		{"kernel", "on_entry", `{ f = arg0.sk_state }`, "Unsupported traversal", `cast(arg0, "struct NAME").FIELD`},
		{"tracepoint", "on_entry", `{ f = pid.x }`, "Unsupported traversal", "task.FIELD and table reads have fields; pid is a plain value."},
		{"tracepoint", "on_entry", `{ f = band(pid, 0xff) }`, "Not a decimal number", "Write 255 for 0xff."},
	} {
		where := `event = "syscalls:sys_enter_read"`
		if tt.kind == "kernel" {
			where = `functions = ["vfs_read"]`
		}
		src := fmt.Sprintf("probe %q \"p\" {\n  %s\n  %s {\n    event \"e\" {\n      fields = %s\n    }\n  }\n}\n", tt.kind, where, tt.handler, tt.expr)
		_, diags := spec.Parse(map[string][]byte{"d.hcl": []byte(src)})
		if len(diags) != 1 || diags[0].Summary != tt.summary || !strings.Contains(diags[0].Detail, tt.detail) {
			t.Errorf("%s: got %v, want %s: ...%s...", tt.expr, diags, tt.summary, tt.detail)
		}
	}
}
