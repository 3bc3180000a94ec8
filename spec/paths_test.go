package spec

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A directory is listed, not globbed: its name's glob characters are
// its name. "specs[x]" as a pattern matches "specsx", a sibling whose
// specs would be applied instead.
func TestExpandPathsGlobCharactersInDirectory(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"specs[x]", "specsx", "a*", "ab"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte("# empty\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("specs[x]/a.hcl")
	write("specsx/b.hcl")
	write("a*/c.hcl")
	write("a*/d.txt")
	write("ab/e.hcl")
	for dir, want := range map[string][]string{
		"specs[x]": {"specs[x]/a.hcl"},
		"a*":       {"a*/c.hcl"},
	} {
		got, err := ExpandPaths([]string{filepath.Join(root, dir)})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for i := range want {
			want[i] = filepath.Join(root, want[i])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ExpandPaths(%s) = %q, want %q", dir, got, want)
		}
	}
	// An unreadable directory says why, not "no *.hcl files".
	if _, err := ExpandPaths([]string{filepath.Join(root, "gone")}); !os.IsNotExist(err) {
		t.Errorf("a missing directory: %v", err)
	}
}
