package symbols

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
)

// "libc" resolves to the path ldconfig -p gives for libc.so.6 on this
// machine.
func TestResolveLibraryHost(t *testing.T) {
	out, err := exec.Command("ldconfig", "-p").Output()
	if err != nil {
		t.Skipf("no ldconfig: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s+libc\.so\.6 \(libc6,x86-64\) => (\S+)$`).FindSubmatch(out)
	if m == nil {
		t.Skip("ldconfig lists no x86-64 libc.so.6")
	}
	for _, name := range []string{"libc", "libc.so.6"} {
		got, err := ResolveLibrary(LDCache, name, bpf.ArchX86_64)
		if err != nil || got != string(m[1]) {
			t.Errorf("%s: %q, %v; ldconfig -p says %s", name, got, err, m[1])
		}
	}
	if _, err := ResolveLibrary(LDCache, "libc.so", bpf.ArchX86_64); err == nil {
		t.Error("libc.so (a name with .so, not cached as it is) resolved")
	}
	if _, err := ResolveLibrary(LDCache, "libnosuch-key", bpf.ArchX86_64); err == nil || !strings.Contains(err.Error(), "ldconfig -p") {
		t.Errorf("a missing library: %v", err)
	}
}

// A cache written here: the arch filter, ambiguity, and damaged files.
func TestResolveLibraryCache(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "ld.so.cache")
	writeLDCache(t, cache, []ldEntry{
		{0x0a03, "libfoo.so.1", "/arm/libfoo.so.1"},
		{0x0303, "libfoo.so.1", "/x86/libfoo.so.1"},
		{0x0303, "libfoo.so.1", "/x86/other/libfoo.so.1"},
		{0x0303, "libbar.so.1", "/x86/libbar.so.1"},
		{0x0303, "libbar.so.2", "/x86/libbar.so.2"},
	})
	for _, c := range []struct {
		name string
		arch bpf.Arch
		want string
	}{
		{"libfoo", bpf.ArchX86_64, "/x86/libfoo.so.1"},
		{"libfoo", bpf.ArchArm64, "/arm/libfoo.so.1"},
		{"libbar.so.2", bpf.ArchX86_64, "/x86/libbar.so.2"},
		{"libbar", bpf.ArchX86_64, "ambiguous"},
		{"libbar", bpf.ArchArm64, "no arm64 library"},
	} {
		got, err := ResolveLibrary(cache, c.name, c.arch)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s on %s: %s, want %s", c.name, c.arch, got, c.want)
		}
	}
	b, _ := os.ReadFile(cache)
	for i := range b {
		if _, err := parseLDCache(b[:i]); err == nil && i < 48 {
			t.Fatalf("%d bytes parsed", i)
		}
	}
	bad := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(bad[48+4:], 1<<30)
	if _, err := parseLDCache(bad); err == nil {
		t.Error("an offset beyond the file parsed")
	}
}

// Names that are links to one file are that file (libreadline.so and
// libreadline.so.8, both links to libreadline.so.8.2); names of two files
// stay ambiguous, on the host and under a root.
func TestResolveLibraryOneFile(t *testing.T) {
	dir := t.TempDir()
	lib := func(rel string) string { return filepath.Join(dir, "lib", rel) }
	os.MkdirAll(lib(""), 0o755)
	os.WriteFile(lib("libone.so.1.2"), []byte("one"), 0o644)
	os.Symlink("libone.so.1.2", lib("libone.so"))
	os.Symlink("libone.so.1.2", lib("libone.so.1"))
	os.WriteFile(lib("libtwo.so.1"), []byte("two"), 0o644)
	os.WriteFile(lib("libtwo.so"), []byte("two"), 0o644)
	entries := func(prefix string) []ldEntry {
		return []ldEntry{
			{0x0303, "libone.so", prefix + "/lib/libone.so"},
			{0x0303, "libone.so.1", prefix + "/lib/libone.so.1"},
			{0x0303, "libtwo.so", prefix + "/lib/libtwo.so"},
			{0x0303, "libtwo.so.1", prefix + "/lib/libtwo.so.1"},
		}
	}
	cache := filepath.Join(dir, "ld.so.cache")
	writeLDCache(t, cache, entries(dir))
	if got, err := ResolveLibrary(cache, "libone", bpf.ArchX86_64); err != nil || got != lib("libone.so.1") {
		t.Errorf("libone: %q, %v; want %s", got, err, lib("libone.so.1"))
	}
	if _, err := ResolveLibrary(cache, "libtwo", bpf.ArchX86_64); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("libtwo (two files): %v, want ambiguous", err)
	}
	os.MkdirAll(filepath.Join(dir, "etc"), 0o755)
	writeLDCache(t, filepath.Join(dir, "etc", "ld.so.cache"), entries(""))
	if got, err := ResolveLibraryIn(dir, "libone", bpf.ArchX86_64); err != nil || got != "/lib/libone.so.1" {
		t.Errorf("libone under a root: %q, %v; want /lib/libone.so.1", got, err)
	}
	if _, err := ResolveLibraryIn(dir, "libtwo", bpf.ArchX86_64); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("libtwo under a root: %v, want ambiguous", err)
	}
}

// writeLDCache writes a cache of the new format holding es at path.
func writeLDCache(t *testing.T, path string, es []ldEntry) {
	t.Helper()
	var strs []byte
	hdr := 48 + 24*len(es)
	body := make([]byte, hdr)
	copy(body, ldMagicNew)
	binary.LittleEndian.PutUint32(body[20:], uint32(len(es)))
	add := func(s string) uint32 {
		off := uint32(hdr + len(strs))
		strs = append(append(strs, s...), 0)
		return off
	}
	for i, e := range es {
		p := body[48+24*i:]
		binary.LittleEndian.PutUint32(p[0:], e.flags)
		binary.LittleEndian.PutUint32(p[4:], add(e.name))
		binary.LittleEndian.PutUint32(p[8:], add(e.path))
	}
	if err := os.WriteFile(path, append(body, strs...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseLDCache: any file parses or fails, never panics, never reads
// out of bounds.
func FuzzParseLDCache(f *testing.F) {
	if b, err := os.ReadFile(LDCache); err == nil && len(b) < 1<<16 {
		f.Add(b)
	}
	f.Add(append([]byte(nil), ldMagicNew...))
	f.Add(append(append([]byte(nil), ldMagicOld...), 0, 1, 0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := parseLDCache(b)
		if err == nil && len(entries) > len(b)/24 {
			t.Fatalf("%d entries from %d bytes", len(entries), len(b))
		}
	})
}
