package compiler

import (
	"fmt"
	"os"
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
	checked := 0
	// What the kernel would refuse of malloc and free: their first bytes
	// read once each, not once per probe.
	for _, o := range fs.byPath {
		checked++
		if o.bin != nil && o.bin.codeReads != 2 {
			t.Errorf("%d reads of libc's functions' first bytes for %d probes of 2 functions, want 2", o.bin.codeReads, n)
		}
	}
	if checked == 0 {
		t.Error("no binary read")
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

// TestFilesBrokenBinaryEachProbe: a binary that is no ELF file, named by
// two probes, is read once, and each probe still gets its own diagnostic
// at its own binary = line.
func TestFilesBrokenBinaryEachProbe(t *testing.T) {
	bad := t.TempDir() + "/plan1k-notelf"
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho not an ELF file\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := bpf.Profile("linux-7.2-amd64")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < 2; i++ {
		fmt.Fprintf(&b, "probe \"user\" \"plan1k_bad%d\" {\n  binary = %q\n  functions = [\"main\"]\n  on_entry {\n    count \"calls\" {}\n  }\n}\n", i, bad)
	}
	cfg, diags := spec.Parse(map[string][]byte{"bad.hcl": []byte(b.String())})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	fs := newFiles()
	u := &unit{facts: f, policy: cfg.Policy, files: fs}
	regs, err := bpf.RegsFor(f.Arch)
	if err != nil {
		t.Fatal(err)
	}
	diags = u.prepareAll(cfg, regs, &Output{Facts: f})
	fs.close()
	var lines []int
	for _, d := range diags {
		if d.Summary == "Cannot read binary" && d.Subject != nil {
			lines = append(lines, d.Subject.Start.Line)
		}
	}
	if fmt.Sprint(lines) != "[2 9]" {
		t.Errorf("Cannot read binary at lines %v, want [2 9]: %v", lines, diags)
	}
	if fs.opens != 1 {
		t.Errorf("the broken binary read %d times, want once", fs.opens)
	}
}
