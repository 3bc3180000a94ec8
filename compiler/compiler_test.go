package compiler_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/cilium/ebpf/asm"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rogpeppe/go-internal/diff"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/spectest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func mustProfile(t testing.TB, name string) *bpf.Facts {
	t.Helper()
	f, err := bpf.Profile(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func compileFiles(t testing.TB, facts *bpf.Facts, paths ...string) *compiler.Output {
	t.Helper()
	cfg, diags := spec.LoadPaths(paths)
	return compileConfig(t, facts, cfg, diags)
}

func compileText(t testing.TB, facts *bpf.Facts, src string) *compiler.Output {
	t.Helper()
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	return compileConfig(t, facts, cfg, diags)
}

// compileConfig compiles a parsed config, failing the test on any error.
func compileConfig(t testing.TB, facts *bpf.Facts, cfg *spec.Config, diags hcl.Diagnostics) *compiler.Output {
	t.Helper()
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, diags := compiler.Compile(cfg, facts)
	if diags.HasErrors() {
		t.Fatalf("compile for %s: %v", facts.Name, diags)
	}
	return out
}

func TestInvalidFixtures(t *testing.T) {
	for _, f := range spectest.Load(t, "testdata/invalid") {
		t.Run(filepath.Base(f.Name), func(t *testing.T) {
			facts := mustProfile(t, f.Headers["TARGET"])
			switch f.Headers["BTF"] {
			case "host":
				facts = withHostBTF(t, f.Headers["TARGET"])
			case "":
			default:
				t.Fatalf("# BTF: %s: only host's BTF is known", f.Headers["BTF"])
			}
			if fns := f.Headers["FUNCTIONS"]; fns != "" {
				facts.Functions = strings.Fields(fns)
			}
			for _, fact := range strings.Fields(f.Headers["WITHOUT"]) {
				switch fact {
				case "isa_v4":
					facts.ISAv4 = false
				case "perf_link":
					facts.Perf.Link = false
				case "tracepoint_formats":
					facts = withoutFormats(t, facts)
				default:
					t.Fatalf("# WITHOUT: %s is not a fact fixtures can remove", fact)
				}
			}
			cfg, diags := spec.Parse(map[string][]byte{f.Name: f.Source})
			if diags.HasErrors() {
				t.Fatalf("spec errors, the fixture should fail in the compiler: %v", diags)
			}
			_, diags = compiler.Compile(cfg, facts)
			f.Check(t, diags)
		})
	}
}

// withoutFormats is f as a facts file written before they carried
// tracepoint formats (or events) holds it.
func withoutFormats(t testing.TB, f *bpf.Facts) *bpf.Facts {
	t.Helper()
	path := filepath.Join(t.TempDir(), f.Name+".json")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	g, err := bpf.ReadFactsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var hostBTF struct {
	sync.Mutex
	gz       []byte
	err      error
	profiles map[string]*bpf.Facts
}

// withHostBTF is a profile carrying the host's vmlinux BTF, as a facts
// file written by probectl target -o carries it: a target whose routes
// are the profile's and whose types are this kernel's. Copies share the
// parsed BTF.
func withHostBTF(t testing.TB, profile string) *bpf.Facts {
	t.Helper()
	hostBTF.Lock()
	defer hostBTF.Unlock()
	if hostBTF.gz == nil && hostBTF.err == nil {
		hostBTF.gz, hostBTF.err = bpf.ReadKernelBTF()
		hostBTF.profiles = map[string]*bpf.Facts{}
	}
	if errors.Is(hostBTF.err, os.ErrNotExist) {
		t.Skip("the host kernel has no BTF (" + bpf.VmlinuxBTF + ")")
	}
	if hostBTF.err != nil {
		t.Fatal(hostBTF.err)
	}
	f := hostBTF.profiles[profile]
	if f == nil {
		f = mustProfile(t, profile)
		f.KernelBTF = hostBTF.gz
		hostBTF.profiles[profile] = f
	}
	copied := *f
	return &copied
}

// The route table: for attach = "auto" on each kernel of the matrix.
func TestRoutes(t *testing.T) {
	const entryOnly = `probe "kernel" "p" {
  functions = ["vfs_read"]
  on_entry {
    count "c" {}
  }
}`
	const entryExit = `probe "kernel" "p" {
  functions = ["vfs_read"]
  on_entry {
    save = { t = ktime }
  }
  on_exit {
    hist "h" { value = ktime - entry.t }
  }
}`
	const user = `probe "user" "p" {
  binary    = "/nonexistent/app"
  functions = ["main"]
  on_entry {
    count "c" {}
  }
}`
	type want struct {
		route  compiler.Route
		attach string
	}
	tests := []struct {
		profile string
		src     string
		want    want
	}{
		{"linux-6.1-amd64", entryOnly, want{"trampoline", "fentry"}},
		{"linux-6.1-amd64", entryExit, want{"trampoline", "fentry fexit"}},
		{"linux-6.1-amd64", user, want{"uprobe", "uprobe"}},
		{"linux-6.12-amd64", entryOnly, want{"ftrace", "kprobe.multi"}},
		{"linux-6.12-amd64", entryExit, want{"rethook", "kprobe.session"}},
		{"linux-6.12-amd64", user, want{"uprobe", "uprobe.multi"}},
		{"linux-7.2-amd64", entryOnly, want{"ftrace", "kprobe.multi"}},
		{"linux-7.2-amd64", entryExit, want{"fgraph", "kprobe.session"}},
		{"linux-6.12-arm64", entryOnly, want{"trampoline", "fentry"}},
		{"linux-6.12-arm64", entryExit, want{"trampoline", "fentry fexit"}},
		{"linux-6.12-arm64", user, want{"uprobe", "uprobe.multi"}},
		{"linux-7.2-arm64", entryOnly, want{"ftrace", "kprobe.multi"}},
		{"linux-7.2-arm64", entryExit, want{"fgraph", "kprobe.session"}},
		{"linux-7.2-amd64", strings.Replace(entryExit, `functions`, `attach = "kprobe.multi"
  functions`, 1), want{"fgraph", "kprobe.multi kretprobe.multi"}},
		{"linux-7.2-amd64", strings.Replace(entryExit, `functions`, `attach = "fentry"
  functions`, 1), want{"trampoline", "fentry fexit"}},
		{"linux-7.2-amd64", strings.Replace(entryExit, `functions`, `attach = "kprobe"
  functions`, 1), want{"kprobe", "kprobe kretprobe"}},
		{"linux-6.12-amd64", strings.Replace(entryOnly, `functions`, `attach = "kprobe.multi"
  functions`, 1), want{"ftrace", "kprobe.multi"}},
		{"linux-7.2-amd64", strings.Replace(user, `functions`, `attach = "uprobe"
  functions`, 1), want{"uprobe", "uprobe"}},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d-%s", i, tt.profile), func(t *testing.T) {
			out := compileText(t, mustProfile(t, tt.profile), tt.src)
			p := out.Probes[0]
			got := want{p.Route, strings.ReplaceAll(compiler.JoinFamilies(p.Attach), " + ", " ")}
			if got != tt.want {
				t.Errorf("got %+v, want %+v (reason: %s)", got, tt.want, p.Reason)
			}
			if p.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

// A derived profile: 6.18 has fgraph but not the 6.19 entry-only fast path.
func TestFgraphWithoutFastPath(t *testing.T) {
	f := mustProfile(t, "linux-7.2-amd64")
	f.Kernel = bpf.Version{Major: 6, Minor: 18}
	f.Derive()
	out := compileText(t, f, `probe "kernel" "p" {
  functions = ["vfs_read"]
  on_entry {
    count "c" {}
  }
}`)
	if r := out.Probes[0].Route; r != compiler.RouteFgraph {
		t.Errorf("6.18 entry-only route = %s, want fgraph", r)
	}
}

func TestEntryDataStorage(t *testing.T) {
	f := mustProfile(t, "linux-7.2-amd64")
	tests := []struct {
		save    string
		storage compiler.Storage
		size    int
	}{
		{"{ t = ktime }", compiler.StorageCookie, 8},
		{"{ t = ktime, a = arg0 }", compiler.StorageMap, 16},
		{"{ c = comm }", compiler.StorageMap, 16},
	}
	for _, tt := range tests {
		out := compileText(t, f, `probe "kernel" "p" {
  functions = ["vfs_read"]
  on_entry {
    save = `+tt.save+`
  }
  on_exit {
    count "c" {}
  }
}`)
		ed := out.Probes[0].EntryData
		if ed.Storage != tt.storage || ed.Size != tt.size {
			t.Errorf("save %s: entry data %+v, want %d bytes in %s", tt.save, ed, tt.size, tt.storage)
		}
	}
}

// With no attach cookies, probes that need no per-call slot compile: an
// on_entry with only actions, and an on_exit. Those that do are refused.
func TestNoAttachCookies(t *testing.T) {
	facts := mustProfile(t, "linux-6.1-amd64")
	facts.Helpers.AttachCookie, facts.Helpers.TracingAttachCookie = false, false
	const noSlot = `probe "kernel" "p" {
  functions = ["vfs_read"]
  on_entry {
    count "calls" {}
  }
  on_exit {
    count "returns" {}
  }
}`
	out := compileText(t, facts, noSlot)
	if ed := out.Probes[0].EntryData; ed.Storage != compiler.StorageNone {
		t.Errorf("entry data %+v, want none", ed)
	}
	withSave := strings.Replace(noSlot, `count "calls" {}`, "save = { t = ktime }", 1)
	wantError(t, compileErrors(t, facts, withSave), "No attach cookies", 1)
	withWhen := strings.Replace(noSlot, `count "calls" {}`, `when = pid != 1`, 1)
	wantError(t, compileErrors(t, facts, withWhen), "No attach cookies", 1)
}

// Golden instruction listings and JSON plans of the examples, per profile.
func TestGolden(t *testing.T) {
	for _, name := range bpf.ProfileNames() {
		t.Run(name, func(t *testing.T) {
			facts := mustProfile(t, name)
			if !facts.Kernel.AtLeast(5, 15) {
				// No attach cookies, no BPF perf links: the plan refuses
				// most examples, and what it says is the golden.
				cfg, diags := spec.LoadPaths([]string{"../examples"})
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				_, diags = compiler.Compile(cfg, facts)
				var refused strings.Builder
				for _, d := range diags {
					fmt.Fprintf(&refused, "%s: %s: %s\n", d.Subject, d.Summary, d.Detail)
				}
				golden(t, filepath.Join("testdata/golden", name+".refused"), refused.String())
				return
			}
			out := compileFiles(t, facts, "../examples")
			var listing strings.Builder
			for _, p := range out.Probes {
				for _, prog := range p.Programs {
					fmt.Fprintf(&listing, "## %s %s (%s, %s)\n%v\n", p.Address, prog.Role, prog.Family, prog.Type, prog.Instructions)
				}
			}
			plan, _ := json.MarshalIndent(compiler.NewPlan(out), "", "  ")
			golden(t, filepath.Join("testdata/golden", name+".insns"), listing.String())
			golden(t, filepath.Join("testdata/golden", name+".plan.json"), string(plan)+"\n")
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (run go test ./compiler -update and review the diff):\n%s",
			path, diff.Diff(path, want, "output", []byte(got)))
	}
}

func TestDeterministic(t *testing.T) {
	f := mustProfile(t, "linux-7.2-amd64")
	a := compileFiles(t, f, "../examples")
	b := compileFiles(t, f, "../examples")
	for i := range a.Probes {
		if a.Probes[i].Digest != b.Probes[i].Digest {
			t.Errorf("%s: two compilations differ", a.Probes[i].Address)
		}
	}
}

// A probe of one function known at compile time never asks the kernel for
// its attach cookie: the runtime attaches the compiled list, so the
// function's index is 0 (the entry slot's key, func). With two functions,
// every route's programs read the cookie.
func TestOneFunctionNoCookieCall(t *testing.T) {
	facts := mustProfile(t, "linux-7.2-amd64")
	facts.Functions = []string{"vfs_read", "vfs_write"}
	for _, attach := range []string{"kprobe.multi", "fentry", "kprobe"} {
		for _, fns := range []string{`"vfs_read"`, `"vfs_*"`} {
			out := compileText(t, facts, `probe "kernel" "p" {
  functions = [`+fns+`]
  attach    = "`+attach+`"
  on_entry {
    save = { t = ktime }
  }
  on_exit {
    count "c" { by = [func] }
  }
}`)
			p := out.Probes[0]
			for _, prog := range p.Programs {
				calls := 0
				for _, ins := range prog.Instructions {
					if ins.IsBuiltinCall() && ins.Constant == int64(asm.FnGetAttachCookie) {
						calls++
					}
				}
				if want := map[bool]int{true: 0, false: 1}[len(p.Functions) == 1]; prog.Role == compiler.RoleExit {
					if calls != 2*want { // the slot's key and func
						t.Errorf("%s over %v: the exit program calls bpf_get_attach_cookie %d times, want %d", attach, p.Functions, calls, 2*want)
					}
				} else if calls != want {
					t.Errorf("%s over %v: the entry program calls bpf_get_attach_cookie %d times, want %d", attach, p.Functions, calls, want)
				}
			}
		}
	}
}
