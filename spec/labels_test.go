package spec

import (
	"fmt"
	"strings"
	"testing"
)

// TestByLabels: each by column's label is the name a by object gives it,
// else what its expression means.
func TestByLabels(t *testing.T) {
	cases := []struct{ by, want string }{
		{`[errno_name(args.ret)]`, "[errno]"},
		{`[signal_name(args.id)]`, "[signal]"},
		{`[comm, args.id, kstack, ustack]`, "[comm args_id kstack ustack]"},
		{`[u32(args.id)]`, "[args_id]"},
		{`[hex(args.id)]`, "[args_id]"},
		{`[args.id + 1]`, "[args_id_1]"},
		{`[pid * 2 > 3 ? 1 : 0]`, "[pid_2_3_1_0]"},
		{`{ why = errno_name(args.ret), who = pid }`, "[why who]"},
	}
	var src strings.Builder
	src.WriteString("probe \"tracepoint\" \"t\" {\n  event = \"raw_syscalls:sys_exit\"\n  on_entry {\n")
	for i, c := range cases {
		fmt.Fprintf(&src, "    count \"c%d\" { by = %s }\n", i, c.by)
	}
	src.WriteString("  }\n}\n")
	cfg, diags := Parse(map[string][]byte{"labels.hcl": []byte(src.String())})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for i, a := range cfg.Probes[0].Actions() {
		if got := fmt.Sprint(ByLabels(a)); got != cases[i].want {
			t.Errorf("by = %s: labels %s, want %s", cases[i].by, got, cases[i].want)
		}
	}
}
