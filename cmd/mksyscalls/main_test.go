package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGenerated checks that bpf/zsyscalls.go is what the generator writes
// from golang.org/x/sys as go.mod requires it: regenerate with
// go run ./cmd/mksyscalls.
func TestGenerated(t *testing.T) {
	want, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", output))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what go run ./cmd/mksyscalls writes from golang.org/x/sys: run it", output)
	}
}

// Spot checks against the kernel's numbers (arch/x86/entry/syscalls/
// syscall_64.tbl, include/uapi/asm-generic/unistd.h).
func TestKnownNumbers(t *testing.T) {
	dir, _, err := xsys()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		goarch string
		nr     int64
		name   string
	}{
		{"amd64", 0, "read"}, {"amd64", 1, "write"}, {"amd64", 257, "openat"}, {"amd64", 62, "kill"}, {"amd64", 234, "tgkill"},
		{"arm64", 63, "read"}, {"arm64", 64, "write"}, {"arm64", 56, "openat"}, {"arm64", 129, "kill"}, {"arm64", 131, "tgkill"},
	} {
		table, err := parseSysnum(filepath.Join(dir, "unix", "zsysnum_linux_"+c.goarch+".go"))
		if err != nil {
			t.Fatal(err)
		}
		if table[c.nr] != c.name {
			t.Errorf("%s %d = %q, want %q", c.goarch, c.nr, table[c.nr], c.name)
		}
	}
}
