package compiler_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// firstInstructions are functions that start with instructions the kernel
// refuses a uprobe on, and some it accepts.
var firstInstructions = []struct {
	name, asm string
	refused   bool
}{
	{"lock_first", "lock incl (%rdi)", true},
	{"hlt_first", "hlt", true},
	{"int3_first", "int3", true},
	{"vex_first", "vmovd %esi, %xmm0", true}, // c5 f9 6e: 6e is outs in the one-byte table
	{"evex_first", "vmovdqu64 %zmm0, %zmm1", true},
	{"cs_first", ".byte 0x2e\n\tnop", true},
	{"jmp66_first", ".byte 0x66, 0xeb, 0x00", true}, // jmp with an operand-size prefix
	{"movss_first", "mov %eax, %ss", true},
	{"push_first", "push %rbp\n\tpop %rbp", false},
	{"endbr_first", "endbr64", false},
	{"syscall_first", "syscall", false}, // 0f is allowed: two-byte opcodes all are
	{"lea_first", "lea 0x10(%rip), %rax", false},
	{"call_first", "call push_first", false},
}

// buildFirstInstructions compiles a static program, without libc, of
// naked functions starting with each instruction; it waits in pause().
func buildFirstInstructions(t *testing.T) string {
	t.Helper()
	if goruntime.GOARCH != "amd64" {
		t.Skip("the functions are x86-64 code")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is absent: the test builds its binary with it")
	}
	var src strings.Builder
	for _, f := range firstInstructions {
		fmt.Fprintf(&src, "__attribute__((naked)) void %s(void) { __asm__(\"%s\\n\\tret\"); }\n", f.name, strings.ReplaceAll(f.asm, "\n\t", "\\n\\t"))
	}
	src.WriteString("__attribute__((naked, noreturn)) void _start(void) { __asm__(\"1: mov $34, %eax\\n\\tsyscall\\n\\tjmp 1b\"); }\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "first.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "first")
	if out, err := exec.Command(gcc, "-nostdlib", "-static", "-O1", "-o", bin, filepath.Join(dir, "first.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// The plan refuses functions whose first instruction the kernel will not
// put a uprobe on, at the pattern that matched each; as root, the test
// attaches a uprobe to every function of the binary and checks that the
// kernel refuses exactly those.
func TestUprobeFirstInstruction(t *testing.T) {
	bin := buildFirstInstructions(t)
	var names []string
	for _, f := range firstInstructions {
		names = append(names, fmt.Sprintf("%q", f.name))
	}
	src := fmt.Sprintf(`probe "user" "p" {
  binary    = %q
  functions = [
    %s,
  ]
  on_entry {
    count "c" {}
  }
}`, bin, strings.Join(names, ",\n    "))
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	refusedAt := map[int]string{} // line → detail
	_, diags = compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
	for _, d := range diags {
		if d.Summary != "Function cannot be probed" {
			t.Errorf("unexpected %v", d)
			continue
		}
		refusedAt[d.Subject.Start.Line] = d.Detail
	}
	for i, f := range firstInstructions {
		detail, refused := refusedAt[4+i]
		if refused != f.refused {
			t.Errorf("%s (%s): refused %v in the plan, want %v", f.name, f.asm, refused, f.refused)
		}
		if refused && !strings.Contains(detail, f.name) {
			t.Errorf("%s: %q does not name it", f.name, detail)
		}
		if refused {
			t.Logf("line %d: %s", 4+i, detail)
		}
	}

	// A glob is blamed for the functions it matched.
	glob := strings.Replace(src, strings.Join(names, ",\n    "), `"*_first"`, 1)
	cfg, _ = spec.Parse(map[string][]byte{"test.hcl": []byte(glob)})
	_, diags = compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
	for _, d := range diags {
		if d.Subject.Start.Line != 4 {
			t.Errorf("%v not at the glob", d)
		}
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the kernel's verdicts were not checked")
		return
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(100 * time.Millisecond) // the kernel installs uprobes in mapped binaries
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Kprobe, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	ex, err := link.OpenExecutable(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range firstInstructions {
		l, err := ex.Uprobe(f.name, prog, nil)
		if err == nil {
			l.Close()
		}
		if refused := errors.Is(err, syscall.Errno(524)); refused != f.refused { // ENOTSUPP
			t.Errorf("%s (%s): the kernel says %v, the plan said refused %v", f.name, f.asm, err, f.refused)
		}
	}
}

// A named pipe given as the binary is refused, without blocking.
func TestBinaryNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "app")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(fmt.Sprintf(`probe "user" "p" {
  binary    = %q
  functions = ["main"]
  on_entry {
    count "c" {}
  }
}`, fifo))})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	facts := mustProfile(t, "linux-7.2-amd64")
	done := make(chan error, 1)
	go func() {
		_, diags := compiler.Compile(cfg, facts)
		if len(diags) != 1 || diags[0].Summary != "Cannot read binary" || diags[0].Subject.Start.Line != 2 ||
			!strings.Contains(diags[0].Detail, "named pipe") {
			done <- fmt.Errorf("got %v", diags)
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the compiler blocks on a named pipe")
	}
}

// A binary's symbols are whatever bytes its author chose: a function whose
// name holds escape sequences or bytes that are not UTF-8 is refused at the
// pattern that matched it, before it reaches a plan, a state or a terminal.
func TestHostileSymbolNames(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is absent: the test builds its binary with it")
	}
	dir := t.TempDir()
	src := `long f1(long) __asm__("\"evil\x1b[2Jname\"");
__attribute__((noinline)) long f1(long x) { return x + 1; }
long f2(long) __asm__("\"bad\xff\xfeutf\"");
__attribute__((noinline)) long f2(long x) { return x + 2; }
__attribute__((noinline)) long fine(long x) { return x + 3; }
int main(void) { return f1(1) + f2(2) + fine(3) == 0; }
`
	if err := os.WriteFile(filepath.Join(dir, "sym.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sym")
	if out, err := exec.Command(gcc, "-O1", "-o", bin, filepath.Join(dir, "sym.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	f := mustProfile(t, "linux-7.2-amd64")
	for _, tt := range []struct {
		functions, exclude string
		want               int
	}{
		{`["*"]`, `["_*", "main", "frame_dummy", "*register_tm_clones", "fine"]`, 2},
		{`["*"]`, `["_*", "main", "frame_dummy", "*register_tm_clones", "evil*", "bad*"]`, 0},
	} {
		cfg, diags := spec.Parse(map[string][]byte{"s.hcl": []byte(fmt.Sprintf(`probe "user" "syms" {
  binary    = %q
  functions = %s
  exclude   = %s
  on_entry {
    count "n" { by = [func] }
  }
}`, bin, tt.functions, tt.exclude))})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		_, diags = compiler.Compile(cfg, f)
		n := 0
		for _, d := range diags {
			if d.Summary == "Function name not printable" {
				n++
				if strings.ContainsRune(d.Detail, 0x1b) || !utf8.ValidString(d.Detail) {
					t.Errorf("the diagnostic holds the raw bytes: %q", d.Detail)
				}
			}
		}
		if n != tt.want {
			t.Errorf("exclude %s: %d refusals, want %d: %v", tt.exclude, n, tt.want, diags)
		}
	}
}
