package compiler_test

import (
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// compileUser compiles one user probe of binary on functions, with the
// handler blocks handlers, for a built-in profile.
func compileUser(t *testing.T, binary, functions, handlers string) hcl.Diagnostics {
	t.Helper()
	src := "probe \"user\" \"p\" {\n  binary    = \"" + binary + "\"\n  functions = [" + functions + "]\n" + handlers + "}\n"
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
	return diags
}

const countEntry = "  on_entry {\n    count \"c\" {}\n  }\n"

// needTool returns the path of a tool the test builds its binary with;
// without it the test skips (under CI=true it fails: .ci/run installs it).
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	testenv.Absent(t, "%s is absent: the test builds its binary with it", name)
	return ""
}

// strlen in the host's libc is an IFUNC: the plan says so, and does not
// guess a neighbour by spelling (it said: Nearest: "mbrlen").
func TestIFuncSharedLibc(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("glibc's strlen is an IFUNC on x86-64; the profile is amd64")
	}
	diags := compileUser(t, "libc", `"strlen"`, countEntry)
	if len(diags) != 1 || diags[0].Summary != "Function is an IFUNC" {
		t.Fatalf("want one IFUNC error, got %v", diags)
	}
	d := diags[0]
	if d.Subject.Start.Line != 3 || !strings.Contains(d.Detail, `"strlen" in /`) || !strings.Contains(d.Detail, "at load time") || strings.Contains(d.Detail, "mbrlen") {
		t.Errorf("detail: %s at %v", d.Detail, d.Subject)
	}
	t.Log(d.Detail)
}

// In a static program glibc's implementations are in the symbol table:
// the error names them.
func TestIFuncStaticImplementations(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("the implementations named are x86-64's")
	}
	gcc := needTool(t, "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "s.c")
	if err := os.WriteFile(src, []byte("#include <string.h>\nint main(int c, char **v) { return strlen(v[0]); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "s")
	if out, err := exec.Command(gcc, "-static", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static (needs libc6-dev's libc.a): %v\n%s", err, out)
	}
	diags := compileUser(t, bin, `"strlen"`, countEntry)
	if len(diags) != 1 || diags[0].Summary != "Function is an IFUNC" {
		t.Fatalf("want one IFUNC error, got %v", diags)
	}
	for _, want := range []string{`"__strlen_avx2"`, `"__strlen_evex"`, `"__strlen_sse2"`, "functions = ["} {
		if !strings.Contains(diags[0].Detail, want) {
			t.Errorf("the detail does not name %s: %s", want, diags[0].Detail)
		}
	}
	// And the implementations it names are probe-able.
	if diags := compileUser(t, bin, `"__strlen_avx2", "__strlen_sse2"`, countEntry); diags.HasErrors() {
		t.Errorf("the implementations: %v", diags)
	}
}

// on_exit on a Go program's function is planned with a warning (Go moves
// goroutine stacks, which uretprobes break); on_entry alone is not, and
// neither is on_exit on a C program.
func TestGoExitWarning(t *testing.T) {
	goTool := needTool(t, "go")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\n//go:noinline\nfunc work(n int) int { return n * 2 }\n\nfunc main() { println(work(2)) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module gowork\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gowork")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	exit := "  on_exit {\n    count \"c\" {}\n  }\n"
	diags := compileUser(t, bin, `"main.work"`, exit)
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || diags[0].Summary != "Exit handler on a Go program" {
		t.Fatalf("want one warning, got %v", diags)
	}
	if d := diags[0]; d.Subject.Start.Line != 4 || !strings.Contains(d.Detail, "main.work") || !strings.Contains(d.Detail, "Use on_entry only") {
		t.Errorf("warning: %s at %v", d.Detail, d.Subject)
	}
	if diags := compileUser(t, bin, `"main.work"`, countEntry); len(diags) != 0 {
		t.Errorf("on_entry only: %v", diags)
	}
	gcc := needTool(t, "gcc")
	src := filepath.Join(dir, "c.c")
	if err := os.WriteFile(src, []byte("int work(int n) { return n * 2; }\nint main(void) { return work(1); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-O0", "-o", bin+"-c", src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if diags := compileUser(t, bin+"-c", `"work"`, exit); len(diags) != 0 {
		t.Errorf("on_exit on a C program: %v", diags)
	}
}
