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
