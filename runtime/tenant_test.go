package runtime_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	pcompiled "github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/internal/cgrouptest"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
)

// tenantSpec counts a tenant's calls of the workload's target() and its
// openat system calls: no comm filter, the tenant filter alone keeps them
// to the namespace's cgroups.
const tenantSpec = `probe "user" "calls" {
  binary    = "WORK"
  functions = ["target"]
  on_entry {
    count "n" {}
  }
}

probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "by_cgroup" { by = [cgroup] }
  }
}`

// TestTenantFilterCountsOnlyItsCgroups: a tenant spec set's programs
// count only the tasks under the cgroups in their tenant maps. Two
// "pods" (cgroups in kubelet's layout under the v2 hierarchy, each with a
// container cgroup) run the same workload at the same time; the map
// holds pod A's cgroup: A's container counts exactly n calls and n
// openats, B's nothing, and neither counts as a hit (the filter runs
// before the hit counter). Then the map is switched to B: B counts, A's
// counts stay. An empty map counts nothing.
func TestTenantFilterCountsOnlyItsCgroups(t *testing.T) {
	requireRoot(t)
	const n = 300
	prefix := cgrouptest.Prefix(t)
	podA := cgrouptest.Make(t, filepath.Join(prefix, "kubepods/burstable/poda"))
	ctrA := cgrouptest.Make(t, filepath.Join(prefix, "kubepods/burstable/poda/ctr"))
	podB := cgrouptest.Make(t, filepath.Join(prefix, "kubepods/burstable/podb"))
	cgrouptest.Make(t, filepath.Join(prefix, "kubepods/burstable/podb/ctr"))
	w := workspace(t)
	out := compileTenant(t, tenantSpec, "shop")
	s, err := w.State()
	if err != nil {
		t.Fatal(err)
	}
	plan := runtime.Diff(s, out, nil)
	if plan.Scope.String() != "namespace shop (tasks of its pods on this node)" {
		t.Errorf("plan scope %q", plan.Scope)
	}
	s, _, err = w.Apply(s, out, plan)
	if err != nil {
		t.Fatal(err)
	}
	runBoth(t, prefix, n)
	checkTenantCounts(t, w, s, 0, nil)

	if k, err := w.SetTenantCgroups(s, []uint64{podA}); err != nil || k != 2 {
		t.Fatalf("SetTenantCgroups: %d probes, %v; want 2", k, err)
	}
	runBoth(t, prefix, n)
	checkTenantCounts(t, w, s, n, map[string]int64{fmt.Sprint(ctrA): n})

	if _, err := w.SetTenantCgroups(s, []uint64{podB}); err != nil {
		t.Fatal(err)
	}
	runBoth(t, prefix, n)
	ctrB := cgrouptest.ID(t, filepath.Join(prefix, "kubepods/burstable/podb/ctr"))
	checkTenantCounts(t, w, s, 2*n, map[string]int64{fmt.Sprint(ctrA): n, fmt.Sprint(ctrB): n})
}

// compileTenant compiles src for the live kernel under namespace's
// tenant policy.
func compileTenant(t *testing.T, src, namespace string) *compiler.Output {
	t.Helper()
	src = strings.ReplaceAll(src, "WORK", workload(t))
	cfg, diags := spec.Parse(map[string][]byte{"tenant.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if diags := cfg.Enforce(spec.TenantPolicy(namespace)); diags.HasErrors() {
		t.Fatal(diags)
	}
	f := liveFacts(t)
	if err := f.LoadTracepoints([]string{"syscalls:sys_enter_openat"}); err != nil {
		t.Fatal(err)
	}
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, p := range out.Probes {
		if !slicesHasMap(p, pcompiled.TenantMapRef) {
			t.Fatalf("%s has no tenant map", p.Address)
		}
	}
	return out
}

func slicesHasMap(p *compiler.Probe, ref string) bool {
	for _, m := range p.Maps {
		if m.Ref == ref {
			return true
		}
	}
	return false
}

// runBoth runs the workload n times in each pod's container cgroup at
// once, and waits for both.
func runBoth(t *testing.T, prefix string, n int) {
	t.Helper()
	cmds := map[string]*exec.Cmd{}
	for _, pod := range []string{"poda", "podb"} {
		cmds[filepath.Join(prefix, "kubepods/burstable", pod, "ctr")] = exec.Command(workload(t), fmt.Sprint(n))
	}
	cgrouptest.RunAll(t, cmds)
}

// checkTenantCounts wants calls counted calls (and hits) and the openats
// by cgroup opens.
func checkTenantCounts(t *testing.T, w *runtime.Workspace, s *runtime.State, calls int64, opens map[string]int64) {
	t.Helper()
	if got := values(aggregation(t, w, s, "user.calls", "n")); got[""] != calls && !(calls == 0 && len(got) == 0) {
		t.Errorf("calls = %v, want %d", got, calls)
	}
	got := values(aggregation(t, w, s, "tracepoint.opens", "by_cgroup"))
	if fmt.Sprint(got) != fmt.Sprint(opens) && !(len(opens) == 0 && len(got) == 0) {
		t.Errorf("openats by cgroup = %v, want %v", got, opens)
	}
	for _, st := range w.Status(s) {
		if st.Address == (bpf.Address{Kind: bpf.KindUser, Name: "calls"}) && int64(st.EntryHits) != calls {
			t.Errorf("user.calls hits = %d, want %d (only the tenant's calls)", st.EntryHits, calls)
		}
	}
}
