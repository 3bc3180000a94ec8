package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/views"
)

// TestLinkDisplays replays the hand-kept lists that omitted uprobe.session:
// the plan's header and probectl target must name every link family a
// target has, for every field of bpf.Links alone and for every profile.
func TestLinkDisplays(t *testing.T) {
	header := func(f *bpf.Facts) string {
		var b bytes.Buffer
		views.PlanHuman{W: &b}.Plan(&compiler.Plan{Target: compiler.PlanTarget{Facts: f}})
		line, _, _ := strings.Cut(b.String(), "\n\n")
		_, links, _ := strings.Cut(line, "; links: ")
		links, _, _ = strings.Cut(links, "\n") // the scope line follows
		return links
	}
	target := func(f *bpf.Facts) (links, missing string) {
		var b bytes.Buffer
		views.FactsHuman{W: &b}.Facts(f)
		for _, line := range strings.Split(b.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "Links:    "); ok {
				links = v
			}
			if v, ok := strings.CutPrefix(line, "Missing:  "); ok {
				missing = v
			}
		}
		return links, missing
	}
	check := func(what string, f *bpf.Facts, want []string) {
		t.Helper()
		if got := header(f); got != strings.Join(want, ", ") {
			t.Errorf("%s: plan header links %q, want %q", what, got, strings.Join(want, ", "))
		}
		links, missing := target(f)
		if links != strings.Join(want, ", ") {
			t.Errorf("%s: probectl target Links %q, want %q", what, links, strings.Join(want, ", "))
		}
		if n := len(want) + len(strings.Split(missing, ", ")); missing != "" && n != len(bpf.LinkFacts) {
			t.Errorf("%s: probectl target shows %d link families (Links %q, Missing %q), want %d", what, n, links, missing, len(bpf.LinkFacts))
		}
	}
	typ := reflect.TypeOf(bpf.Links{})
	for i := range typ.NumField() {
		f := &bpf.Facts{}
		reflect.ValueOf(&f.Links).Elem().Field(i).SetBool(true)
		have, _ := f.Links.Split()
		if len(have) != 1 {
			t.Fatalf("Links.%s shows as %q", typ.Field(i).Name, have)
		}
		check("Links."+typ.Field(i).Name, f, have)
	}
	for _, name := range bpf.ProfileNames() {
		f, err := bpf.Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, lf := range bpf.LinkFacts {
			if lf.Has(f.Links) {
				want = append(want, lf.Name)
			}
		}
		check(name, f, want)
	}
	f, _ := bpf.Profile("linux-7.2-amd64")
	if !strings.Contains(header(f), "uprobe.session") {
		t.Errorf("linux-7.2-amd64's plan header omits uprobe.session: %q", header(f))
	}
}
