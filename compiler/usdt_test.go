package compiler_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/testenv"
	"github.com/probectl/probectl/spec"
)

// buildUSDTProbes builds a program with two USDT probes: t:pair of two
// arguments, and t:glob whose argument is a global (rip-relative).
func buildUSDTProbes(t *testing.T) string {
	t.Helper()
	gcc := needTool(t, "gcc")
	dir := t.TempDir()
	src := `#include <sys/sdt.h>
long bt_usdt_global;
__attribute__((noinline)) void pair(int a, long b) { DTRACE_PROBE2(t, pair, a, b); }
int main(int argc, char **argv) { pair(argc, 2); DTRACE_PROBE1(t, glob, bt_usdt_global); return 0; }
`
	if err := os.WriteFile(filepath.Join(dir, "p.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bt-usdt-probes")
	if out, err := exec.Command(gcc, "-O2", "-o", bin, filepath.Join(dir, "p.c")).CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("sys/sdt.h")) {
			testenv.Absent(t, "no sys/sdt.h (systemtap-sdt-dev)")
		}
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

func compileUSDT(t *testing.T, bin, usdt, handler string) (*compiler.Output, []string) {
	t.Helper()
	src := "probe \"user\" \"u\" {\n  binary = \"" + bin + "\"\n  usdt   = \"" + usdt + "\"\n" + handler + "}\n"
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, diags := compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
	var errs []string
	for _, d := range diags {
		errs = append(errs, d.Summary+": "+d.Detail)
		if d.Subject == nil || d.Subject.Start.Line < 3 {
			t.Errorf("%s: at %v, not at the usdt or the argument", d.Summary, d.Subject)
		}
	}
	return out, errs
}

// TestUSDTPlan: the plan carries the probe's site, its uprobe route and
// one link; what the sites cannot give is an error at the argument.
func TestUSDTPlan(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("the host's program is x86-64; the profile is amd64")
	}
	bin := buildUSDTProbes(t)
	out, errs := compileUSDT(t, bin, "t:pair", "  on_entry {\n    sum \"s\" {\n      value = arg0 + arg1\n    }\n  }\n")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p := out.Probes[0]
	if len(p.Sites) != 1 || p.Sites[0].Args != "-4@%edi -8@%rsi" || p.Sites[0].Offset == 0 || p.Sites[0].RefCtrOffset != 0 ||
		p.Route != compiler.RouteUprobe || len(p.Attach) != 1 || p.Attach[0] != compiler.FamilyUprobeMulti ||
		!strings.HasPrefix(p.Reason, "usdt: ") || *p.LinkCount() != 1 || len(p.Functions) != 1 || p.Functions[0] != "t:pair" {
		t.Errorf("%+v", p.Description)
	}
	for _, c := range []struct{ usdt, handler, want string }{
		{"t:pair", "  on_entry {\n    sum \"s\" {\n      value = arg2\n    }\n  }\n",
			"No such USDT argument: t:pair has 2 arguments at its site"},
		{"t:glob", "  on_entry {\n    sum \"s\" {\n      value = arg0\n    }\n  }\n",
			"USDT argument cannot be read: arg0 of t:glob at its site"},
		{"t:nope", "  on_entry {\n    count \"c\" {}\n  }\n",
			`USDT probe not found: ` + bin + ` has no USDT probe "t:nope". It has t:glob, t:pair`},
	} {
		_, errs := compileUSDT(t, bin, c.usdt, c.handler)
		if len(errs) != 1 || !strings.Contains(errs[0], c.want) {
			t.Errorf("%s: %v, want %q", c.usdt, errs, c.want)
		}
		t.Log(errs)
	}
	out, errs = compileUSDT(t, bin, "t:nope", "  optional = true\n  on_entry {\n    count \"c\" {}\n  }\n")
	if len(errs) > 0 || len(out.Probes) != 0 || len(out.Skipped) != 1 || !strings.Contains(out.Skipped[0].Why, `has no USDT probe "t:nope"`) {
		t.Errorf("optional, missing: %v, %+v", errs, out.Skipped)
	}
	if _, errs := compileUSDT(t, bin, "t:glob", "  on_entry {\n    count \"c\" {}\n  }\n"); len(errs) > 0 {
		t.Errorf("t:glob without its argument: %v", errs)
	}
	if _, errs := compileUSDT(t, "/bin/true", "t:pair", "  on_entry {\n    count \"c\" {}\n  }\n"); len(errs) != 1 || !strings.Contains(errs[0], "has no USDT probes") {
		t.Errorf("a binary without probes: %v", errs)
	}
}

// An x86-64 binary on an arm64 target is refused: its notes' operands
// name registers the target does not have.
func TestUSDTOtherArch(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("the host's program is x86-64")
	}
	bin := buildUSDTProbes(t)
	src := "probe \"user\" \"u\" {\n  binary = \"" + bin + "\"\n  usdt   = \"t:pair\"\n  on_entry {\n    count \"c\" {}\n  }\n}\n"
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = compiler.Compile(cfg, mustProfile(t, "linux-7.2-arm64"))
	if len(diags) != 1 || diags[0].Summary != "Binary of another architecture" || !strings.Contains(diags[0].Detail, "EM_X86_64") || diags[0].Subject.Start.Line != 2 {
		t.Errorf("%v", diags)
	}
}

// A probe of more sites than a probe attaches is refused at usdt.
func TestUSDTTooManySites(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("the profile is amd64")
	}
	gcc := needTool(t, "gcc")
	dir := t.TempDir()
	src := "#include <sys/sdt.h>\nint main(void) {\n" + strings.Repeat("\tDTRACE_PROBE(t, many);\n", 1025) + "\treturn 0;\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "m.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bt-usdt-many")
	if out, err := exec.Command(gcc, "-O0", "-o", bin, filepath.Join(dir, "m.c")).CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("sys/sdt.h")) {
			testenv.Absent(t, "no sys/sdt.h (systemtap-sdt-dev)")
		}
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	_, errs := compileUSDT(t, bin, "t:many", "  on_entry {\n    count \"c\" {}\n  }\n")
	if len(errs) != 1 || !strings.Contains(errs[0], "Too many USDT sites: "+bin+" has 1025 sites of t:many; a probe attaches at most 1024") {
		t.Errorf("%v", errs)
	}
}

// TestUSDTArm64Operands plans USDT probes of a program built for arm64
// (aarch64-linux-gnu-gcc) for the linux-7.2-arm64 profile: -O0 puts
// t:pair's arguments on the stack (-4@[sp, 12] -8@[sp]), read from user
// memory at pt_regs' sp (offset 248) plus the displacement; -O2 in x0 and
// x1 (offsets 0 and 8). For an amd64 target the binary is refused.
func TestUSDTArm64Operands(t *testing.T) {
	cc := needTool(t, "aarch64-linux-gnu-gcc")
	sdt, _ := filepath.Glob("/usr/include/*/sys/sdt.h")
	if len(sdt) == 0 {
		testenv.Absent(t, "no sys/sdt.h (systemtap-sdt-dev)")
	}
	dir := t.TempDir()
	src := `#include <sys/sdt.h>
__attribute__((noinline)) void pair(int a, long b) { DTRACE_PROBE2(t, pair, a, b); }
void _start(void) { pair(1, 2); for (;;) ; }
`
	if err := os.WriteFile(filepath.Join(dir, "p.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for opt, want := range map[string]struct {
		args  string
		loads []int16 // the pt_regs offsets the program reads
		reads int     // bpf_probe_read_user calls
	}{
		"O0": {"-4@[sp, 12] -8@[sp]", []int16{248, 248}, 2},
		"O2": {"-4@x0 -8@x1", []int16{0, 8}, 0},
	} {
		bin := filepath.Join(dir, "bt-usdt-arm64-"+opt)
		// sys/sdt.h lives under the host's multiarch directory, which a
		// cross compiler does not search; its text serves every target.
		if out, err := exec.Command(cc, "-"+opt, "-nostdlib", "-static", "-idirafter", filepath.Dir(filepath.Dir(sdt[0])),
			"-o", bin, filepath.Join(dir, "p.c")).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cc, err, out)
		}
		cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte("probe \"user\" \"u\" {\n  binary = \"" + bin +
			"\"\n  usdt   = \"t:pair\"\n  on_entry {\n    sum \"s\" {\n      value = arg0 + arg1\n    }\n  }\n}\n")})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		out, diags := compiler.Compile(cfg, mustProfile(t, "linux-7.2-arm64"))
		if diags.HasErrors() {
			t.Fatalf("-%s: %v", opt, diags)
		}
		p := out.Probes[0]
		if len(p.Sites) != 1 || p.Sites[0].Args != want.args {
			t.Fatalf("-%s: sites %+v, want one with %q", opt, p.Sites, want.args)
		}
		var loads []int16
		reads := 0
		for _, ins := range p.Programs[0].Instructions {
			if ins.OpCode.Class().IsLoad() && ins.Src == asm.R6 && ins.OpCode.Mode() == asm.MemMode {
				loads = append(loads, ins.Offset)
			}
			if ins.IsBuiltinCall() && ins.Constant == int64(asm.FnProbeReadUser) {
				reads++
			}
		}
		if !slices.Equal(loads, want.loads) || reads != want.reads {
			t.Errorf("-%s: reads pt_regs at %v with %d user reads, want %v with %d:\n%v", opt, loads, reads, want.loads, want.reads, p.Programs[0].Instructions)
		}
		_, diags = compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
		if len(diags) != 1 || diags[0].Summary != "Binary of another architecture" || !strings.Contains(diags[0].Detail, "EM_AARCH64") {
			t.Errorf("-%s for amd64: %v", opt, diags)
		}
	}
}

// TestUSDTPostgresExample plans examples/usdt/postgres.hcl for every
// amd64 profile, against Debian's PostgreSQL 15 on this machine: each
// probe at its sites with their semaphores (ref_ctr_offset), one
// uprobe.multi link where the kernel has it, a uprobe per site where not
// (6.1). The same file reading query__start's second argument, which it
// has not, is an error at that argument naming the one it has.
func TestUSDTPostgresExample(t *testing.T) {
	const file = "../examples/usdt/postgres.hcl"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, diags := spec.LoadPaths([]string{file})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := os.Stat(cfg.Probes[0].Binary); err != nil {
		testenv.Absent(t, "no PostgreSQL 15 (postgresql-15): %v", err)
	}
	for _, name := range bpf.ProfileNames() {
		f := mustProfile(t, name)
		if f.Arch != bpf.ArchX86_64 {
			continue
		}
		out, diags := compiler.Compile(cfg, f)
		if diags.HasErrors() || len(out.Probes) != 2 {
			t.Fatalf("%s: %v", name, diags)
		}
		for _, p := range out.Probes {
			family := compiler.FamilyUprobeMulti
			if !f.Links.UprobeMulti {
				family = compiler.FamilyUprobe
			}
			if len(p.Sites) == 0 || p.Sites[0].RefCtrOffset == 0 || len(p.Attach) != 1 || p.Attach[0] != family {
				t.Errorf("%s %s: sites %+v, attach %v; want sites with semaphores, %s", name, p.Address, p.Sites, p.Attach, family)
			}
		}
	}
	bad := strings.Replace(string(src), "key   = [tid]\n      value = ktime", "key   = [tid]\n      value = arg1", 1)
	if bad == string(src) {
		t.Fatal("the example no longer stores ktime by tid")
	}
	cfg, diags = spec.Parse(map[string][]byte{"postgres.hcl": []byte(bad)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
	line := strings.Count(bad[:strings.Index(bad, "value = arg1")], "\n") + 1
	if len(diags) != 1 || diags[0].Summary != "No such USDT argument" || diags[0].Subject.Start.Line != line ||
		!strings.Contains(diags[0].Detail, `has 1 argument at its site`) || !strings.HasSuffix(diags[0].Detail, "so there is no arg1: its argument is arg0.") {
		t.Errorf("arg1 of query__start: %v, want one error at line %d", diags, line)
	}
	t.Log(diags)
	// query__plan__start has no arguments at all.
	cfg, diags = spec.Parse(map[string][]byte{"plan.hcl": []byte("probe \"user\" \"p\" {\n  binary = \"" + cfg.Probes[0].Binary +
		"\"\n  usdt   = \"postgresql:query__plan__start\"\n  on_entry {\n    sum \"s\" { value = arg0 }\n  }\n}\n")})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
	if len(diags) != 1 || diags[0].Subject.Start.Line != 5 || !strings.Contains(diags[0].Detail, "has no arguments at its site") ||
		!strings.HasSuffix(diags[0].Detail, "so there is no arg0.") {
		t.Errorf("arg0 of query__plan__start: %v", diags)
	}
}
