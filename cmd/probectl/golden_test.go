package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/rogpeppe/go-internal/diff"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenPlans renders the plan of the examples for every profile, as
// users read it, and compares it with testdata/golden (go test -update).
func TestGoldenPlans(t *testing.T) {
	cfg, diags := spec.LoadPaths([]string{"../../examples"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, name := range bpf.ProfileNames() {
		t.Run(name, func(t *testing.T) {
			facts, err := bpf.Profile(name)
			if err != nil {
				t.Fatal(err)
			}
			out, diags := compiler.Compile(cfg, facts)
			if diags.HasErrors() && !facts.Kernel.AtLeast(5, 15) {
				// Below 5.15 (no attach cookies, no BPF perf links) the
				// plan refuses most examples: what it says is the golden.
				var buf bytes.Buffer
				for _, d := range diags {
					fmt.Fprintf(&buf, "%s: %s: %s\n", d.Subject, d.Summary, d.Detail)
				}
				golden(t, filepath.Join("testdata/golden", name+".refused"), buf.Bytes())
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			var buf bytes.Buffer
			views.PlanHuman{W: &buf}.Plan(compiler.NewPlan(out))
			golden(t, filepath.Join("testdata/golden", name+".plan"), buf.Bytes())
		})
	}
}

// golden compares got with the golden file at path (go test -update
// writes it).
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the output (run go test ./cmd/probectl -update and review the diff):\n%s",
			path, diff.Diff(path, want, "output", got))
	}
}

// TestGoldenDiff renders the plan from the state of
// testdata/golden/diff/before.hcl to after.hcl: attribute diffs of a
// when, an action's value, max_keys and by, an action added and one
// removed, an event changed; "handlers changed" for a probe whose state
// recorded no source (written before it was); one unchanged.
func TestGoldenDiff(t *testing.T) {
	compile := func(file string) *compiler.Output {
		cfg, diags := spec.LoadPaths([]string{filepath.Join("testdata/golden/diff", file)})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		facts, err := bpf.Profile("linux-7.2-amd64")
		if err != nil {
			t.Fatal(err)
		}
		out, diags := compiler.Compile(cfg, facts)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return out
	}
	state := &runtime.State{}
	for _, p := range compile("before.hcl").Probes {
		ps := &runtime.ProbeState{Description: p.Description}
		if p.Address.Name == "old_state" {
			ps.Source = nil
		}
		state.Probes = append(state.Probes, ps)
	}
	plan := runtime.Diff(state, compile("after.hcl"), nil)
	var buf bytes.Buffer
	views.PlanHuman{W: &buf}.Plan(plan)
	golden(t, "testdata/golden/diff.plan", buf.Bytes())

	// On a terminal: -/+ magenta, ~ yellow, + green, - red.
	var colored bytes.Buffer
	views.PlanHuman{W: termtext.ColorWriter{Writer: &colored}}.Plan(plan)
	for _, want := range []string{"\x1b[35m-/+\x1b[0m probe \"tracepoint\" \"opens\"", "\x1b[33m~\x1b[0m on_entry.when: ",
		"\x1b[32m+\x1b[0m on_entry.count \"calls\"", "\x1b[31m-\x1b[0m on_entry.sum \"fds\""} {
		if !strings.Contains(colored.String(), want) {
			t.Errorf("the coloured plan has no %q", want)
		}
	}

	buf.Reset()
	if err := views.NewPlan(true, &buf).Plan(plan); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Changes []struct {
			Address string                     `json:"address"`
			Changes []compiled.AttributeChange `json:"changes"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := compiled.AttributeChange{Attribute: "on_entry.when", Before: "pid != 1", After: "pid > 1"}
	for _, c := range got.Changes {
		if c.Address == "tracepoint.opens" && (len(c.Changes) != 1 || c.Changes[0] != want) {
			t.Errorf("plan -json: %s changes %+v, want [%+v]", c.Address, c.Changes, want)
		}
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"before": "pid != 1"`)) || bytes.Contains(buf.Bytes(), []byte(`\u003e`)) {
		t.Errorf("plan -json does not show the when as written:\n%s", buf.Bytes())
	}
}
