package compiler

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// TestEveryTracefsFieldHandled reads every format in the host's tracefs and
// asks the compiler how it types each field: an integer, a string, bytes,
// or refused (with a diagnostic at the field). It logs the counts per
// class and per handling (issue 8 asks for the audit in the closing note).
func TestEveryTracefsFieldHandled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("tracefs formats are readable by root only")
	}
	dir, err := bpf.Tracefs()
	if err != nil {
		t.Skipf("no tracefs on this machine: %v", err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "events", "*", "*", "format"))
	if len(names) == 0 {
		t.Fatalf("no formats under %s/events", dir)
	}
	facts, _ := bpf.Profile("linux-7.2-amd64")
	handled := map[string]int{}
	byType := map[string]string{}
	refused := map[string]int{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(filepath.Join(dir, "events"), filepath.Dir(name))
		tp, err := bpf.ParseTracepointFormat(strings.Replace(rel, "/", ":", 1), string(b))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tp.Fields {
			g := &gen{p: &spec.Probe{Addr: bpf.Address{Kind: bpf.KindTracepoint, Name: "t"}}, facts: facts, out: &Probe{}, tps: []*bpf.TracepointFormat{tp}}
			typ := g.fieldType(&spec.ArgsField{Name: f.Name})
			how := ""
			switch typ.Kind {
			case spec.KindInt:
				how = "integer"
			case spec.KindString:
				how = "string"
			case spec.KindBytes:
				how = "bytes"
			default:
				how = "refused"
				refused[f.Type]++
				if len(g.diags) != 1 || g.diags[0].Summary != "Field cannot be read" {
					t.Errorf("%s: args.%s (%s) is refused without the diagnostic: %v", tp.Event, f.Name, f.Type, g.diags)
				}
			}
			handled[string(f.Class)+" → "+how]++
			byType[f.Type] = how
		}
	}
	keys := make([]string, 0, len(handled))
	for k := range handled {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-24s %6d fields", k, handled[k])
	}
	for typ, n := range refused {
		t.Logf("refused: %-28s %4d fields", typ, n)
	}
}
