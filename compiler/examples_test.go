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
// validate and plan take it), with a header that starts with its name
// ("# runqlat: ..."). Those without kernel probes plan for
// linux-7.2-amd64 (TestBPFtraceExamplesLoad plans the others for every
// profile and compiles all for the live kernel) unless they read
// tracepoints outside syscalls:*, whose formats built-in profiles lack:
// those fail only for that. runtime's TestTool* run the bpftrace tools.
func TestBpftraceExamplesPlanForProfile(t *testing.T) {
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
			if !strings.HasPrefix(string(src), "# "+name+": ") {
				t.Errorf("the header does not start \"# %s: \"", name)
			}
			cfg, diags := spec.LoadPaths([]string{file})
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			profiled := true
			for _, p := range cfg.Probes {
				switch p.Addr.Kind {
				case bpf.KindKernel:
					return // TestBPFtraceExamplesLoad
				case bpf.KindUser:
					if _, err := os.Stat(p.Binary); err != nil {
						t.Skipf("%s probes %s, which this machine lacks: %v", p.Addr, p.Binary, err)
					}
				}
				for _, e := range p.Events {
					profiled = profiled && strings.HasPrefix(e.Text, "syscalls:")
				}
			}
			_, diags = compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
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
