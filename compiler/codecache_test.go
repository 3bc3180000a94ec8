package compiler

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// MixedSpec is a spec of n probes, a third of each kind (issue 22):
// tracepoints counting by comm, kernel functions with entry and exit
// histograms, and uprobes of libc's malloc and free ("libc", looked up in
// ld.so.cache). bench/plan1k.sh plans the same spec.
func MixedSpec(n int) map[string][]byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "probe \"tracepoint\" \"plan1k_t%d\" {\n  event = \"syscalls:sys_enter_openat\"\n  on_entry {\n    count \"tcalls\" { by = [comm] }\n  }\n}\n", i)
		case 1:
			fmt.Fprintf(&b, "probe \"kernel\" \"plan1k_k%d\" {\n  functions = [\"ksys_write\"]\n  on_entry {\n    save = { start = ktime }\n  }\n  on_exit {\n    hist \"klat\" { value = ktime - entry.start }\n  }\n}\n", i)
		case 2:
			fmt.Fprintf(&b, "probe \"user\" \"plan1k_u%d\" {\n  binary    = \"libc\"\n  functions = [\"malloc\", \"free\"]\n  on_entry {\n    hist \"ubytes\" { value = arg0 }\n  }\n}\n", i)
		}
	}
	return map[string][]byte{"mixed.hcl": []byte(b.String())}
}

// twinHeader is a probe block's header, its name the second label.
var twinHeader = regexp.MustCompile(`(?m)^probe "(\w+)" "(\w+)"`)

// withTwins adds to each file a copy of each of its probes, renamed (a
// longer name, so the header's columns move) and further down the file
// after a comment line, so that every probe has a twin whose body reads
// the same at another place.
func withTwins(t *testing.T, files map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for name, src := range files {
		cfg, diags := spec.Parse(map[string][]byte{name: src})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		text := string(src) + "\n# the twins\n"
		for _, p := range cfg.Probes {
			start := p.DeclRange.Start.Byte
			block := string(src[start:p.BodyRange.End.Byte])
			text += twinHeader.ReplaceAllString(block, `probe "$1" "${2}_twin"`) + "\n"
		}
		out[name] = []byte(text)
	}
	return out
}

// compileCached compiles files for facts with the code cache on or off,
// and says how many probes' code was copied.
func compileCached(t *testing.T, files map[string][]byte, facts *bpf.Facts, cache bool) (*Output, hcl.Diagnostics, int) {
	t.Helper()
	cfg, diags := spec.Parse(files)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, diags, u := compileUnit(cfg, facts, cache)
	return out, inLineOrder(diags), int(u.copied.Load())
}

// insnText is everything of an instruction: what the kernel loads, its
// label and reference, the kfunc it calls, its source comment and the
// spec range it came from.
func insnText(ins *asm.Instruction) string {
	kfunc, _ := bpf.KfuncName(ins)
	src := ""
	if s := ins.Source(); s != nil {
		src = s.String()
	}
	return fmt.Sprintf("%v %d %d %d %d ref=%q sym=%q kfunc=%q src=%q origin=%v",
		ins.OpCode, ins.Dst, ins.Src, ins.Offset, ins.Constant, ins.Reference(), ins.Symbol(), kfunc, src, emit.Origin(ins))
}

// sameCompile fails unless the two compilations are alike in everything:
// the plan as JSON, each probe's digest, each program's fields and each
// instruction (insnText), and the diagnostics.
func sameCompile(t *testing.T, cached, plain *Output, cachedDiags, plainDiags hcl.Diagnostics) {
	t.Helper()
	if a, b := fmt.Sprint(cachedDiags), fmt.Sprint(plainDiags); a != b {
		t.Fatalf("diagnostics with the cache:\n%s\nwithout:\n%s", a, b)
	}
	for i := range cachedDiags {
		if a, b := cachedDiags[i].Subject, plainDiags[i].Subject; fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("diagnostic %d at %v with the cache, %v without", i, a, b)
		}
	}
	if cached == nil || plain == nil {
		if (cached == nil) != (plain == nil) {
			t.Fatalf("output %v with the cache, %v without", cached != nil, plain != nil)
		}
		return
	}
	a, _ := json.MarshalIndent(compiled.NewPlan(cached), "", " ")
	b, _ := json.MarshalIndent(compiled.NewPlan(plain), "", " ")
	if string(a) != string(b) {
		t.Errorf("the plans differ with the cache and without")
	}
	if len(cached.Probes) != len(plain.Probes) {
		t.Fatalf("%d probes with the cache, %d without", len(cached.Probes), len(plain.Probes))
	}
	for i, cp := range cached.Probes {
		pp := plain.Probes[i]
		if cp.Address != pp.Address || cp.Digest != pp.Digest {
			t.Errorf("probe %d: %s digest %s with the cache, %s digest %s without", i, cp.Address, cp.Digest, pp.Address, pp.Digest)
		}
		if len(cp.Programs) != len(pp.Programs) {
			t.Fatalf("%s: %d programs with the cache, %d without", cp.Address, len(cp.Programs), len(pp.Programs))
		}
		for j, prog := range cp.Programs {
			want := pp.Programs[j]
			head := func(p *Program) string {
				return fmt.Sprint(p.Name, p.Role, p.Family, p.Type, p.AttachType, p.PerFunction, p.StackBytes, len(p.Instructions))
			}
			if head(prog) != head(want) {
				t.Fatalf("%s program %d: %s with the cache, %s without", cp.Address, j, head(prog), head(want))
			}
			for k := range prog.Instructions {
				if a, b := insnText(&prog.Instructions[k]), insnText(&want.Instructions[k]); a != b {
					t.Fatalf("%s program %s instruction %d:\nwith the cache: %s\nwithout:        %s", cp.Address, prog.Name, k, a, b)
				}
			}
		}
	}
}

// The code cache changes nothing of a compilation but its speed: the
// 1,000 mixed probes, the examples, and the examples with a twin of every
// probe, planned with the cache and without, are alike instruction by
// instruction, origins and source comments included; the twins' and the
// thousand's code is copied.
func TestCodeCacheSameCompile(t *testing.T) {
	examples := map[string][]byte{}
	paths, _ := filepath.Glob("../examples/*.hcl")
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		examples[filepath.Base(p)] = src
	}
	if len(examples) == 0 {
		t.Fatal("no examples")
	}
	cases := []struct {
		name      string
		files     map[string][]byte
		minCopied int
	}{
		{"mixed1000", MixedSpec(1000), 997},
		{"examples", examples, 0},
		{"twins", withTwins(t, examples), 1},
	}
	for _, c := range cases {
		for _, profile := range []string{"linux-7.2-amd64", "linux-6.1-amd64", "linux-7.2-arm64"} {
			t.Run(c.name+"/"+profile, func(t *testing.T) {
				facts, err := bpf.Profile(profile)
				if err != nil {
					t.Fatal(err)
				}
				cached, cachedDiags, copied := compileCached(t, c.files, facts, true)
				plain, plainDiags, none := compileCached(t, c.files, facts, false)
				if none != 0 {
					t.Fatalf("%d probes copied with the cache off", none)
				}
				sameCompile(t, cached, plain, cachedDiags, plainDiags)
				t.Logf("%d probes' code copied", copied)
				if cached != nil && copied < c.minCopied {
					t.Errorf("%d probes' code copied, want at least %d", copied, c.minCopied)
				}
			})
		}
	}
}

// A body whose code fails (too much stack) is not copied: each of the
// twins is reported at its own line, as without the cache.
func TestCodeCacheFailingTwins(t *testing.T) {
	const body = ` {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" {
      by = { a = str(args.filename, 256), b = str(args.filename, 255) }
    }
  }
}
`
	files := map[string][]byte{"wide.hcl": []byte(`probe "tracepoint" "wide"` + body + "\n\n" + `probe "tracepoint" "wider_still"` + body)}
	facts, err := bpf.Profile("linux-7.2-amd64")
	if err != nil {
		t.Fatal(err)
	}
	cached, cachedDiags, copied := compileCached(t, files, facts, true)
	plain, plainDiags, _ := compileCached(t, files, facts, false)
	sameCompile(t, cached, plain, cachedDiags, plainDiags)
	if copied != 0 {
		t.Errorf("%d probes' code copied from a body that failed", copied)
	}
	var lines []int
	for _, d := range cachedDiags {
		if d.Summary == "Too much stack" {
			lines = append(lines, d.Subject.Start.Line)
		}
	}
	if fmt.Sprint(lines) != "[4 14]" {
		t.Errorf("Too much stack at lines %v, want [4 14]: %v", lines, cachedDiags)
	}
}
