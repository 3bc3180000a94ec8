package bpftrace

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseTools(t *testing.T) {
	files, _ := filepath.Glob("testdata/tools/*.bt")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(src); err != nil {
			t.Errorf("%s:%v", f, err)
		}
	}
}
