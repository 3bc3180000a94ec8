// Package spectest checks spec fixtures: files whose "# ERROR: SUMMARY"
// comments mark the lines where diagnostics must point, and whose header
// comments ("# TARGET: PROFILE", "# FUNCTIONS: a b c", "# WITHOUT: isa_v4")
// set up the target.
// Tests of spec and compiler share it.
package spectest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// Fixture is one fixture file.
type Fixture struct {
	Name   string
	Source []byte
	// Want holds "LINE: SUMMARY" for every marker.
	Want []string
	// Headers holds "# KEY: value" comments by KEY.
	Headers map[string]string
}

var (
	marker = regexp.MustCompile(`#\s*ERROR:\s*(.+?)\s*$`)
	header = regexp.MustCompile(`^#\s*([A-Z]+):\s*(.*?)\s*$`)
)

// Load reads every *.hcl file in dir.
func Load(t testing.TB, dir string) []*Fixture {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	var out []*Fixture
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f := &Fixture{Name: name, Source: src, Headers: map[string]string{}}
		for i, line := range strings.Split(string(src), "\n") {
			if m := header.FindStringSubmatch(line); m != nil && m[1] != "ERROR" {
				f.Headers[m[1]] = m[2]
			}
			if m := marker.FindStringSubmatch(line); m != nil {
				f.Want = append(f.Want, fmt.Sprintf("%d: %s", i+1, m[1]))
			}
		}
		out = append(out, f)
	}
	return out
}

// Check compares a fixture's markers with the errors in diags: each marker
// must have an error with that summary on that line, and there must be no
// other errors.
func (f *Fixture) Check(t testing.TB, diags hcl.Diagnostics) {
	t.Helper()
	var got []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		line := 0
		if d.Subject != nil {
			line = d.Subject.Start.Line
		}
		got = append(got, fmt.Sprintf("%d: %s", line, d.Summary))
		if d.Detail == "" {
			t.Errorf("%s: %q has no detail (the fix)", f.Name, d.Summary)
		}
	}
	sort.Strings(got)
	want := append([]string(nil), f.Want...)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: diagnostics differ\n got: %q\nwant: %q\nall: %v", f.Name, got, want, diags)
	}
}

// AddSeeds adds every file matching the globs to a fuzz target's corpus.
func AddSeeds(f *testing.F, globs ...string) {
	for _, g := range globs {
		names, _ := filepath.Glob(g)
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}
