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
		{"band(args.flags, 0x40)", `Write 64 for 0x40. To keep it in hex, write it as a string given to hex: hex("0x40").`},
		{"avg(ret)", "keep a sum"},
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
	src := "probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_exit_read\"\n  on_entry {\n    @reads[comm] = count()\n  }\n}\n"
	_, diags := spec.Parse(map[string][]byte{"map.hcl": []byte(src)})
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `count "opens" { by = [comm] }`) {
		t.Errorf("@map: %v", diags)
	}
}
