package spec_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// Tracepoints and their fields are checked against the built-in profiles'
// kernels: none has it, an error with the nearest name; some lack it, a
// warning naming them.
func TestCheckKernels(t *testing.T) {
	kernels := profiles(t)
	for _, c := range []struct {
		event, by string
		severity  hcl.DiagnosticSeverity
		summary   string
		want      string
	}{
		{`"syscalls:sys_enter_opnat"`, "comm", hcl.DiagError, "Tracepoint not found", `Did you mean "syscalls:sys_enter_openat"?`},
		{`"nosuch:*"`, "comm", hcl.DiagError, "Tracepoint not found", `has a tracepoint matching "nosuch:*"`},
		{`"syscalls:sys_enter_openat"`, "args.flag", hcl.DiagError, "Unknown tracepoint field", `Did you mean "flags"?`},
		{`["syscalls:sys_enter_openat", "syscalls:sys_enter_listmount"]`, "comm", hcl.DiagWarning, "Tracepoint not on every kernel",
			`linux-5.10-amd64, linux-5.10-arm64, linux-6.1-amd64 have no tracepoint named "syscalls:sys_enter_listmount" (linux-6.12-amd64, linux-6.12-arm64, linux-7.2-amd64, linux-7.2-arm64 have)`},
		{`"sched:sched_process_exit"`, "args.group_dead", hcl.DiagWarning, "Tracepoint field not on every kernel",
			"args.group_dead is not a field of the probe's events on linux-5.10-amd64, linux-5.10-arm64, linux-6.1-amd64, linux-6.12-amd64, linux-6.12-arm64 (linux-7.2-amd64, linux-7.2-arm64 have it)"},
		{`"sched:sched_switch*"`, "args.prev_comm", 0, "", ""},
		{`optional("syscalls:sys_enter_opnat")`, "comm", 0, "", ""},
	} {
		src := fmt.Sprintf("probe \"tracepoint\" \"t\" {\n  event = %s\n  on_entry {\n    count \"n\" { by = [%s] }\n  }\n}\n", c.event, c.by)
		cfg, diags := spec.Parse(map[string][]byte{"k.hcl": []byte(src)})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", c.event, diags)
		}
		diags = cfg.CheckKernels(kernels)
		if c.summary == "" {
			if len(diags) != 0 {
				t.Errorf("%s, %s: %v, want nothing", c.event, c.by, diags)
			}
			continue
		}
		line := 2
		if strings.HasPrefix(c.by, "args.") {
			line = 4
		}
		if len(diags) != 1 || diags[0].Severity != c.severity || diags[0].Summary != c.summary ||
			!strings.Contains(diags[0].Detail, c.want) || diags[0].Subject.Start.Line != line {
			t.Errorf("%s, %s: %v\nwant one %q on line %d saying %q", c.event, c.by, diags, c.summary, line, c.want)
		}
	}
	if diags := (&spec.Config{}).CheckKernels(nil); diags != nil {
		t.Errorf("no kernels: %v", diags)
	}
}

// The examples name only tracepoints and fields some known kernel has.
func TestExamplesOnKnownKernels(t *testing.T) {
	kernels := profiles(t)
	paths, _ := filepath.Glob("../examples/bpftrace/*.hcl")
	for _, p := range append(paths, "../examples") {
		cfg, diags := spec.LoadPaths([]string{p})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", p, diags)
		}
		if diags := cfg.CheckKernels(kernels); diags.HasErrors() {
			t.Errorf("%s: %v", p, diags)
		}
	}
}

func profiles(t *testing.T) []*bpf.Facts {
	t.Helper()
	var kernels []*bpf.Facts
	for _, name := range bpf.ProfileNames() {
		f, err := bpf.Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		kernels = append(kernels, f)
	}
	return kernels
}
