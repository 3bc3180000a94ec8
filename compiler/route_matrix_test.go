package compiler_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// TestRouteMatrix writes every route decision (route, families, reason,
// or the diagnostic) for every attach value, handler shape and prefer of
// kernel and user probes, on every profile and on targets each lacking
// one fact, to testdata/golden/routes.txt, each outcome once with the
// cases (functions, attach, prefer, handlers) that reach it: the route
// choice's named steps must give the reasons, word for word, that the one
// function did.
func TestRouteMatrix(t *testing.T) {
	handlers := []struct{ name, body string }{
		{"entry", "on_entry {\n    count \"c\" {}\n  }"},
		{"exit", "on_exit {\n    count \"c\" {}\n  }"},
		{"both", "on_entry {\n    save = { t = ktime }\n  }\n  on_exit {\n    hist \"h\" { value = ktime - entry.t }\n  }"},
		{"both16", "on_entry {\n    save = { t = ktime, u = pid }\n  }\n  on_exit {\n    hist \"h\" { value = ktime - entry.t + entry.u }\n  }"},
		{"bothwhen", "on_entry {\n    when = pid > 1\n  }\n  on_exit {\n    count \"c\" {}\n  }"},
	}
	var b strings.Builder
	for _, target := range routeTargets(t) {
		var order []string
		cases := map[string][]string{}
		add := func(c, outcome string) {
			if cases[outcome] == nil {
				order = append(order, outcome)
			}
			cases[outcome] = append(cases[outcome], c)
		}
		for _, attach := range []string{"auto", "kprobe.multi", "kprobe.session", "fentry", "fsession", "kprobe"} {
			for _, prefer := range []string{"", "hits", "attach"} {
				if prefer != "" && attach != "auto" {
					continue // spec refuses both
				}
				for _, h := range handlers {
					for _, fns := range []string{`["vfs_read"]`, `["vfs_*"]`} {
						if fns != `["vfs_read"]` && prefer == "" && target.facts.Functions == nil {
							continue // a glob changes only the estimates and what copies leave out
						}
						if strings.HasPrefix(h.name, "both") && h.name != "both" && attach != "auto" && attach != "fsession" {
							continue // entry data's size and when change only fsession's reason
						}
						src := fmt.Sprintf("probe \"kernel\" \"p\" {\n  functions = %s\n  attach = %q\n%s  %s\n}\n",
							fns, attach, map[bool]string{true: "", false: fmt.Sprintf("  prefer = %q\n", prefer)}[prefer == ""], h.body)
						add(fmt.Sprintf("kernel %s %s prefer=%s %s", fns, attach, prefer, h.name), routeOf(t, target.facts, src))
					}
				}
			}
		}
		for _, attach := range []string{"auto", "uprobe.session", "uprobe.multi", "uprobe"} {
			for _, h := range handlers[:3] {
				src := fmt.Sprintf("probe \"user\" \"p\" {\n  binary = \"/nonexistent/app\"\n  functions = [\"main\"]\n  attach = %q\n  %s\n}\n", attach, h.body)
				add(fmt.Sprintf("user %s %s", attach, h.name), routeOf(t, target.facts, src))
			}
		}
		for _, tp := range []struct{ name, event, by string }{
			{"no args", `"sched:sched_switch"`, "comm"},
			{"args", `"sched:sched_switch"`, "args.prev_pid"},
			{"syscall", `"syscalls:sys_enter_read"`, "comm"},
			{"events", `["sched:sched_switch", "sched:sched_wakeup"]`, "comm"},
			{"events by event", `["sched:sched_switch", "sched:sched_wakeup"]`, "event"},
		} {
			for _, attach := range []string{"auto", "raw_tracepoint", "tp_btf", "tracepoint"} {
				src := fmt.Sprintf("probe \"tracepoint\" \"p\" {\n  event = %s\n  attach = %q\n  on_entry {\n    count \"c\" { by = [%s] }\n  }\n}\n", tp.event, attach, tp.by)
				add(fmt.Sprintf("tracepoint %s %s", attach, tp.name), routeOf(t, target.facts, src))
			}
		}
		fmt.Fprintf(&b, "# %s\n", target.name)
		for _, o := range order {
			fmt.Fprintf(&b, "%s\n    %s\n", o, strings.Join(cases[o], "; "))
		}
	}
	golden(t, filepath.Join("testdata/golden", "routes.txt"), b.String())
}

type routeTarget struct {
	name  string
	facts *bpf.Facts
}

// routeTargets are the profiles, each 7.2 profile without one of the facts
// the route choice reads, and one with a function list that holds a
// compiler copy (vfs_read.isra.0, which has no BTF).
func routeTargets(t *testing.T) []routeTarget {
	var out []routeTarget
	for _, name := range bpf.ProfileNames() {
		out = append(out, routeTarget{name, mustProfile(t, name)})
	}
	lacks := []struct {
		what string
		drop func(*bpf.Facts)
	}{
		{"kprobe.multi", func(f *bpf.Facts) { f.Links.KprobeMulti = false }},
		{"kprobe.session", func(f *bpf.Facts) { f.Links.KprobeSession = false }},
		{"session kfuncs", func(f *bpf.Facts) { f.Helpers.SessionKfuncs = false }},
		{"fentry", func(f *bpf.Facts) { f.Links.Fentry = false }},
		{"BTF", func(f *bpf.Facts) { f.BTF = false }},
		{"func arg", func(f *bpf.Facts) { f.Helpers.FuncArg = false }},
		{"fsession", func(f *bpf.Facts) { f.Links.Fsession = false }},
		{"kprobe", func(f *bpf.Facts) { f.Links.Kprobe = false }},
		{"fprobe", func(f *bpf.Facts) { f.Links.KprobeMulti, f.Links.KprobeSession = false, false }},
		{"fprobe and fentry", func(f *bpf.Facts) { f.Links.KprobeMulti, f.Links.KprobeSession, f.Links.Fentry = false, false, false }},
		{"every kernel link", func(f *bpf.Facts) {
			f.Links.KprobeMulti, f.Links.KprobeSession, f.Links.Fentry, f.Links.Kprobe = false, false, false, false
		}},
		{"entry fast path", func(f *bpf.Facts) { f.FprobeEntryFastPath = false }},
		{"fgraph (rethook)", func(f *bpf.Facts) { f.Fprobe, f.FprobeEntryFastPath = bpf.FprobeRethook, false }},
		{"uprobe.multi", func(f *bpf.Facts) { f.Links.UprobeMulti = false }},
		{"uprobe.session", func(f *bpf.Facts) { f.Links.UprobeSession = false }},
		{"uprobe", func(f *bpf.Facts) { f.Links.Uprobe = false }},
		{"tracepoint", func(f *bpf.Facts) { f.Links.Tracepoint = false }},
		{"raw_tracepoint", func(f *bpf.Facts) { f.Links.RawTracepoint = false }},
		{"tracepoint and raw_tracepoint", func(f *bpf.Facts) { f.Links.Tracepoint, f.Links.RawTracepoint = false, false }},
	}
	for _, base := range []string{"linux-7.2-amd64", "linux-7.2-arm64"} {
		for _, l := range lacks {
			f := mustProfile(t, base)
			l.drop(f)
			out = append(out, routeTarget{base + " without " + l.what, f})
		}
	}
	// A kernel the cost table has not measured prices by the nearest; one
	// whose table measures none of its routes follows the auto rule.
	f := mustProfile(t, "linux-7.2-amd64")
	f.Kernel = bpf.Version{Major: 6, Minor: 18}
	f.Derive()
	out = append(out, routeTarget{"linux-6.18-amd64 (derived)", f})
	f = mustProfile(t, "linux-6.1-amd64")
	f.Links.KprobeMulti, f.Links.Fentry, f.Links.Kprobe, f.Fprobe = true, false, false, bpf.FprobeRethook
	out = append(out, routeTarget{"linux-6.1-amd64 with kprobe.multi only", f})
	for _, base := range []string{"linux-7.2-amd64", "linux-6.1-amd64"} {
		f := mustProfile(t, base)
		f.Functions = []string{"vfs_read", "vfs_read.isra.0", "vfs_write"}
		out = append(out, routeTarget{base + " with a compiler copy", f})
	}
	return out
}

// routeOf compiles src for f: the probe's route, families and reason, or
// the first error's summary and detail.
func routeOf(t *testing.T, f *bpf.Facts, src string) string {
	t.Helper()
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		return "spec: " + diags[0].Summary + ": " + diags[0].Detail
	}
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		return "error: " + diags[0].Summary + ": " + diags[0].Detail
	}
	if len(out.Probes) != 1 {
		return fmt.Sprintf("%d probes", len(out.Probes))
	}
	p := out.Probes[0]
	return fmt.Sprintf("%s %s: %s", p.Route, compiler.JoinFamilies(p.Attach), p.Reason)
}
