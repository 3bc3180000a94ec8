package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// TestDenyRawAddressFields is the part of -deny raw-address the spec cannot
// see: a tracepoint field is a string in the record (read in place, no
// address) or a number the event recorded, which str() on a kernel
// tracepoint and kernel_str() read kernel memory at. A number there may be
// a value a process passed (kernel_str(args.filename) of openat, a
// user-chosen pointer), so under the policy it is refused at the field;
// strings in place and syscall pointers read as user memory are not.
func TestDenyRawAddressFields(t *testing.T) {
	facts := mustProfile(t, "linux-6.12-amd64")
	const tp = "probe \"tracepoint\" \"t\" {\n  event = %q\n  on_entry {\n    count \"n\" { by = [%s] }\n  }\n}\n"
	deny, err := spec.ParsePolicy("raw-address")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		event, expr, field string // field: the range refused, "" when allowed
	}{
		{"syscalls:sys_enter_openat", `kernel_str(args.filename)`, "args.filename"},
		{"kmem:kmalloc", `str(args.call_site)`, "args.call_site"},
		{"kmem:kmalloc", `kernel_str(args.ptr)`, "args.ptr"},
		{"sched:sched_process_exec", `str(args.filename)`, ""},  // __data_loc char[]: in place
		{"sched:sched_switch", `str(args.prev_comm)`, ""},       // char[16]: in place
		{"syscalls:sys_enter_openat", `str(args.filename)`, ""}, // user memory
		{"syscalls:sys_enter_openat", `user_str(args.filename)`, ""},
	} {
		src := fmt.Sprintf(tp, c.event, c.expr)
		cfg, diags := spec.Parse(map[string][]byte{"p.hcl": []byte(src)})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", c.expr, diags)
		}
		if _, d := compiler.Compile(cfg, facts); d.HasErrors() {
			t.Fatalf("%s on %s without a policy: %v", c.expr, c.event, d)
		}
		if d := cfg.Enforce(deny); d.HasErrors() {
			t.Fatalf("%s: refused by the spec's part: %v", c.expr, d)
		}
		_, d := compiler.Compile(cfg, facts)
		if c.field == "" {
			if d.HasErrors() {
				t.Errorf("%s on %s refused under -deny raw-address: %v", c.expr, c.event, d)
			}
			continue
		}
		if len(d) != 1 || d[0].Summary != "Raw address denied" {
			t.Errorf("%s on %s: %v, want one Raw address denied", c.expr, c.event, d)
			continue
		}
		start := strings.Index(src, c.field)
		line := strings.Count(src[:start], "\n") + 1
		col := start - strings.LastIndex(src[:start], "\n")
		if got, want := d[0].Subject.String(), fmt.Sprintf("p.hcl:%d,%d-%d", line, col, col+len(c.field)); got != want {
			t.Errorf("%s: refused at %s, want %s", c.expr, got, want)
		}
		if !strings.Contains(d[0].Detail, "reads kernel memory at "+c.field+", a number in the event's record") {
			t.Errorf("%s: detail %q", c.expr, d[0].Detail)
		}
	}
}
