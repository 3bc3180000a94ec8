package bttext

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestCatLoadavg reads /proc/loadavg through Cat: its whole line, as the
// kernel formats it.
func TestCatLoadavg(t *testing.T) {
	got, err := Cat("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2} [0-9]+/[0-9]+ [0-9]+\n$`).MatchString(got) {
		t.Fatalf("Cat(/proc/loadavg) = %q", got)
	}
}

// TestCatRefuses is the hostile side: paths outside CatFiles (however
// spelled: relative, with .., a symbolic link to an allowed file) are
// refused before anything is opened, and an allowed name reached through
// a symbolic link is not followed.
func TestCatRefuses(t *testing.T) {
	link := filepath.Join(t.TempDir(), "loadavg")
	if err := os.Symlink("/proc/loadavg", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/shadow", "/proc/self/maps", "/proc/../proc/loadavg", "proc/loadavg", "/proc/loadavg/", link, ""} {
		if _, err := Cat(p); !errors.Is(err, ErrCatRefused) {
			t.Errorf("Cat(%q): %v, want ErrCatRefused", p, err)
		}
	}
}
