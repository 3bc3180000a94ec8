package bpftrace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzImport holds that no input makes the import panic or run without
// bound, and that a diagnostic is in the file at a place it has.
func FuzzImport(f *testing.F) {
	files, _ := filepath.Glob("testdata/tools/*.bt")
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte("kprobe:f { $a = arg0; $b = $a + $a; $c = $b + $b; @x = hist($c); }"))
	f.Add([]byte("macro m(x) { x + x }\nkprobe:f { @x = hist(m(m(m(arg0)))); }"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, diags := Import("f.bt", src)
		lines := strings.Count(string(src), "\n") + 1
		for _, d := range diags {
			if d.Subject == nil || d.Subject.Filename != "f.bt" || d.Subject.Start.Line < 1 || d.Subject.Start.Line > lines {
				t.Fatalf("a diagnostic outside the file: %v", d)
			}
		}
	})
}

func TestImportBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("kprobe:f { $v0 = arg0;")
	for i := 1; i < 40; i++ {
		b.WriteString(" $v" + itoa(i) + " = $v" + itoa(i-1) + " + $v" + itoa(i-1) + ";")
	}
	b.WriteString(" @x = hist($v39); }")
	_, diags := Import("t.bt", []byte(b.String()))
	if len(diags) != 1 || diags[0].Summary != "Expression too large" {
		t.Errorf("doubling variables: %v", diags)
	}
	b.Reset()
	for i := 0; i < 30; i++ {
		b.WriteString("macro m" + itoa(i) + "() { m" + itoa(i+1) + "(); m" + itoa(i+1) + "(); }\n")
	}
	b.WriteString("macro m30() { time(); }\nkprobe:f { m0(); @n = count(); }")
	_, diags = Import("t.bt", []byte(b.String()))
	if len(diags) != 1 || diags[0].Summary != "Too many macro expansions" {
		t.Errorf("doubling macros: %v", diags)
	}
	// Loops nested 12 deep, 8 steps each: 8^12 steps unless bounded.
	b.Reset()
	b.WriteString("kprobe:f { $x = 0;")
	for i := 0; i < 12; i++ {
		b.WriteString(" for $i" + itoa(i) + " : 0..8 {")
	}
	b.WriteString(" $x = 1;" + strings.Repeat(" }", 12) + " @x = hist($x); }")
	_, diags = Import("t.bt", []byte(b.String()))
	if len(diags) != 1 || diags[0].Summary != "Too many loop steps" {
		t.Errorf("nested loops: %v", diags)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func BenchmarkImportTools(b *testing.B) {
	files, _ := filepath.Glob("testdata/tools/*.bt")
	var srcs [][]byte
	for _, f := range files {
		src, _ := os.ReadFile(f)
		srcs = append(srcs, src)
	}
	for i := 0; i < b.N; i++ {
		for _, s := range srcs {
			Import("t.bt", s)
		}
	}
}
