package main

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOneApplyPath keeps one apply path, engine.Workspace: no package but
// internal/engine calls runtime.Workspace's Begin (the lock and repair) or
// Apply. The apply pipeline once existed twice (probectl apply, and the
// agents' own), locking differently: the node agent's destroy said its
// wait for the lock on stderr, the directory agent's in its log. It
// type-checks every package that imports runtime (its own files, not its
// tests').
func TestOneApplyPath(t *testing.T) {
	const mod = "github.com/probectl/probectl/"
	allowed := map[string]bool{mod + "runtime": true, mod + "internal/engine": true}
	out, err := exec.Command("go", "list", "-e", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Imports,Export,Module", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath, Dir, Export string
		GoFiles, Imports        []string
		Module                  *struct{ Path string }
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		p := new(pkg)
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p, ok := pkgs[path]
		if !ok || p.Export == "" {
			return nil, os.ErrNotExist
		}
		return os.Open(p.Export)
	})
	checked := 0
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path+"/" != mod || allowed[p.ImportPath] || !slices.Contains(p.Imports, mod+"runtime") {
			continue
		}
		var files []*ast.File
		for _, f := range p.GoFiles {
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, af)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: imp}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-checking %s: %v", p.ImportPath, err)
		}
		checked++
		t.Logf("checked %s", p.ImportPath)
		for sel, s := range info.Selections {
			fn, ok := s.Obj().(*types.Func)
			if !ok || fn.Pkg() == nil || fn.Pkg().Path() != mod+"runtime" || (fn.Name() != "Begin" && fn.Name() != "Apply") {
				continue
			}
			if recv := fn.Type().(*types.Signature).Recv(); recv != nil && strings.HasSuffix(recv.Type().String(), "runtime.Workspace") {
				t.Errorf("%s: calls runtime.Workspace.%s; the one apply path is internal/engine's Workspace (Begin, Apply, Destroy): call that",
					fset.Position(sel.Pos()), fn.Name())
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package importing runtime was checked: the test lost its way")
	}
}
