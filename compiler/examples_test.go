package compiler_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// Each file of examples/bpftrace is a spec set of its own (as probectl
// validate and plan take it): it has a header saying what it does and how
// it differs from bpftrace's tool, it is valid, it compiles for the live
// kernel and the verifier accepts every program, and it plans for
// linux-7.2-amd64, unless it reads tracepoints outside syscalls:*, whose
// formats built-in profiles lack. runtime's TestTool* run them.
func TestBpftraceExamples(t *testing.T) {
	kernel := requireBPF(t)
	live, err := bpf.Detect(bpf.DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../examples/bpftrace/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/bpftrace/*.hcl: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".hcl")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(src), "# "+name+": ") || !strings.Contains(string(src), "bpftrace's tools/"+name+".bt") {
				t.Errorf("the header does not start \"# %s: \" nor name bpftrace's tools/%s.bt", name, name)
			}
			load := func() *spec.Config {
				cfg, diags := spec.LoadPaths([]string{file})
				if len(diags) > 0 {
					t.Fatal(diags)
				}
				return cfg
			}
			cfg := load()
			var events []string
			profiled := true
			for _, p := range cfg.Probes {
				for _, e := range p.Events {
					events = append(events, e.Text)
					profiled = profiled && strings.HasPrefix(e.Text, "syscalls:")
				}
			}
			facts := *live
			if err := facts.LoadTracepoints(events); err != nil {
				t.Fatal(err)
			}
			if n := loadAll(t, compileConfig(t, &facts, cfg, nil), kernel); n == 0 {
				t.Error("no program loaded")
			}
			_, diags := compiler.Compile(load(), mustProfile(t, "linux-7.2-amd64"))
			switch {
			case profiled && diags.HasErrors():
				t.Errorf("does not plan for linux-7.2-amd64: %v", diags)
			case !profiled && !diags.HasErrors():
				t.Error("planned for linux-7.2-amd64 without the formats of its tracepoints")
			case !profiled:
				for _, d := range diags {
					if d.Summary != "Tracepoint format unknown" {
						t.Errorf("for linux-7.2-amd64: %s: %s", d.Summary, d.Detail)
					}
				}
			}
		})
	}
}
