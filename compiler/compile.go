package compiler

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// Compile compiles every probe of cfg for the target described by facts.
// It returns nil output when there are errors.
func Compile(cfg *spec.Config, facts *bpf.Facts) (*Output, hcl.Diagnostics) {
	out := &Output{Facts: facts}
	var diags hcl.Diagnostics
	regs, err := bpf.RegsFor(facts.Arch)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported target", Detail: err.Error() + "."}}
	}
	for _, p := range cfg.Probes {
		cp, d := compileProbe(p, facts, regs)
		diags = append(diags, d...)
		if cp != nil {
			out.Probes = append(out.Probes, cp)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	sort.Slice(out.Probes, func(i, j int) bool { return out.Probes[i].Address.Less(out.Probes[j].Address) })
	return out, diags
}

func compileProbe(p *spec.Probe, facts *bpf.Facts, regs bpf.Regs) (*Probe, hcl.Diagnostics) {
	d, diag := chooseRoute(p, facts)
	if diag != nil {
		return nil, hcl.Diagnostics{diag}
	}
	cp := &Probe{Spec: p, Description: Description{
		Address: p.Addr, Route: d.route, Attach: d.families, Reason: d.reason,
		Binary: p.Binary, PID: p.PID, Event: p.Event,
	}}
	for _, pat := range p.Functions {
		cp.Patterns = append(cp.Patterns, pat.Text)
	}
	for _, pat := range p.Exclude {
		cp.Exclude = append(cp.Exclude, pat.Text)
	}
	var diags hcl.Diagnostics
	switch p.Addr.Kind {
	case bpf.KindKernel:
		cp.Functions, diags = resolveKernelFunctions(p, facts)
	case bpf.KindUser:
		cp.Functions, diags = resolveUserFunctions(p, facts)
	}
	g := &gen{p: p, facts: facts, regs: regs, out: cp, storage: entryStorage(p, d)}
	diags = append(diags, g.checkTarget(d)...)
	if diags.HasErrors() {
		return nil, diags
	}
	g.build(d)
	diags = append(diags, g.diags...)
	if diags.HasErrors() {
		return nil, diags
	}
	cp.Digest = cp.digest()
	return cp, diags
}

// checkTarget checks what the spec uses against what the target has:
// tracepoint fields, and the helpers behind func.
func (g *gen) checkTarget(d decision) hcl.Diagnostics {
	p, f := g.p, g.facts
	var diags hcl.Diagnostics
	var exprs []spec.Expr
	for _, h := range []*spec.Handler{p.Entry, p.Exit} {
		if h == nil {
			continue
		}
		exprs = append(exprs, h.When)
		for _, s := range h.Save {
			exprs = append(exprs, s.Value)
		}
		for _, a := range h.Actions {
			exprs = append(exprs, a.Value, a.When)
			exprs = append(exprs, a.By...)
			for _, fl := range a.Fields {
				exprs = append(exprs, fl.Value)
			}
		}
	}
	usesFunc := false
	for _, x := range exprs {
		spec.Walk(x, func(x spec.Expr) {
			switch x := x.(type) {
			case *spec.Var:
				usesFunc = usesFunc || x.Name == "func"
			case *spec.ArgsField:
				diags = append(diags, g.checkField(x)...)
			case *spec.Binary:
				if name, ok := spec.FuncName(x); ok {
					if d := g.resolveFuncName(name, x.R.Range()); d != nil {
						diags = append(diags, d)
					}
				}
			}
		})
	}
	cookie := f.Helpers.AttachCookie
	if d.route == RouteTrampoline {
		cookie = f.Helpers.TracingAttachCookie
	}
	// The slot of per-call entry data is keyed by the function's cookie.
	if (usesFunc || g.storage == StorageMap) && !cookie {
		diags = append(diags, diagf(p.DeclRange, "No attach cookies",
			"func and per-call entry data need bpf_get_attach_cookie (Linux 5.15; 5.19 for fentry/fexit), which the target (%s) lacks.", f.Label()))
	}
	if p.Addr.Kind == bpf.KindTracepoint {
		if err := f.TracepointError(p.Event); err != nil {
			diags = append(diags, diagf(p.EventRange, "Tracepoint format unreadable",
				"The format of %q cannot be read from the running kernel: %v. Check the event under /sys/kernel/tracing/events.", p.Event, err))
		} else if f.Source == "live" && f.Tracepoint(p.Event) == nil {
			diags = append(diags, diagf(p.EventRange, "Tracepoint not found",
				"The running kernel has no tracepoint %q. List them under /sys/kernel/tracing/events.", p.Event))
		}
	}
	return append(diags, g.checkLinks(d)...)
}

// Kernel limits on the functions of one multi link.
const (
	MaxKprobeMulti = 1 << 20 // MAX_KPROBE_MULTI_CNT
	MaxUprobeMulti = 1 << 20 // MAX_UPROBE_MULTI_CNT
)

// checkLinks checks the resolved functions against the limits of the link
// families that attach them.
func (g *gen) checkLinks(d decision) hcl.Diagnostics {
	var diags hcl.Diagnostics
	limits := map[Family]int{
		FamilyKprobeMulti: MaxKprobeMulti, FamilyKretprobeMulti: MaxKprobeMulti, FamilyKprobeSession: MaxKprobeMulti,
		FamilyUprobeMulti: MaxUprobeMulti, FamilyUretprobeMulti: MaxUprobeMulti,
	}
	for _, fam := range d.families {
		if limit, ok := limits[fam]; ok && len(g.out.Functions) > limit {
			diags = append(diags, diagf(g.p.FunctionsRange, "Too many functions for one link",
				"These patterns match %d functions, and one %s link attaches at most %d. Narrow the patterns, or split the functions across probes.",
				len(g.out.Functions), fam, limit))
			break
		}
	}
	return diags
}

// resolveFuncName finds the index (the attach cookie) of a function named
// in "func == NAME". The list is the target's resolution, or, with exact
// names only, the names themselves: sorted, without the excluded.
func (g *gen) resolveFuncName(name string, rng hcl.Range) *hcl.Diagnostic {
	list := g.out.Functions
	if list == nil {
		names := map[string]bool{}
		for _, pat := range g.p.Functions {
			if isGlob(pat.Text) {
				return diagf(rng, "Function list unknown",
					"func == %q needs the probe's function list, and %q is a glob the target (%s) cannot resolve. Plan against the live kernel or a facts file (probectl target -o FILE), or list the functions by name.",
					name, pat.Text, g.facts.Label())
			}
			names[pat.Text] = true
		}
		for n := range names {
			for _, ex := range g.p.Exclude {
				if ok, _ := path.Match(ex.Text, n); ok {
					delete(names, n)
				}
			}
		}
		for n := range names {
			list = append(list, n)
		}
		sort.Strings(list)
	}
	i, found := slices.BinarySearch(list, name)
	if !found {
		return diagf(rng, "Not a function of this probe",
			"func == %q can never hold: this probe's functions are %s. Use one of them.", name, strings.Join(list, ", "))
	}
	if g.funcIndex == nil {
		g.funcIndex = map[string]int{}
	}
	g.funcIndex[name] = i
	return nil
}

func (g *gen) checkField(x *spec.ArgsField) hcl.Diagnostics {
	if g.tp == nil {
		g.tp = g.facts.Tracepoint(g.p.Event)
	}
	if g.tp == nil {
		return hcl.Diagnostics{diagf(x.Range(), "Tracepoint format unknown",
			"The format of %q is not known for the target (%s), so args.%s cannot be located. Plan against the live kernel, or a facts file from probectl target -o FILE.",
			g.p.Event, g.facts.Label(), x.Name)}
	}
	fl := g.tp.Field(x.Name)
	if fl == nil {
		return hcl.Diagnostics{diagf(x.Range(), "Unknown tracepoint field",
			"%s has no field %q. Its fields: %s.", g.p.Event, x.Name, strings.Join(g.tp.FieldNames(), ", "))}
	}
	if fl.Class.Readable() {
		return nil
	}
	what := map[bpf.FieldClass]string{
		bpf.FieldString:  "a string (char[N])",
		bpf.FieldDataLoc: "a variable-length value stored after the record (__data_loc)",
		bpf.FieldArray:   "an array",
		bpf.FieldStruct:  "a structure by value",
		bpf.FieldUnknown: fmt.Sprintf("a %d-byte value of a type probectl does not know", fl.Size),
	}[fl.Class]
	return hcl.Diagnostics{diagf(x.Range(), "Field cannot be read",
		"args.%s is %s, %s. Probes read integer and pointer fields; this one cannot be read yet.", x.Name, fl.Type, what)}
}
