package bpf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The per-boot facts cache: written by the first Detect, used by the next,
// and never trusted when it is not root's own file of this boot.
func TestFactsCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("detecting the live kernel's facts needs root")
	}
	dir := filepath.Join(t.TempDir(), "run")
	path := filepath.Join(dir, "facts.json")
	t.Setenv("PROBECTL_FACTS_CACHE", path)
	fresh, err := Detect(DetectOptions{Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	var c cachedFacts
	read := func() {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("the cache was not written: %v", err)
		}
		var entries []cachedFacts
		if err := json.Unmarshal(b, &entries); err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			t.Fatal("the cache has no entry")
		}
		c = entries[0]
	}
	read()
	if c.BootID != bootID() || c.Release != fresh.Release || c.Binary != executableID() || c.Binary == "" || c.Facts.Functions != nil || c.Facts.CPUs != 0 {
		t.Fatalf("cache: boot %q release %q binary %q, %d functions, %d CPUs", c.BootID, c.Release, c.Binary, len(c.Facts.Functions), c.Facts.CPUs)
	}
	same := func(a, b *Facts) bool {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return string(ja) == string(jb)
	}
	cached, err := Detect(DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !same(fresh, cached) {
		t.Fatalf("cached facts differ from detected ones:\n%+v\n%+v", fresh, cached)
	}

	// A cache that says otherwise, to see whether it is used: ISAv4 flipped.
	poison := func(mutate func(*cachedFacts), others ...cachedFacts) {
		t.Helper()
		read()
		c.Facts.ISAv4 = !fresh.ISAv4
		mutate(&c)
		b, _ := json.Marshal(append(others, c))
		os.Remove(path)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	used := func() bool {
		t.Helper()
		f, err := Detect(DetectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return f.ISAv4 != fresh.ISAv4
	}
	poison(func(*cachedFacts) {})
	if !used() {
		t.Fatal("root's cache of this boot was not used")
	}
	if f, err := Detect(DetectOptions{Fresh: true}); err != nil || f.ISAv4 != fresh.ISAv4 {
		t.Errorf("Fresh used the cache: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*cachedFacts)
		after  func()
	}{
		{"another boot", func(c *cachedFacts) { c.BootID = "00000000-0000-0000-0000-000000000000" }, nil},
		{"another release", func(c *cachedFacts) { c.Release += "x" }, nil},
		{"another version", func(c *cachedFacts) { c.Version++ }, nil},
		// Another build of probectl (an upgrade within the boot) may
		// detect facts the writer did not know: they would read false.
		{"another executable", func(c *cachedFacts) { c.Binary = "2049:1234:5678:1700000000.000000000" }, nil},
		{"a world-writable file", func(*cachedFacts) {}, func() { os.Chmod(path, 0o666) }},
		{"a group-writable directory", func(*cachedFacts) {}, func() { os.Chmod(dir, 0o775) }},
		{"a symlink", func(*cachedFacts) {}, func() {
			os.Rename(path, path+".real")
			os.Symlink(path+".real", path)
		}},
		{"a file not owned by root", func(*cachedFacts) {}, func() { os.Chown(path, 65534, 65534) }},
	} {
		os.Chmod(dir, 0o755)
		os.Remove(path)
		if _, err := Detect(DetectOptions{Fresh: true}); err != nil {
			t.Fatal(err)
		}
		poison(tc.mutate)
		if tc.after != nil {
			tc.after()
		}
		if used() {
			t.Errorf("%s: the cache was used", tc.name)
		}
	}
	os.Chmod(dir, 0o755)

	// Other executables' entries (another build's agent, test binaries)
	// stay next to this one's, the newest first, at most maxCachedFacts.
	os.Remove(path)
	if _, err := Detect(DetectOptions{Fresh: true}); err != nil {
		t.Fatal(err)
	}
	read()
	var others []cachedFacts
	for i := 0; i < maxCachedFacts+3; i++ {
		o := c
		o.Binary = fmt.Sprintf("2049:%d:5678:1700000000.000000000", i)
		others = append(others, o)
	}
	poison(func(*cachedFacts) {}, others[:3]...)
	if !used() {
		t.Error("this executable's entry behind three others' was not used")
	}
	poison(func(c *cachedFacts) { c.Binary = "2049:99:5678:1700000000.000000000" }, others[:3]...)
	if used() {
		t.Error("another executable's entry was used")
	}
	read() // the detection that missed wrote its entry in front, and kept the others
	b, _ := os.ReadFile(path)
	var entries []cachedFacts
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) != 5 || entries[0].Binary != executableID() {
		t.Errorf("after a miss: %d entries, the first of %q (%v)", len(entries), entries[0].Binary, err)
	}
	poison(func(*cachedFacts) {}, others[:maxCachedFacts]...)
	if used() {
		t.Error("a file of more than maxCachedFacts entries was used")
	}
	os.Remove(path)
	b, _ = json.Marshal(others[:maxCachedFacts])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(DetectOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	entries = nil
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) != maxCachedFacts || entries[0].Binary != executableID() {
		t.Errorf("a full cache: %d entries after a write, the first of %q (%v)", len(entries), entries[0].Binary, err)
	}

	// Garbage is ignored, and replaced.
	os.Remove(path)
	if err := os.WriteFile(path, []byte(strings.Repeat("{", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := Detect(DetectOptions{}); err != nil || !same(f, fresh) {
		t.Errorf("garbage in the cache: %v", err)
	}
	read()
}
