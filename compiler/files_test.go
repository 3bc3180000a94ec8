package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/testenv"
	"github.com/probectl/probectl/spec"
)

// TestFilesReadOnce: a compile of N user probes of one binary (named as a
// library, and by its path) opens and reads it once, and looks the library
// up in ld.so.cache once (issue 22: libc was read again for every probe).
func TestFilesReadOnce(t *testing.T) {
	f, err := bpf.Profile("linux-7.2-amd64")
	if err != nil {
		t.Fatal(err)
	}
	libc, err := (&files{libs: map[libName]libResult{}}).library("", "libc", f.Arch)
	if err != nil {
		testenv.Absent(t, "no libc in this host's ld.so.cache: %v", err)
	}
	const n = 40
	var b strings.Builder
	for i := 0; i < n; i++ {
		bin := "libc"
		if i%2 == 1 {
			bin = libc
		}
		fmt.Fprintf(&b, "probe \"user\" \"plan1k_u%d\" {\n  binary = %q\n  functions = [\"malloc\", \"free\"]\n  on_entry {\n    count \"calls\" { by = [func] }\n  }\n}\n", i, bin)
	}
	cfg, diags := spec.Parse(map[string][]byte{"once.hcl": []byte(b.String())})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	fs := newFiles()
	u := &unit{facts: f, policy: cfg.Policy, files: fs}
	regs, err := bpf.RegsFor(f.Arch)
	if err != nil {
		t.Fatal(err)
	}
	out := &Output{Facts: f}
	if diags := u.prepareAll(cfg, regs, out); diags.HasErrors() {
		t.Fatal(diags)
	}
	fs.close()
	if len(u.gens) != n {
		t.Fatalf("%d probes prepared, want %d", len(u.gens), n)
	}
	for _, g := range u.gens {
		if got := strings.Join(g.out.Functions, ","); got != "free,malloc" {
			t.Fatalf("%s: functions %s, want free,malloc", g.p.Addr, got)
		}
	}
	if fs.opens != 1 {
		t.Errorf("libc read %d times for %d probes, want once", fs.opens, n)
	}
	if fs.ldLookup != 1 {
		t.Errorf("ld.so.cache looked up %d times for %d probes, want once", fs.ldLookup, n)
	}
}
