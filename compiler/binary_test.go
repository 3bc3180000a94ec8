package compiler

import (
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// TestHostRootBinaries: with the facts' root a pretend host's "/", a
// library named by name is looked up in that root's ld.so.cache (written
// by ldconfig -r), read under the root, and the plan records the root; a
// library only this machine's cache lists is not found there; a path
// that climbs out of the root stays in it.
func TestHostRootBinaries(t *testing.T) {
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		testenv.Absent(t, "ldconfig is missing")
	}
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skipf("%s: %v", libc, err)
	}
	root := t.TempDir()
	lib := filepath.Join(root, "usr", "lib", "hostonly")
	os.MkdirAll(lib, 0o755)
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	b, err := os.ReadFile(libc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "libhr.so.7"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "etc", "ld.so.conf"), []byte("/usr/lib/hostonly\n"), 0o644)
	if out, err := exec.Command(ldconfig, "-r", root).CombinedOutput(); err != nil {
		t.Fatalf("ldconfig -r: %v\n%s", err, out)
	}
	f, err := bpf.Profile("linux-6.12-amd64")
	if err != nil {
		t.Fatal(err)
	}
	f.Root = root
	compile := func(binary string) (*Output, string) {
		t.Helper()
		src := "probe \"user\" \"hr\" {\n  binary    = \"" + binary + "\"\n  functions = [\"malloc\"]\n  on_entry {\n    count \"c\" {}\n  }\n}\n"
		cfg, diags := spec.Parse(map[string][]byte{"hr.hcl": []byte(src)})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		out, diags := Compile(cfg, f)
		return out, diags.Error()
	}
	// ldconfig lists the file by its soname, libc.so.6, with a link to it.
	out, errs := compile("libc")
	if out == nil {
		t.Fatalf("libc under the root: %s", errs)
	}
	p := out.Probes[0]
	if p.Binary != "/usr/lib/hostonly/libc.so.6" || p.Library != "libc" || p.Root != root || strings.Join(p.Functions, ",") != "malloc" {
		t.Errorf("libc: binary %q library %q root %q functions %v", p.Binary, p.Library, p.Root, p.Functions)
	}
	if _, errs := compile("libm"); !strings.Contains(errs, "Library not found") || !strings.Contains(errs, "(under "+root+")") {
		t.Errorf("libm, which only this machine's cache lists: %s", errs)
	}
	// /lib/x86_64-linux-gnu/libc.so.6 is this machine's, not the root's:
	// a profile target leaves it unresolved, never read here.
	if out, errs := compile("/../../../../../../../" + libc); out == nil || out.Probes[0].Functions != nil {
		t.Errorf("a path climbing out of the root: %v %s", out, errs)
	}
}
