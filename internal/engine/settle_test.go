package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// noWriters sees a writer through the kernel's lease check, and none once
// it closed.
func TestNoWriters(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.hcl")
	w, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	check := func() error {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return noWriters(f)
	}
	if err := check(); err != errBeingWritten {
		t.Errorf("open for writing: %v, want %v", err, errBeingWritten)
	}
	w.Close()
	if err := check(); err != nil {
		t.Errorf("closed: %v, want nil", err)
	}
	if _, err := readSpecFile(p, nil); err != nil {
		t.Errorf("readSpecFile after the writer closed: %v", err)
	}
}

// stable decides when a read of the specs may be applied.
func TestAgentStable(t *testing.T) {
	const settle = time.Second
	now := time.Unix(1000, 0)
	live := &Applied{Digest: "old", real: "/specs/rev1"}
	set := func(digest, real string, writing ...string) *specSet {
		return &specSet{digest: digest, real: real, writing: writing}
	}
	seen := func(digest string, ago time.Duration) *pendingSpecs {
		return &pendingSpecs{since: now.Add(-ago), seen: now.Add(-ago), digest: digest}
	}
	for _, c := range []struct {
		name  string
		set   *specSet
		pend  *pendingSpecs
		force bool
		want  bool
	}{
		{"first read of a change", set("new", "/specs/rev1"), nil, false, false},
		{"unchanged for the settle time", set("new", "/specs/rev1"), seen("new", settle), false, true},
		{"changed since the last read", set("newer", "/specs/rev1"), seen("new", settle), false, false},
		{"unchanged for less", set("new", "/specs/rev1"), seen("new", settle/2), false, false},
		{"a file open for writing, even long unchanged", set("new", "/specs/rev1", "/specs/a.hcl"), seen("new", 10*settle), false, false},
		{"a file open for writing at SIGHUP", set("new", "/specs/rev1", "/specs/a.hcl"), nil, true, false},
		{"SIGHUP", set("new", "/specs/rev1"), nil, true, true},
		{"a symlink swapped: at once", set("new", "/specs/rev2"), nil, false, true},
		{"a symlink swapped to a file being written", set("new", "/specs/rev2", "/specs/rev2/a.hcl"), nil, false, false},
	} {
		ok, why := stable(c.set, live, c.pend, c.force, now, settle)
		if ok != c.want || ok != (why == "") {
			t.Errorf("%s: stable %v (%q), want %v", c.name, ok, why, c.want)
		}
	}
}
