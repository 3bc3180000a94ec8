package spec_test

import (
	"strings"
	"testing"

	"github.com/probectl/probectl/spec"
)

// Errors for what a bpftrace user writes say what to write here.
func TestBpftraceHints(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"nsecs", "here it is ktime"},
		{"retval", "here it is ret"},
		{"args->flags", "write args.flags"},
		{"curtask", "here it is task: the current task_struct"},
		{"curtask->real_parent->pid", "write task.real_parent.pid. bpftrace's curtask is task here."},
		{"curtask.real_parent.pid", "Write task.real_parent.pid."},
		{"band(args.flags, 0x40)", `Write 64 for 0x40. To keep it in hex, write it as a string given to hex: hex("0x40").`},
		{"avg(ret)", "keep a sum"},
		{"args.flags & 64", "bpftrace's a & b is band(a, b) here"},
		{"args.flags | 64", "bpftrace's a | b is bor(a, b) here"},
		{"args.flags << 2", "bpftrace's a << b is shl(a, b) here"},
		{"~args.flags", "bpftrace's ~x is bnot(x) here"},
		{"pid > 1 and pid < 9", "write && for and"},
		{"pid > 1 or pid < 9", "write || for or"},
		{"not pid", "write !pid"},
		{"9223372036854775808", `write -9223372036854775808 (the same bits, signed) or hex("0x8000000000000000")`},
	} {
		src := "probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_exit_read\"\n  on_entry {\n    sum \"s\" { value = " + c.expr + " }\n  }\n}\n"
		_, diags := spec.Parse(map[string][]byte{"hint.hcl": []byte(src)})
		if !diags.HasErrors() {
			t.Errorf("%s: no error", c.expr)
			continue
		}
		if d := diags[0]; !strings.Contains(d.Detail, c.want) {
			t.Errorf("%s: %s: %s\nwant it to say %q", c.expr, d.Summary, d.Detail, c.want)
		}
	}
	for _, c := range []struct{ stmt, want string }{
		{`printf("%d\n", pid)`, `bpftrace's printf() is an event block here`},
		{`count("n")`, `bpftrace's count() is an action block here`},
		{`on_exit { count "n" {} }`, "a block inside a block goes on a line of its own:\n\n  on_exit {\n    count \"n\" {}\n  }"},
	} {
		src := "probe \"kernel\" \"k\" {\n  functions = [\"vfs_read\"]\n  on_entry {\n    count \"c\" {}\n  }\n  " + c.stmt + "\n}\n"
		_, diags := spec.Parse(map[string][]byte{"stmt.hcl": []byte(src)})
		if len(diags) != 1 || !strings.Contains(diags[0].Detail, c.want) || diags[0].Subject.Start.Line != 6 {
			t.Errorf("%s: %v\nwant one error on line 6 saying %q", c.stmt, diags, c.want)
		}
	}
	src := "probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_exit_read\"\n  on_entry {\n    @reads[comm] = count()\n  }\n}\n"
	_, diags := spec.Parse(map[string][]byte{"map.hcl": []byte(src)})
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `count "opens" { by = [comm] }`) {
		t.Errorf("@map: %v", diags)
	}
}
