package spec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// exactChecksPass is what ParseFile checks on HCL's tokens.
func exactChecksPass(src []byte) bool {
	tokens, _ := hclsyntax.LexConfig(src, "q.hcl", hcl.InitialPos)
	return checkDepth(tokens) == nil && checkNumbers(tokens) == nil && !checkSyntax(tokens).HasErrors()
}

// quickScanCases: every spec in the repository, hostile inputs around the
// limits, and random splices of their pieces (seed logged).
func quickScanCases(t *testing.T) [][]byte {
	var cases [][]byte
	for _, glob := range []string{"../examples/*.hcl", "../examples/bpftrace/*.hcl", "testdata/invalid/*.hcl", "testdata/seeds/*.hcl"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cases = append(cases, b)
		}
	}
	if len(cases) < 20 {
		t.Fatalf("only %d spec files found", len(cases))
	}
	wrap := func(expr string) []byte {
		return []byte("probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_enter_read\"\n  on_entry {\n    sum \"s\" {\n      value = " + expr + "\n    }\n  }\n}\n")
	}
	for _, n := range []int{MaxNesting / 2, MaxNesting/2 - 8, MaxNesting, MaxNesting + 1} {
		cases = append(cases,
			wrap(strings.Repeat("(", n)+"1"+strings.Repeat(")", n)),
			wrap(strings.Repeat("!", n)+"true ? 1 : 0"),
			wrap(strings.Repeat("- ", n)+"1"),
			wrap(strings.Repeat("pid == 1 ? 1 : ", n)+"0"),
			wrap(strings.Repeat(`"${`, n/2)+"1"+strings.Repeat(`}"`, n/2)),
			wrap(strings.Repeat("[", n)+strings.Repeat("]", n)),
		)
	}
	for _, s := range []string{"0xff", "0o17", "0b1", "x->y", "@x", "$x", "<<EOF\nx\nEOF\n", `"%{if true}x%{endif}"`, `"$${x}"`, `"a\"b"`, `"\u00e9"`, "/* open", `"open`} {
		cases = append(cases, wrap(s))
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	var pieces []string
	for _, c := range cases {
		pieces = append(pieces, strings.FieldsFunc(string(c), func(r rune) bool { return r == ' ' })...)
	}
	pieces = append(pieces, "(", ")", "[", "]", "{", "}", `"`, "${", "}", "?", ":", "!", "-", "0x1", "->", "#", "//", "/*", "*/", "\n", "\\", "é", "<<", "%{", "$$")
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for j := r.IntN(60); j > 0; j-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
			if r.IntN(3) > 0 {
				b.WriteByte(' ')
			}
		}
		cases = append(cases, []byte(b.String()))
	}
	return cases
}

// TestPlainWithinLimitsIsSafe: whenever the one-pass scan lets ParseFile
// skip the exact checks, the exact checks pass.
func TestPlainWithinLimitsIsSafe(t *testing.T) {
	plain := 0
	for _, src := range quickScanCases(t) {
		if ok, _ := plainWithinLimits(src); !ok {
			continue
		}
		plain++
		if !exactChecksPass(src) {
			t.Errorf("the scan lets through what the exact checks refuse:\n%s", src)
		}
	}
	t.Logf("%d inputs took the quick path", plain)
	// The examples are what it is for.
	for _, f := range []string{"../examples/quickstart.hcl", "../examples/kernel.hcl", "../examples/syscalls.hcl"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := plainWithinLimits(b); !ok {
			t.Errorf("%s does not take the quick path", f)
		}
	}
}

// FuzzPlainWithinLimits: the same property on the fuzzer's inputs.
func FuzzPlainWithinLimits(f *testing.F) {
	for _, glob := range []string{"../examples/*.hcl", "testdata/invalid/*.hcl"} {
		files, _ := filepath.Glob(glob)
		for _, name := range files {
			if b, err := os.ReadFile(name); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if ok, _ := plainWithinLimits(src); ok && !exactChecksPass(src) {
			t.Errorf("the scan lets through what the exact checks refuse:\n%q", src)
		}
	})
}

// TestParseApartIsTheWholeParse: a large file parsed in runs yields the
// very blocks (ranges included) that parsing it whole yields, on every
// example file repeated past the size where runs start, with tabs,
// comments and non-ASCII text in strings and comments shifting columns.
func TestParseApartIsTheWholeParse(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.hcl")
	more, _ := filepath.Glob("../examples/bpftrace/*.hcl")
	files = append(files, more...)
	tried := 0
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var big []byte
		for i := 0; len(big) < 3*parseApartMin; i++ {
			// Each copy renamed, so that the spec stays valid.
			big = append(big, bytes.ReplaceAll(b, []byte(`probe "`), []byte(fmt.Sprintf("# copy %d: été\n\tprobe \"", i)))...)
		}
		ok, cuts := plainWithinLimits(big)
		if !ok {
			continue
		}
		apart := parseApart(name, big, cuts)
		if apart == nil {
			t.Errorf("%s: not parsed apart", name)
			continue
		}
		tried++
		whole, diags := hclsyntax.ParseConfig(big, name, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		wb, ab := whole.Body.(*hclsyntax.Body), apart.Body.(*hclsyntax.Body)
		if !reflect.DeepEqual(wb.Blocks, ab.Blocks) {
			t.Errorf("%s: the blocks differ", name)
		}
		if wb.SrcRange != ab.SrcRange || wb.EndRange != ab.EndRange {
			t.Errorf("%s: body ranges %v %v, whole %v %v", name, ab.SrcRange, ab.EndRange, wb.SrcRange, wb.EndRange)
		}
	}
	t.Logf("%d files parsed apart", tried)
	if tried < 5 {
		t.Errorf("only %d files were parsed apart", tried)
	}
}
