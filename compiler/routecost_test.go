package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
)

func preferSpec(prefer, functions string, exit bool) string {
	src := `probe "kernel" "p" {
  functions = [` + functions + `]
  prefer    = "` + prefer + `"
  on_entry {
    count "calls" {}
  }`
	if exit {
		src += `
  on_exit {
    count "rets" { by = [ret] }
  }`
	}
	return src + "\n}\n"
}

// The table the compiler embeds measured these kernels; the choices below
// are what its figures say (make routes-table rewrites it: a choice that
// changes is reviewed here).
func TestPreferByTable(t *testing.T) {
	measured := map[string]bool{}
	for _, k := range compiler.RouteCostTable().Kernels {
		measured[k.Kernel] = true
		for _, fam := range []compiler.Family{compiler.FamilyFentry, compiler.FamilyKprobe} {
			if _, ok := k.Families[fam]; !ok {
				t.Errorf("%s: no %s in the table", k.Kernel, fam)
			}
		}
		// bench/routes measures fsession where the kernel has it.
		if f, err := bpf.Profile(k.Kernel); err == nil && f.Links.Fsession {
			if _, ok := k.Families[compiler.FamilyFsession]; !ok {
				t.Errorf("%s has fsession, the table does not measure it (make routes-table KERNELS=%s)", k.Kernel, k.Kernel)
			}
		}
	}
	for _, name := range []string{"linux-6.1-amd64", "linux-6.12-amd64", "linux-7.2-amd64", "linux-6.12-arm64", "linux-7.2-arm64"} {
		if !measured[name] {
			t.Errorf("the table lacks %s", name)
		}
	}
	many := func(n int) *bpf.Facts {
		f := mustProfile(t, "linux-7.2-amd64")
		f.Functions = make([]string, n)
		for i := range f.Functions {
			f.Functions[i] = fmt.Sprintf("fn_%05d", i)
		}
		return f
	}
	for _, c := range []struct {
		profile   string
		facts     *bpf.Facts
		prefer    string
		functions string
		exit      bool
		want      string
		n         int
	}{
		// Few hot functions: trampolines are the cheapest per hit.
		{"linux-7.2-amd64", nil, "hits", `"vfs_read"`, false, "fentry", 1},
		// With an exit, where the table measures fsession: its one program
		// at entry and exit (≈ 423 ns a hit on 7.2 amd64) against the
		// fentry + fexit pair (≈ 175 + 277 ns), and with hits within 10%
		// the attach time decides (≈ 33 ms against ≈ 107 ms for one
		// function).
		{"linux-7.2-amd64", nil, "hits", `"vfs_read"`, true, "fsession", 1},
		// arm64 7.2 alike: ≈ 8045 ns against ≈ 3182 + 5083 ns, ≈ 314 ms
		// against ≈ 828 ms to attach.
		{"linux-7.2-arm64", nil, "hits", `"vfs_read"`, true, "fsession", 1},
		{"linux-6.1-amd64", nil, "hits", `"vfs_read"`, true, "fentry + fexit", 1},
		// Many functions: one fprobe link attaches them fastest.
		{"linux-7.2-amd64", many(5000), "attach", `"fn_*"`, false, "kprobe.multi", 5000},
		{"linux-7.2-amd64", nil, "attach", `"vfs_*"`, false, "kprobe.multi", 1000},
		// Without fprobe (Debian's 6.1), one kprobe a function attaches
		// faster than one trampoline a function.
		{"linux-6.1-amd64", nil, "attach", `"vfs_*"`, true, "kprobe + kretprobe", 1000},
		// arm64 7.2 has fprobe: one link for many functions.
		{"linux-7.2-arm64", nil, "attach", `"vfs_*"`, true, "kprobe.session", 1000},
	} {
		t.Run(fmt.Sprintf("%s-%s-%s-%v", c.profile, c.prefer, c.functions, c.exit), func(t *testing.T) {
			f := c.facts
			if f == nil {
				f = mustProfile(t, c.profile)
			}
			out := compileText(t, f, preferSpec(c.prefer, c.functions, c.exit))
			p := out.Probes[0]
			if got := compiler.JoinFamilies(p.Attach); got != c.want {
				t.Errorf("prefer %s: %s, want %s (%s)", c.prefer, got, c.want, p.Reason)
			}
			if !strings.HasPrefix(p.Reason, `prefer = "`+c.prefer+`": `) {
				t.Errorf("reason %q", p.Reason)
			}
			if p.Cost == nil || p.Cost.Kernel != c.profile || p.Cost.Nearest || p.Cost.Functions != c.n {
				t.Fatalf("cost %+v, want the %s table's estimate for %d functions", p.Cost, c.profile, c.n)
			}
			t.Logf("%s: %s", p.Reason, p.Cost)
		})
	}
}

// Compiler copies have no BTF: prefer = "hits" leaves the trampolines out
// rather than failing at the pattern.
func TestPreferSkipsTrampolinesForCopies(t *testing.T) {
	f := mustProfile(t, "linux-7.2-amd64")
	f.Functions = []string{"vfs_read", "vfs_statfs.part.0.isra.0"}
	out := compileText(t, f, preferSpec("hits", `"vfs_*"`, false))
	p := out.Probes[0]
	if p.Route == compiler.RouteTrampoline {
		t.Errorf("prefer = \"hits\" over a compiler copy chose %v", p.Attach)
	}
	if !strings.Contains(p.Reason, "fentry/fexit left out: 1 of the functions are compiler copies") {
		t.Errorf("reason %q does not say why the trampolines were left out", p.Reason)
	}
}

// A kernel the table lacks uses the nearest measured kernel of its arch,
// and says so.
func TestCostNearestKernel(t *testing.T) {
	f := mustProfile(t, "linux-7.2-amd64")
	f.Kernel = bpf.Version{Major: 6, Minor: 19}
	out := compileText(t, f, preferSpec("hits", `"vfs_read"`, false))
	c := out.Probes[0].Cost
	if c == nil || !c.Nearest || c.Kernel == "" {
		t.Fatalf("cost %+v, want the nearest kernel's", c)
	}
	if s := c.String(); !strings.Contains(s, "nearest measured kernel") {
		t.Errorf("plan text %q does not say the table is another kernel's", s)
	}
}

// Where auto would take trampolines (no fprobe: arm64 before 6.14), a glob
// that matches compiler copies takes legacy kprobes, which attach to any
// symbol, and the reason says why; without copies it stays on trampolines.
func TestAutoCopiesTakeKprobes(t *testing.T) {
	for _, c := range []struct {
		functions []string
		route     compiler.Route
	}{
		{[]string{"vfs_read", "vfs_write"}, compiler.RouteTrampoline},
		{[]string{"vfs_read", "vfs_statfs.part.0.isra.0", "vfs_write"}, compiler.RouteKprobe},
	} {
		f := mustProfile(t, "linux-6.12-arm64")
		f.Functions = c.functions
		out := compileText(t, f, `probe "kernel" "p" {
  functions = ["vfs_*"]
  on_entry {
    count "calls" { by = [func] }
  }
  on_exit {
    count "rets" {}
  }
}
`)
		p := out.Probes[0]
		if p.Route != c.route {
			t.Errorf("%v: route %v (%s), want %v", c.functions, p.Route, p.Reason, c.route)
		}
		if c.route == compiler.RouteKprobe && !strings.Contains(p.Reason, "1 of the functions are compiler copies") {
			t.Errorf("reason %q does not say the copies chose kprobes", p.Reason)
		}
	}
}
