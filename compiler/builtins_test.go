package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// The two tables of built-in values hold each other: every value the spec
// language has is read by the compiler, by its path or by its code (an
// integer's emit, a string's text), and the compiler reads nothing else.
func TestEveryBuiltinHasCode(t *testing.T) {
	values := map[string]bool{}
	for _, b := range spec.Builtins() {
		if b.Form != spec.FormValue {
			continue
		}
		values[b.Name] = true
		c, coded := builtinCodes[b.Name]
		switch {
		case b.Path != nil && coded:
			t.Errorf("%s has a path and code: one says how it is read", b.Name)
		case b.Path != nil:
		case !coded:
			t.Errorf("%s has no code in builtinCodes and no path", b.Name)
		case b.Type.IsString() && c.text == nil:
			t.Errorf("%s is a string and has no text code", b.Name)
		case !b.Type.IsString() && c.emit == nil:
			t.Errorf("%s is an integer and has no emit code", b.Name)
		}
	}
	for name := range builtinCodes {
		if !values[name] {
			t.Errorf("builtinCodes has %s, which is no built-in value of spec", name)
		}
	}
}

// kindSources open a probe of each kind, with the handler's body to come.
var kindSources = map[bpf.Kind]string{
	bpf.KindKernel:     "probe \"kernel\" \"p\" {\n  functions = [\"vfs_read\", \"vfs_write\"]\n",
	bpf.KindUser:       "probe \"user\" \"p\" {\n  binary    = \"/bin/true\"\n  functions = [\"main\"]\n",
	bpf.KindTracepoint: "probe \"tracepoint\" \"p\" {\n  event = [\"syscalls:sys_enter_read\", \"syscalls:sys_enter_write\"]\n",
	bpf.KindProfile:    "probe \"profile\" \"p\" {\n  frequency = 99\n",
}

// Every value compiles, as a key and in an event, in every kind of probe
// that has it, against every profile whose kernel has it.
func TestEveryBuiltinCompiles(t *testing.T) {
	for _, b := range spec.Builtins() {
		if b.Form != spec.FormValue {
			continue
		}
		for _, kind := range bpf.Kinds {
			if !b.Has(kind) {
				continue
			}
			handler := "on_entry"
			if b.Phase == spec.ExitOnly {
				handler = "on_exit"
			}
			header := kindSources[kind]
			if b.USDTOnly && kind == bpf.KindUser {
				header = "probe \"user\" \"p\" {\n  binary = \"/bin/true\"\n  usdt   = \"p:n\"\n"
			}
			src := header + fmt.Sprintf("  %s {\n    count \"c\" { by = [%s] }\n    event \"e\" { fields = { v = %s } }\n  }\n}\n", handler, b.Name, b.Name)
			cfg, diags := spec.Parse(map[string][]byte{"p.hcl": []byte(src)})
			if diags.HasErrors() {
				t.Errorf("%s in a %s probe: %v", b.Name, kind, diags)
				continue
			}
			if kind == bpf.KindUser {
				continue // compiling a user probe resolves its binary's symbols: spec's check only
			}
			for _, name := range bpf.ProfileNames() {
				facts, _ := bpf.Profile(name)
				_, diags := Compile(cfg, facts)
				// What the profile's kernel lacks is refused, and only that.
				lacks := ""
				switch {
				case kind == bpf.KindProfile && !facts.Perf.Link:
					lacks = "Cannot sample" // BPF links on perf events (5.15)
				case (b.Name == "func" || b.Name == "event") && !facts.Helpers.AttachCookie:
					lacks = "No attach cookies" // 5.15
				}
				if lacks != "" {
					if len(diags) != 1 || diags[0].Summary != lacks {
						t.Errorf("%s in a %s probe against %s: %v, want only %q", b.Name, kind, name, diags, lacks)
					}
				} else if diags.HasErrors() {
					t.Errorf("%s in a %s probe against %s: %v", b.Name, kind, name, diags)
				}
			}
		}
	}
}

// A value whose helper came after the target's kernel is an error at the
// value, naming the helper and the kernel: jiffies (bpf_jiffies64, 5.5)
// against Linux 5.4, which the VM matrix runs.
func TestBuiltinNeedsItsKernel(t *testing.T) {
	src := kindSources[bpf.KindTracepoint] + "  on_entry {\n    count \"c\" { by = [jiffies] }\n  }\n}\n"
	cfg, diags := spec.Parse(map[string][]byte{"p.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	facts, _ := bpf.Profile("linux-6.1-amd64")
	facts.Kernel = bpf.Version{Major: 5, Minor: 4}
	_, diags = Compile(cfg, facts)
	if len(diags) != 1 || diags[0].Summary != "Value needs a newer kernel" || diags[0].Subject.Start.Line != 4 ||
		!strings.Contains(diags[0].Detail, "bpf_jiffies64 (Linux 5.5)") || !strings.Contains(diags[0].Detail, "Linux 5.4") {
		t.Errorf("jiffies on 5.4: %v", diags)
	}
	facts.Kernel = bpf.Version{Major: 5, Minor: 5}
	if _, diags := Compile(cfg, facts); diags.HasErrors() {
		t.Errorf("jiffies on 5.5: %v", diags)
	}
}
