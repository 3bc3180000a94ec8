package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler"
)

// A sum is a counter (not Signed) only where its values cannot be
// negative (issue 18, defect 9: a falling sum served as a counter reads
// as resets to rate() and increase()).
func TestSumSigned(t *testing.T) {
	facts := mustProfile(t, "linux-6.12-amd64")
	type sum struct {
		value, when string
		signed      bool
	}
	probes := []struct {
		head  string // the probe's block up to its handler
		save  string // on_entry's save, for kernel probes
		hooks string // "on_entry" or "on_exit"
		sums  []sum
	}{
		{"probe \"tracepoint\" \"enter\" {\n  event = \"syscalls:sys_enter_read\"", "", "on_entry", []sum{
			{"args.count", "", false}, // size_t
			{"args.fd", "", false},    // unsigned int
			{"args.count - 1", "", true},
			{"-args.count", "", true},
			{"shl(args.count, 1)", "", true},
			{"shr(args.count, 1)", "", false},
			{"args.count * 2 + pid % 7", "", false},
			{"pid + tid + cpu + uid + gid + ktime", "", false},
			{"uid - gid", "", true},
			{"band(args.count, -8)", "", false},
			{"u32(uid - gid)", "", false},
			{"s32(args.count)", "", true},
			{"s64(args.count)", "", false},
		}},
		{"probe \"tracepoint\" \"exit\" {\n  event = \"syscalls:sys_exit_read\"", "", "on_entry", []sum{
			{"args.ret", "", true}, // long
			{"args.ret", "args.ret > 0", false},
			{"args.ret", "pid > 1 && args.ret >= 0", false},
			{"args.ret", "0 < args.ret", false},
			{"args.ret", "args.ret > -5", true},
			{"args.ret", "args.ret > 0 || pid > 1", true},
			{"args.ret", "pid > 0", true},
			{"args.ret + 1", "args.ret >= 0", false},
			{"u16(args.ret)", "", false},
		}},
		{"probe \"kernel\" \"k\" {\n  functions = [\"vfs_read\"]", "save = { start = ktime, a = arg0 }", "on_exit", []sum{
			{"ktime - entry.start", "", false}, // the clock does not go back
			{"(ktime - entry.start) / 1000", "", false},
			{"ktime - entry.a", "", true},
			{"entry.start", "", false},
			{"entry.a", "", true},
			{"ret", "", true}, // the profile has no BTF: untyped
			{"ret", "ret > 0", false},
			{"entry.a", "entry.a >= 0", false},
		}},
		{"probe \"kernel\" \"kentry\" {\n  functions = [\"vfs_read\"]", "", "on_entry", []sum{
			{"args.count", "", true},               // the profile has no BTF: resolved at apply
			{"args.count", "args.count > 0", true}, // kernel data: another CPU may change it between the reads
			{"arg2", "arg2 > 0", false},
		}},
	}
	var src strings.Builder
	for i, p := range probes {
		src.WriteString(p.head + "\n")
		if p.save != "" {
			fmt.Fprintf(&src, "  on_entry {\n    %s\n  }\n", p.save)
		}
		fmt.Fprintf(&src, "  %s {\n", p.hooks)
		for j, s := range p.sums {
			fmt.Fprintf(&src, "    sum \"s%d_%d\" {\n      value = %s\n", i, j, s.value)
			if s.when != "" {
				fmt.Fprintf(&src, "      when  = %s\n", s.when)
			}
			src.WriteString("    }\n")
		}
		src.WriteString("  }\n}\n")
	}
	out := compileText(t, facts, src.String())
	aggs := map[string]*compiler.Aggregation{}
	for _, p := range out.Probes {
		for _, a := range p.Aggregations {
			aggs[a.Name] = a
		}
	}
	for i, p := range probes {
		for j, s := range p.sums {
			a := aggs[fmt.Sprintf("s%d_%d", i, j)]
			if a == nil {
				t.Fatalf("no sum s%d_%d:\n%s", i, j, &src)
			}
			if a.Signed != s.signed || a.Monotonic() == s.signed {
				t.Errorf("%s: sum of %s (when %q): Signed %v, Monotonic %v; want Signed %v", p.head, s.value, s.when, a.Signed, a.Monotonic(), s.signed)
			}
		}
	}
	// The plan says which, for sums only.
	for _, c := range compiler.NewPlan(out).Changes {
		for _, m := range c.Maps {
			if strings.HasPrefix(m.Purpose, "sum ") != (m.Metric != "") {
				t.Errorf("map %s (%s): metric %q", m.Name, m.Purpose, m.Metric)
			}
		}
	}
}
