package compiler_test

import (
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler/compiled"
)

// TestPodWhenMaps: each distinct pod predicate of a probe (== and !=
// of the same name share one) gets a hash map of cgroups with its
// predicate; the program looks the task's cgroup ancestors up in each
// (TenantLevels of them; node's at level 0 only), and the probe keeps
// the condition as written for the plan.
func TestPodWhenMaps(t *testing.T) {
	const src = `probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = (namespace == "shop" && pod != "web-0") || namespace != "shop" && node == "n1"
    count "n" { by = { pod = pod } }
  }
}`
	out := compileText(t, mustProfile(t, "linux-6.12-amd64"), src)
	p := out.Probes[0]
	var got []string
	for _, m := range p.Maps {
		if m.Match != nil {
			got = append(got, m.Ref+" "+m.Match.String())
		}
	}
	if want := `pods_0 namespace == "shop"|pods_1 pod == "web-0"|pods_2 node == "n1"`; strings.Join(got, "|") != want {
		t.Errorf("pod maps %q, want %q", strings.Join(got, "|"), want)
	}
	lookups := map[string]int{}
	for _, ins := range p.Programs[0].Instructions {
		if ins.IsLoadFromMap() && strings.HasPrefix(ins.Reference(), "pods_") {
			lookups[ins.Reference()]++
		}
	}
	// namespace is compared twice (== and !=): two walks of its map.
	if want := map[string]int{"pods_0": 2 * compiled.TenantLevels, "pods_1": compiled.TenantLevels, "pods_2": 1}; !equalCounts(lookups, want) {
		t.Errorf("lookups %v, want %v", lookups, want)
	}
	if len(p.PodWhen) != 1 || !strings.Contains(p.PodWhen[0], `namespace == "shop" && pod != "web-0"`) {
		t.Errorf("PodWhen %q", p.PodWhen)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
