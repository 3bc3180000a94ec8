package spec

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
)

// CheckKernels checks what the tracepoint probes name against known
// kernels (validate gives every built-in profile, bpf.Profile): an event,
// or a field read as args.FIELD, that none of them has is an error, with
// the nearest name they have; one that some of them lack is a warning
// naming those. A kernel that does not list its events is left out;
// optional events are not checked. Plan and apply check against their
// target instead.
func (c *Config) CheckKernels(kernels []*bpf.Facts) hcl.Diagnostics {
	var known []*bpf.Facts
	for _, k := range kernels {
		if _, err := k.EventList(); err == nil {
			known = append(known, k)
		}
	}
	if len(known) == 0 {
		return nil
	}
	var diags hcl.Diagnostics
	for _, p := range c.Probes {
		if p.Addr.Kind == bpf.KindTracepoint {
			diags = append(diags, checkProbeKernels(p, known)...)
		}
	}
	return diags
}

// checkProbeKernels checks one tracepoint probe's events and the fields it
// reads against the kernels.
func checkProbeKernels(p *Probe, kernels []*bpf.Facts) hcl.Diagnostics {
	var diags hcl.Diagnostics
	// events holds, per kernel, the probe's events it has; with is the
	// kernels that have every (non-optional) event of the probe.
	events := map[*bpf.Facts][]string{}
	with := slices.Clone(kernels)
	for _, pat := range p.Events {
		if pat.Optional {
			continue
		}
		var have, lack []string
		for _, k := range kernels {
			matched := kernelEvents(k, pat.Text)
			if len(matched) == 0 {
				lack = append(lack, k.Name)
				with = slices.DeleteFunc(with, func(f *bpf.Facts) bool { return f == k })
				continue
			}
			have = append(have, k.Name)
			events[k] = append(events[k], matched...)
		}
		switch {
		case len(have) == 0:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Tracepoint not found",
				Detail: fmt.Sprintf("No known kernel (%s) has a tracepoint %s %q.%s Check the name under /sys/kernel/tracing/events; a tracepoint of a module or a kernel not listed here can be written optional(%q) or checked with probectl plan -target FILE.",
					names(kernels), matchWord(pat.Text), pat.Text, nearestName(pat.Text, allEvents(kernels)), pat.Text),
				Subject: pat.Range.Ptr()})
		case len(lack) > 0:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Tracepoint not on every kernel",
				Detail: fmt.Sprintf("%s %s no tracepoint %s %q (%s %s): a plan for %s would be refused. Write optional(%q) to have it left out there instead, or leave it if those kernels are not targets.",
					strings.Join(lack, ", "), verbHave(len(lack)), matchWord(pat.Text), pat.Text, strings.Join(have, ", "), verbHave(len(have)),
					themOrIt(len(lack)), pat.Text),
				Subject: pat.Range.Ptr()})
		}
	}
	if len(with) == 0 {
		return diags
	}
	seen := map[string]bool{}
	for _, x := range p.Exprs() {
		Walk(x, func(x Expr) {
			if a, ok := x.(*ArgsField); ok && !seen[a.Name] {
				seen[a.Name] = true
				if d := checkField(a, with, events); d != nil {
					diags = append(diags, d)
				}
			}
		})
	}
	return diags
}

// checkField checks that args.NAME is a field of the probe's events on the
// kernels that have them all.
func checkField(a *ArgsField, kernels []*bpf.Facts, events map[*bpf.Facts][]string) *hcl.Diagnostic {
	var have, lack []string
	var fields []string
	for _, k := range kernels {
		has, known := true, false
		for _, ev := range events[k] {
			tp, err := k.Tracepoint(ev)
			if err != nil {
				continue // a format the kernel does not carry: not known
			}
			known = true
			fields = append(fields, tp.FieldNames()...)
			has = has && tp.Field(a.Name) != nil
		}
		switch {
		case !known:
		case has:
			have = append(have, k.Name)
		default:
			lack = append(lack, k.Name)
		}
	}
	switch {
	case len(lack) == 0:
		return nil
	case len(have) == 0:
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown tracepoint field",
			Detail: fmt.Sprintf("args.%s is not a field of the probe's events on any known kernel (%s).%s Their fields: %s.",
				a.Name, strings.Join(lack, ", "), nearestName(a.Name, fields), strings.Join(uniq(fields), ", ")),
			Subject: a.Range().Ptr()}
	}
	return &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Tracepoint field not on every kernel",
		Detail: fmt.Sprintf("args.%s is not a field of the probe's events on %s (%s %s it): a plan for %s would be refused. Leave it if those kernels are not targets, or read a field they all have.",
			a.Name, strings.Join(lack, ", "), strings.Join(have, ", "), verbHave(len(have)), themOrIt(len(lack))),
		Subject: a.Range().Ptr()}
}

// kernelEvents are kernel k's events that pattern (a name or a glob) names.
func kernelEvents(k *bpf.Facts, pattern string) []string {
	if bpf.IsEventGlob(pattern) {
		matched, _ := k.MatchEvents(pattern)
		return matched
	}
	list, _ := k.EventList()
	if i := sort.SearchStrings(list, pattern); i < len(list) && list[i] == pattern {
		return []string{pattern}
	}
	return nil
}

// allEvents are the events of every kernel, sorted, each once.
func allEvents(kernels []*bpf.Facts) []string {
	var all []string
	for _, k := range kernels {
		list, _ := k.EventList()
		all = append(all, list...)
	}
	return uniq(all)
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// nearestName is " Did you mean NAME?" for the candidate nearest to name,
// or "" when none is near.
func nearestName(name string, candidates []string) string {
	best, bestDist := "", len(name)/4+2
	for _, c := range uniq(candidates) {
		if d := levenshtein(name, c); d > 0 && d <= bestDist && (d < bestDist || best == "") {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

func names(kernels []*bpf.Facts) string {
	var out []string
	for _, k := range kernels {
		out = append(out, k.Name)
	}
	return strings.Join(out, ", ")
}

func matchWord(pattern string) string {
	if bpf.IsEventGlob(pattern) {
		return "matching"
	}
	return "named"
}

func verbHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

func themOrIt(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
