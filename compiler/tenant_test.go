package compiler_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/spec"
)

// TestTenantFilterInEveryProgram: under a tenant policy every program
// (entry and exit, or a uprobe.session, and a tracepoint's) begins with the tenant filter: the
// cgroup ancestor lookups in the probe's tenant map come before the first
// use of the stats map (the hit counter) and of anything else; the plan
// says the scope, human and JSON. Without the policy there is neither
// filter nor map, and the scope is the node.
func TestTenantFilterInEveryProgram(t *testing.T) {
	const src = "probe \"user\" \"u\" {\n  binary    = \"libc\"\n  functions = [\"malloc\"]\n  on_entry {\n    save = { t = ktime }\n  }\n  on_exit {\n    hist \"ns\" { value = ktime - entry.t }\n  }\n}\n" +
		"probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_enter_openat\"\n  on_entry {\n    count \"n\" { by = [comm] }\n  }\n}\n"
	for _, profile := range []string{"linux-6.12-amd64", "linux-7.2-amd64"} {
		facts := mustProfile(t, profile)
		cfg, diags := spec.Parse(map[string][]byte{"tenant.hcl": []byte(src)})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if d := cfg.Enforce(spec.TenantPolicy("shop")); d.HasErrors() {
			t.Fatal(d)
		}
		out, diags := compiler.Compile(cfg, facts)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if out.Scope.String() != "namespace shop (tasks of its pods on this node)" {
			t.Errorf("%s: scope %q", profile, out.Scope)
		}
		b, _ := json.Marshal(compiler.NewPlan(out))
		if !strings.Contains(string(b), `"scope":{"kind":"namespace","namespace":"shop"}`) {
			t.Errorf("%s: plan JSON lacks the scope: %.300s", profile, b)
		}
		programs := 0
		for _, p := range out.Probes {
			if !hasTenantMap(p) {
				t.Errorf("%s %s: no tenant map", profile, p.Address)
			}
			for _, prog := range p.Programs {
				programs++
				if err := filterFirst(prog.Instructions); err != nil {
					t.Errorf("%s %s %s program: %v", profile, p.Address, prog.Role, err)
				}
			}
		}
		if want := map[string]int{"linux-6.12-amd64": 3, "linux-7.2-amd64": 2}[profile]; programs != want {
			t.Errorf("%s: %d programs, want %d (entry and exit, or a session; the tracepoint's)", profile, programs, want)
		}
		node := compileText(t, facts, src)
		for _, p := range node.Probes {
			if hasTenantMap(p) || node.Scope.String() != "node" {
				t.Errorf("%s %s: a node-wide compile has a tenant map (scope %s)", profile, p.Address, node.Scope)
			}
		}
	}
}

func hasTenantMap(p *compiler.Probe) bool {
	for _, m := range p.Maps {
		if m.Ref == compiled.TenantMapRef {
			return true
		}
	}
	return false
}

// filterFirst checks that insns look up the tenant map TenantLevels
// times, after as many ancestor cgroup ids, before any other map.
func filterFirst(insns asm.Instructions) error {
	lookups, ancestors := 0, 0
	for _, ins := range insns {
		if ins.IsBuiltinCall() && asm.BuiltinFunc(ins.Constant) == asm.FnGetCurrentAncestorCgroupId {
			ancestors++
		}
		if !ins.IsLoadFromMap() {
			continue
		}
		if ins.Reference() != compiled.TenantMapRef {
			break
		}
		lookups++
	}
	if lookups != compiled.TenantLevels || ancestors < compiled.TenantLevels {
		return fmt.Errorf("%d tenant map lookups and %d ancestor ids before the first other map, want %d", lookups, ancestors, compiled.TenantLevels)
	}
	return nil
}
