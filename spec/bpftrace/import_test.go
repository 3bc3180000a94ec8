package bpftrace

import (
	"os"
	"path/filepath"
	"testing"
)

func TestImportDump(t *testing.T) {
	name := os.Getenv("BT")
	if name == "" {
		t.Skip()
	}
	files, _ := filepath.Glob("testdata/tools/" + name + ".bt")
	for _, f := range files {
		src, _ := os.ReadFile(f)
		out, diags := Import(f, src)
		if diags.HasErrors() {
			t.Logf("%s", diags)
			continue
		}
		if os.Getenv("FULL") != "" {
			t.Logf("%s:\n%s", f, out)
		} else {
			t.Logf("%s: ok", f)
		}
	}
}
