package compiler

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// kernelMatch is a kernel probe's patterns matched against the target's
// function list, before the route is chosen (the route may depend on how
// many functions there are).
type kernelMatch struct {
	names, missing []string
	from           map[string]hcl.Range
	diags          hcl.Diagnostics
	// resolved: the target has a function list; without one (a profile)
	// names is nil and named counts the exact names among the patterns.
	resolved bool
	named    int
	globs    bool
}

func matchKernelFunctions(p *spec.Probe, f *bpf.Facts) kernelMatch {
	var m kernelMatch
	for _, pat := range p.Functions {
		if isGlob(pat.Text) {
			m.globs = true
		} else {
			m.named++
		}
	}
	if len(f.Functions) == 0 {
		return m
	}
	m.resolved = true
	m.names, m.from, m.missing, m.diags = matchPatterns(p, f.Functions, "the target kernel ("+f.Label()+")")
	return m
}

// count is the number of functions the route is for, and whether globs
// were left unresolved.
func (m kernelMatch) count() (int, bool) {
	if m.resolved {
		return len(m.names), false
	}
	return m.named, m.globs
}

// copies counts the resolved functions that are compiler copies
// (name.isra.0), which have no BTF and so no trampoline.
func (m kernelMatch) copies() int {
	n := 0
	for _, name := range m.names {
		if strings.Contains(name, ".") {
			n++
		}
	}
	return n
}

// resolveKernelFunctions finishes the match for route d: with no list (a
// profile), the patterns stay unresolved: nil, no error.
func resolveKernelFunctions(p *spec.Probe, f *bpf.Facts, m kernelMatch, d decision) ([]string, []string, hcl.Diagnostics) {
	if !m.resolved {
		return nil, nil, nil
	}
	diags := m.diags
	if d.route == RouteTrampoline {
		diags = append(diags, withoutBTF(p, f, m.names, m.from)...)
	}
	return m.names, m.missing, diags
}

// withoutBTF refuses, on the trampoline route, the functions fentry and
// fexit cannot attach: they attach through the function's BTF, and
// compiler copies (vfs_statfs.part.0.isra.0, lookup_fast.constprop.0,
// .cold parts) never have any. The error is at the pattern that chose them.
func withoutBTF(p *spec.Probe, f *bpf.Facts, names []string, from map[string]hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, pat := range p.Functions {
		var copies []string
		for _, name := range names {
			if strings.Contains(name, ".") && from[name] == pat.Range {
				copies = append(copies, name)
			}
		}
		if len(copies) == 0 {
			continue
		}
		list := strings.Join(copies, ", ")
		if len(copies) > 3 {
			list = fmt.Sprintf("%s and %d more", strings.Join(copies[:3], ", "), len(copies)-3)
		}
		alt := "exclude them (exclude = [\"*.*\"])"
		if f.Links.Kprobe {
			alt += ", or attach = \"kprobe\", which the target has"
		}
		diags = append(diags, diagf(pat.Range, "Function has no BTF",
			"On the target (%s) kernel functions are attached with fentry/fexit, through each function's BTF, and compiler copies have none: %q matches %s. To probe the others, %s.",
			f.Label(), pat.Text, list, alt))
	}
	return diags
}

// matchPatterns matches p's patterns against available, a sorted list,
// and says which pattern chose each name (the first that matched it).
// Each pattern must match something; an exact name that is missing gets the
// nearest names as a hint. An optional("...") pattern may match nothing:
// missing says so, for the plan.
func matchPatterns(p *spec.Probe, available []string, where string) ([]string, map[string]hcl.Range, []string, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var missing []string
	chosen := make(map[string]hcl.Range, chosenSize(p, available))
	for _, pat := range p.Functions {
		m, d := matchPattern(pat, available, where, chosen)
		if m != "" {
			missing = append(missing, m)
		}
		if d != nil {
			diags = append(diags, d)
		}
	}
	excludeFunctions(chosen, p.Exclude)
	if len(chosen) == 0 && !diags.HasErrors() && len(missing) < len(p.Functions) {
		diags = append(diags, diagf(p.DeclRange, "Every function excluded", "exclude removes every function that functions matched. Narrow exclude."))
	}
	out := make([]string, 0, len(chosen))
	for name := range chosen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, chosen, missing, diags
}

// chosenSize is the room to make for the names p's patterns choose: all
// of available when a glob may choose them all (no rehashing).
func chosenSize(p *spec.Probe, available []string) int {
	for _, pat := range p.Functions {
		if isGlob(pat.Text) {
			return len(available)
		}
	}
	return len(p.Functions)
}

// matchPattern adds the names of available that pat matches to chosen
// (unless an earlier pattern chose them), and returns what the plan says
// of an optional pattern that matches nothing, or the diagnostic of a
// pattern that must match and does not.
func matchPattern(pat spec.Pattern, available []string, where string, chosen map[string]hcl.Range) (string, *hcl.Diagnostic) {
	choose := func(name string) {
		if _, ok := chosen[name]; !ok {
			chosen[name] = pat.Range
		}
	}
	if !isGlob(pat.Text) {
		i := sort.SearchStrings(available, pat.Text)
		switch {
		case i < len(available) && available[i] == pat.Text:
			choose(pat.Text)
			return "", nil
		case pat.Optional:
			return fmt.Sprintf("optional(%q): not a probe-able function in %s", pat.Text, where), nil
		}
		return "", diagf(pat.Range, "Function not found",
			"%q is not a probe-able function in %s.%s", pat.Text, where, nearest(pat.Text, available))
	}
	n := 0
	for _, name := range available {
		if ok, _ := path.Match(pat.Text, name); ok {
			choose(name)
			n++
		}
	}
	switch {
	case n > 0:
		return "", nil
	case pat.Optional:
		return fmt.Sprintf("optional(%q): matches no function in %s", pat.Text, where), nil
	}
	return "", diagf(pat.Range, "Pattern matches nothing",
		"No function in %s matches %q. Check the spelling, or list the functions with probectl target -o FILE.", where, pat.Text)
}

// excludeFunctions removes from chosen the names an exclude pattern
// matches.
func excludeFunctions(chosen map[string]hcl.Range, exclude []spec.Pattern) {
	for name := range chosen {
		for _, ex := range exclude {
			if ok, _ := path.Match(ex.Text, name); ok {
				delete(chosen, name)
			}
		}
	}
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// nearest suggests up to three names close to name.
func nearest(name string, available []string) string {
	type cand struct {
		s string
		d int
	}
	var best []cand
	limit := len(name)/3 + 2
	for _, a := range available {
		if abs(len(a)-len(name)) > limit {
			continue
		}
		if d := distance(name, a, limit); d <= limit {
			best = append(best, cand{a, d})
		}
	}
	sort.Slice(best, func(i, j int) bool {
		if best[i].d != best[j].d {
			return best[i].d < best[j].d
		}
		return best[i].s < best[j].s
	})
	if len(best) == 0 {
		return ""
	}
	if len(best) > 3 {
		best = best[:3]
	}
	names := make([]string, len(best))
	for i, c := range best {
		names[i] = `"` + c.s + `"`
	}
	return " Nearest: " + strings.Join(names, ", ") + "."
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// distance is the Levenshtein distance, cut short above limit.
func distance(a, b string, limit int) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
