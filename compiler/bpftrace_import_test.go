package compiler_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/bpftrace"
)

// TestImportedToolsPlanForProfile plans every bpftrace tool that
// probectl import imports (spec/bpftrace's TestImportTools says which)
// against every built-in profile. The outcome per tool and profile is
// testdata/imported-tools.golden (-update rewrites it): "ok", or the
// errors' summaries, which must be what the profile's kernel lacks (an
// event; for user probes, a library or function this machine lacks),
// never an error in the spec itself.
func TestImportedToolsPlanForProfile(t *testing.T) {
	files, err := filepath.Glob("../spec/bpftrace/testdata/tools/*.bt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no tools: %v", err)
	}
	var table strings.Builder
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".bt")
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out, diags := bpftrace.Import(file, src)
		if diags.HasErrors() {
			continue
		}
		cfg, diags := spec.Parse(map[string][]byte{name + ".hcl": out})
		if diags.HasErrors() {
			t.Errorf("%s: %v", name, diags)
			continue
		}
		user := false
		for _, p := range cfg.Probes {
			if p.Addr.Kind == bpf.KindUser {
				user = true
			}
		}
		for _, profile := range bpf.ProfileNames() {
			result := "ok"
			if _, diags := compiler.Compile(cfg, mustProfile(t, profile)); diags.HasErrors() {
				seen := map[string]bool{}
				for _, d := range diags {
					seen[d.Summary] = true
					if !lacking[d.Summary] {
						t.Errorf("%s on %s: %s: %s", name, profile, d.Summary, d.Detail)
					}
				}
				var s []string
				for k := range seen {
					s = append(s, k)
				}
				sort.Strings(s)
				result = strings.Join(s, "; ")
			}
			if user {
				// What a user probe finds is this machine's libraries.
				result = "(user probes: this machine's binaries)"
			}
			fmt.Fprintf(&table, "%-16s %-18s %s\n", name, profile, result)
		}
	}
	golden := "testdata/imported-tools.golden"
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
		t.Errorf("the table changed (-update rewrites it):\n%s", table.String())
	}
}

// lacking are the errors a plan gives for what a profile's kernel lacks.
var lacking = map[string]bool{"Tracepoint not found": true, "Library not found": true, "Function not found": true, "Binary not found": true,
	"No attach cookies": true, "Cannot sample": true, // 5.10: no bpf_get_attach_cookie (5.15), no BPF perf links (5.15)
	"Unknown tracepoint field": true} // 5.10's kfree_skb has no reason (5.17): tcpdrop's field is newer than the kernel

// TestImportedUSDTCompiles: a bpftrace usdt: program, imported, compiles
// against the workload's notes, its arguments read as the notes say.
func TestImportedUSDTCompiles(t *testing.T) {
	bin := buildUSDTProbes(t)
	src := "usdt:" + bin + ":t:pair { @a[arg0] = sum(arg1); }\nU:" + bin + ":t:glob { @g = count(); }\n"
	out, diags := bpftrace.Import("bt-lu.bt", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !strings.Contains(string(out), `usdt   = "t:pair"`) || !strings.Contains(string(out), `usdt   = "t:glob"`) {
		t.Fatalf("not two USDT probes:\n%s", out)
	}
	cfg, diags := spec.Parse(map[string][]byte{"bt-lu.hcl": out})
	if diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, out)
	}
	if _, diags := compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64")); diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, out)
	}
}
