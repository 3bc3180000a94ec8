package compiler

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// TestFamilyConformance holds every link family of the table to what the
// rest of probectl reads from it: a fact a target can lack (shown by every
// display, bpf.LinkFacts), a program consistent with its role, and, for a
// kernel-function family, figures in the route-cost table (routecost.json)
// so that prefer and the plan's estimates can price it. runtime's
// TestAttachersCoverFamilies holds each to an attacher.
func TestFamilyConformance(t *testing.T) {
	costed := map[Family]bool{}
	for _, k := range routeCosts().Kernels {
		for fam := range k.Families {
			costed[fam] = true
		}
	}
	all := &bpf.Facts{Perf: bpf.Perf{Link: true}}
	links := reflect.ValueOf(&all.Links).Elem()
	for i := range links.NumField() {
		links.Field(i).SetBool(true)
	}
	seen := map[Family]bool{}
	for _, fi := range Families() {
		fam := fi.Family
		if fam == "" || seen[fam] {
			t.Errorf("family %q: empty or listed twice", fam)
		}
		seen[fam] = true
		if got, ok := fam.Info(); !ok || got.Family != fam {
			t.Errorf("%s: Info finds %v, %v", fam, got.Family, ok)
		}
		switch {
		case fi.Fact == "" && fi.Kind != bpf.KindProfile:
			t.Errorf("%s: no fact in bpf.LinkFacts enables it, so no display shows whether a target has it", fam)
		case fi.Fact != "":
			if _, ok := bpf.LinkFactNamed(fi.Fact); !ok {
				t.Errorf("%s: fact %q is not in bpf.LinkFacts", fam, fi.Fact)
			}
		}
		if fi.Available(&bpf.Facts{}) || !fi.Available(all) {
			t.Errorf("%s: available without any link (%v) or not with all (%v)", fam, fi.Available(&bpf.Facts{}), fi.Available(all))
		}
		if fi.Kind == bpf.KindKernel && !costed[fam] {
			t.Errorf("%s: a kernel-function family without figures in routecost.json (make routes-table)", fam)
		}
		if fi.PerFunction != (fi.Type == ebpf.Tracing) || (fi.Context == ctxTracing) != (fi.Type == ebpf.Tracing) {
			t.Errorf("%s: per-function %v and context %v do not fit program type %v", fam, fi.PerFunction, fi.Context, fi.Type)
		}
		if fi.Limit > 0 && !fi.Multi {
			t.Errorf("%s: a link limit on a family of one link per function", fam)
		}
		if want := map[bpf.Kind][]Role{
			bpf.KindKernel: {RoleEntry, RoleExit, RoleSession}, bpf.KindUser: {RoleEntry, RoleExit, RoleSession},
			bpf.KindTracepoint: {RoleEvent}, bpf.KindProfile: {RoleSample},
		}[fi.Kind]; !hasRole(want, fi.Role) {
			t.Errorf("%s: role %s for a %s probe, want one of %v", fam, fi.Role, fi.Kind, want)
		}
	}
	if _, ok := Family("kprobe.nope").Info(); ok {
		t.Error("an unknown family has an entry")
	}
}

func hasRole(roles []Role, r Role) bool {
	for _, x := range roles {
		if x == r {
			return true
		}
	}
	return false
}

// TestAttachValuesFollowFamilies holds spec's list of the families
// attach = "..." may name (a list spec keeps, since it cannot import the
// compiler) to the table: for each probe kind, "auto" and every family of
// that kind that runs at entry, as a session or on an event, each one the
// route choice can take on a target that has everything.
func TestAttachValuesFollowFamilies(t *testing.T) {
	all := mustAll(t)
	exit := "\n  on_exit {\n    count \"x\" {}\n  }"
	probes := map[bpf.Kind]struct{ where, exit string }{
		bpf.KindKernel:     {"functions = [\"vfs_read\"]", exit},
		bpf.KindUser:       {"binary = \"/nonexistent/app\"\n  functions = [\"main\"]", exit},
		bpf.KindTracepoint: {"event = \"sched:sched_switch\"", ""},
	}
	for kind, pr := range probes {
		want := []string{`"auto"`}
		for _, fi := range Families() {
			if fi.Kind == kind && (fi.Role == RoleEntry || fi.Role == RoleSession || fi.Role == RoleEvent) {
				want = append(want, fmt.Sprintf("%q", fi.Family))
			}
		}
		src := fmt.Sprintf("probe %q \"p\" {\n  %s\n  attach = \"nope\"\n  on_entry {\n    count \"c\" {}\n  }%s\n}\n", kind, pr.where, pr.exit)
		_, diags := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
		_, list, ok := strings.Cut(diags.Error(), "Use one of: ")
		if !ok {
			t.Fatalf("%s: attach = \"nope\" gives %v", kind, diags)
		}
		got := strings.Split(strings.TrimSuffix(list, "."), ", ")
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s probes: spec accepts attach = %v, the family table gives %v", kind, got, want)
		}
		for _, fam := range want {
			if fam = strings.Trim(fam, `"`); fam == "auto" {
				continue
			}
			p := parseProbe(t, strings.Replace(src, "nope", fam, 1))
			var events []string
			for _, ev := range p.Events {
				events = append(events, ev.Text)
			}
			d, diag := chooseRoute(p, all, matchKernelFunctions(p, all), events)
			if diag != nil || !slices.Contains(d.families, Family(fam)) {
				t.Errorf("attach = %q on a target with every link: %v, %v", fam, d.families, diag)
			}
		}
	}
}

// mustAll is the 7.2 profile with every link and perf links.
func mustAll(t *testing.T) *bpf.Facts {
	f, err := bpf.Profile("linux-7.2-amd64")
	if err != nil {
		t.Fatal(err)
	}
	links := reflect.ValueOf(&f.Links).Elem()
	for i := range links.NumField() {
		links.Field(i).SetBool(true)
	}
	f.Perf.Link = true
	return f
}

func parseProbe(t *testing.T, src string) *spec.Probe {
	t.Helper()
	cfg, diags := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
	if diags.HasErrors() || len(cfg.Probes) != 1 {
		t.Fatalf("%s: %v", src, diags)
	}
	return cfg.Probes[0]
}
