package bpftrace

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/spec"
)

var update = flag.Bool("update", false, "rewrite testdata/tools.golden")

// TestImportTools imports every tool of bpftrace's tools/ (a snapshot in
// testdata/tools): each either becomes a spec that validates, or stops
// with a diagnostic at its line and column naming the construct. The
// table of which is testdata/tools.golden (-update rewrites it), so that
// a change shows.
func TestImportTools(t *testing.T) {
	files, err := filepath.Glob("testdata/tools/*.bt")
	if err != nil || len(files) != 39 {
		t.Fatalf("want bpftrace's 39 tools in testdata/tools, have %d (%v)", len(files), err)
	}
	var table strings.Builder
	imported := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".bt")
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, diags := Import(f, src)
		if diags.HasErrors() {
			if len(diags) != 1 || diags[0].Subject == nil || diags[0].Subject.Filename != f {
				t.Errorf("%s: want one diagnostic in the .bt file, got %v", name, diags)
				continue
			}
			d := diags[0]
			if !strings.HasPrefix(d.Summary, "Unsupported") && !strings.HasPrefix(d.Summary, "Unknown name") && !strings.HasPrefix(d.Summary, "No equivalent") && !strings.HasPrefix(d.Summary, "Read after delete") {
				t.Errorf("%s: the diagnostic does not name a construct without an equivalent: %s", name, d.Summary)
			}
			line := strings.Split(string(src), "\n")[d.Subject.Start.Line-1]
			if d.Subject.Start.Column > len(line) {
				t.Errorf("%s: column %d is past its line %q", name, d.Subject.Start.Column, line)
			}
			fmt.Fprintf(&table, "%-16s diagnostic %d:%d %s\n", name, d.Subject.Start.Line, d.Subject.Start.Column, d.Summary)
			continue
		}
		imported++
		if _, diags := spec.Parse(map[string][]byte{name + ".hcl": out}); diags.HasErrors() {
			t.Errorf("%s: the imported spec does not validate: %v\n%s", name, diags, out)
		}
		if !strings.Contains(string(out), "# Imported from "+name+".bt by probectl import.") {
			t.Errorf("%s: the spec does not say where it came from", name)
		}
		fmt.Fprintf(&table, "%-16s imported\n", name)
	}
	fmt.Fprintf(&table, "%d of %d imported\n", imported, len(files))
	golden := "testdata/tools.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(table.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != table.String() {
		t.Errorf("the tools' table changed (go test ./spec/bpftrace -run TestImportTools -update):\n%s", table.String())
	}
}
