package spec_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/spec"
)

// onlyError checks that diags is one error with that summary at line:col.
func onlyError(t *testing.T, diags hcl.Diagnostics, summary string, line, col int) {
	t.Helper()
	if len(diags) != 1 || diags[0].Summary != summary || diags[0].Subject == nil ||
		diags[0].Subject.Start.Line != line || diags[0].Subject.Start.Column != col || diags[0].Detail == "" {
		t.Fatalf("want one %q at %d:%d, got %v", summary, line, col, diags)
	}
}

// The replays of issue 7: each crashed the HCL parser with a Go stack
// overflow. They are refused on the tokens, at the first token too deep.
func TestNestingLimits(t *testing.T) {
	n := 100000
	for name, tt := range map[string]struct {
		expr string
		col  int // of the first token past the limit
	}{
		// The value starts at column 15, inside three blocks.
		"parentheses":  {strings.Repeat("(", n) + "1" + strings.Repeat(")", n), 15 + spec.MaxNesting - 3},
		"not":          {strings.Repeat("!", n) + "true ? 1 : 0", 15 + spec.MaxNesting - 3},
		"negation":     {strings.Repeat("-", n) + "1", 15 + spec.MaxNesting - 3},
		"conditionals": {strings.Repeat("pid == 1 ? 1 : ", 2*spec.MaxNesting) + "0", 15 + (spec.MaxNesting-3)*15 + 9},
		"templates":    {strings.Repeat(`"${`, n) + "1" + strings.Repeat(`}"`, n), 15 + (spec.MaxNesting-3)/2*3 + 1},
		"brackets":     {"band(" + strings.Repeat("[", n) + strings.Repeat("]", n) + ", 1)", 20 + spec.MaxNesting - 4},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, diags := spec.Parse(map[string][]byte{"deep.hcl": []byte(tracepointValue(tt.expr))})
			onlyError(t, diags, "Too deeply nested", 5, tt.col)
			t.Logf("refused in %v", time.Since(start))
		})
	}
	// At the limit, nesting parses: three blocks, then 997 parentheses.
	depth := spec.MaxNesting - 3
	src := tracepointValue(strings.Repeat("(", depth) + "1" + strings.Repeat(")", depth))
	if _, diags := spec.Parse(map[string][]byte{"ok.hcl": []byte(src)}); diags.HasErrors() {
		t.Fatalf("%d levels refused: %v", spec.MaxNesting, diags)
	}
}

// Operators chain without nesting in the parser, but every later pass
// recurses through them: 100000 are fine, one more is refused.
func TestExpressionLength(t *testing.T) {
	terms := spec.MaxOperators + 1 // 100000 operators
	start := time.Now()
	cfg, diags := spec.Parse(map[string][]byte{"long.hcl": []byte(tracepointValue(chain(terms)))})
	if diags.HasErrors() {
		t.Fatalf("%d operators refused: %v", terms-1, diags)
	}
	t.Logf("%d terms: checked in %v", terms, time.Since(start))
	if got := len(cfg.Probes[0].Entry.Actions[0].Value.Text()); got != len(chain(terms)) {
		t.Errorf("value text has %d bytes, want %d", got, len(chain(terms)))
	}
	_, diags = spec.Parse(map[string][]byte{"long.hcl": []byte(tracepointValue(chain(terms + 1)))})
	onlyError(t, diags, "Expression too long", 5, 15+6*spec.MaxOperators+4)
	// The count restarts with every expression, and at every comma.
	half := chain(spec.MaxOperators/2 + 2)
	two := tracepointValue(half) + strings.Replace(tracepointValue("band("+half+", "+half+")"), `"t"`, `"u"`, 1)
	if _, diags := spec.Parse(map[string][]byte{"two.hcl": []byte(two)}); diags.HasErrors() {
		t.Fatalf("expressions within the limit refused: %v", diags)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.hcl")
	if err := os.WriteFile(good, []byte(tracepointValue("1")), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.hcl")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if _, d := spec.ReadFile(link); d != nil {
		t.Errorf("a symlink to a spec: %v", d)
	}
	big := filepath.Join(dir, "big.hcl")
	if err := os.WriteFile(big, make([]byte, spec.MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.hcl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, summary, detail string }{
		{"/dev/zero", "Cannot read spec file", "a character device"},
		{fifo, "Cannot read spec file", "a named pipe (FIFO)"},
		{dir, "Cannot read spec file", "a directory"},
		{big, "File too large", "more than 1048576 bytes"},
		{filepath.Join(dir, "missing.hcl"), "Cannot read spec file", "no such file"},
	} {
		done := make(chan *hcl.Diagnostic)
		go func() {
			_, d := spec.ReadFile(tt.path)
			done <- d
		}()
		select {
		case d := <-done:
			if d == nil || d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) ||
				d.Subject == nil || d.Subject.Filename != tt.path || d.Subject.Start.Line != 1 {
				t.Errorf("%s: %v", tt.path, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadFile blocks", tt.path)
		}
	}
	// Parse refuses what ReadFile would not read, whoever read it.
	_, diags := spec.Parse(map[string][]byte{"big.hcl": make([]byte, spec.MaxFileSize+1)})
	onlyError(t, diags, "File too large", 1, 1)
}
