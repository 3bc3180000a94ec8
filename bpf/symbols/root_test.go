package symbols

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenInStaysInRoot: a host root's symlinks resolve as under chroot:
// an absolute one from the root, ".." never above it; what lies outside
// the root is never opened, whatever the links say.
func TestOpenInStaysInRoot(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "host")
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, path string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(top, "etc", "x"), "outside") // where the hostile links point, outside root
	write(filepath.Join(root, "etc", "x"), "inside")
	link("../../../../etc/x", filepath.Join(root, "usr", "lib", "up.so"))
	link("/etc/x", filepath.Join(root, "usr", "lib", "abs.so"))
	link("../../../../etc", filepath.Join(root, "usr", "lib", "dir"))
	link("/proc/self/root/etc/x", filepath.Join(root, "usr", "lib", "magic.so"))
	link(filepath.Join(top, "nothere"), filepath.Join(root, "usr", "lib", "gone.so"))
	for _, path := range []string{"/usr/lib/up.so", "/usr/lib/abs.so", "/usr/lib/dir/x", "/../../etc/x", "usr/lib/up.so"} {
		f, err := OpenIn(root, path)
		if err != nil {
			t.Errorf("OpenIn(%s): %v", path, err)
			continue
		}
		b := make([]byte, 16)
		n, _ := f.Read(b)
		f.Close()
		if got := string(b[:n]); got != "inside" {
			t.Errorf("OpenIn(%s) read %q, want the root's own /etc/x", path, got)
		}
	}
	// /proc/self/root resolves within the root, which has no /proc: not found.
	if f, err := OpenIn(root, "/usr/lib/magic.so"); err == nil {
		f.Close()
		t.Errorf("OpenIn followed /proc/self/root out of the root")
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenIn(magic.so): %v, want not found within the root", err)
	}
	// An absolute link to a path outside that the root lacks: not found in the root.
	if _, err := OpenIn(root, "/usr/lib/gone.so"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenIn(gone.so): %v, want not found within the root", err)
	} else if !strings.Contains(err.Error(), "(under "+root+")") {
		t.Errorf("OpenIn(gone.so): %v, want the root named", err)
	}
	// A directory is not a binary.
	if _, err := OpenIn(root, "/etc"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("OpenIn(/etc): %v, want refused as not a regular file", err)
	}
}

// TestResolveLibraryIn reads the ld.so.cache of the root, and the path it
// gives is the root's.
func TestResolveLibraryIn(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	writeLDCache(t, filepath.Join(root, "etc", "ld.so.cache"), []ldEntry{{0x0303, "libfoo.so.1", "/opt/lib/libfoo.so.1"}})
	got, err := ResolveLibraryIn(root, "libfoo", "x86_64")
	if err != nil || got != "/opt/lib/libfoo.so.1" {
		t.Fatalf("ResolveLibraryIn = %q, %v; want /opt/lib/libfoo.so.1", got, err)
	}
	if _, err := ResolveLibraryIn(root, "libbar", "x86_64"); err == nil || !strings.Contains(err.Error(), "/etc/ld.so.cache (under "+root+")") {
		t.Fatalf("ResolveLibraryIn(libbar): %v, want the root's cache named", err)
	}
}
