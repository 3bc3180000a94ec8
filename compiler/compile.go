package compiler

import (
	"errors"
	"fmt"
	"path"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/spec"
)

// Compile compiles every probe of cfg for the target described by facts,
// and the tables they share. It returns nil output when there are errors.
//
// It works in passes over the whole spec set: each probe's route,
// functions and events; then the types of every expression on the target
// (tables are laid out from all their uses, in every probe); then code.
func Compile(cfg *spec.Config, facts *bpf.Facts) (*Output, hcl.Diagnostics) {
	out, diags, _ := compileUnit(cfg, facts, true)
	return out, inLineOrder(diags)
}

// inLineOrder sorts diagnostics by where they point: file, then position.
// Those that point nowhere come first, in their order.
func inLineOrder(diags hcl.Diagnostics) hcl.Diagnostics {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		if a == nil || b == nil {
			return a == nil && b != nil
		}
		return rangeBefore(*a, *b)
	})
	return diags
}

// compileUnit is Compile, with the code cache (codecache.go) on or off,
// and the unit it compiled in.
func compileUnit(cfg *spec.Config, facts *bpf.Facts, cache bool) (*Output, hcl.Diagnostics, *unit) {
	u := &unit{facts: facts, policy: cfg.Policy, files: newFiles(), cache: cache, sources: cfg.Sources}
	defer u.files.close()
	out, diags := u.compile(cfg)
	return out, diags, u
}

func (u *unit) compile(cfg *spec.Config) (*Output, hcl.Diagnostics) {
	facts := u.facts
	out := &Output{Facts: facts, Scope: ScopeOf(cfg.Policy.Tenant())}
	var diags hcl.Diagnostics
	regs, err := bpf.RegsFor(facts.Arch)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported target", Detail: err.Error() + "."}}
	}
	diags = u.prepareAll(cfg, regs, out)
	if diags.HasErrors() {
		return nil, diags
	}
	diags = append(diags, u.unknownFormats()...)
	for _, g := range u.gens {
		u.collectUses(g)
	}
	for _, g := range u.gens {
		g.checkTypes()
		diags = append(diags, g.diags...)
		g.diags = nil
	}
	u.layoutTables(cfg, out, diags.HasErrors())
	diags = append(diags, u.diags...)
	if diags.HasErrors() {
		return nil, diags
	}
	if cfg.EmitsEvents() {
		u.buffer = newEventBuffer(cfg.Events)
		out.Events = u.buffer
	}
	u.buildAll()
	for _, g := range u.gens {
		diags = append(diags, g.diags...)
		if !g.diags.HasErrors() {
			out.Probes = append(out.Probes, g.out)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	u.diags = nil
	u.checkEventBuffer(cfg, out)
	if u.diags.HasErrors() {
		return nil, append(diags, u.diags...)
	}
	sort.Slice(out.Probes, func(i, j int) bool { return out.Probes[i].Address.Less(out.Probes[j].Address) })
	return out, diags
}

// skipReason says why an optional probe is left out, or "": optional =
// true and what it names is not on the target (the errors of prepare, all
// about the target), or every pattern optional("...") and none matched.
func skipReason(p *spec.Probe, g *gen, diags hcl.Diagnostics) string {
	if g != nil && len(g.out.Missing) > 0 {
		nothing := g.out.Functions != nil && len(g.out.Functions) == 0
		if p.Addr.Kind == bpf.KindTracepoint {
			nothing = len(g.out.Tracepoints) == 0
		}
		if nothing {
			return "every pattern is optional and none matched: " + strings.Join(g.out.Missing, "; ")
		}
	}
	if p.Optional && diags.HasErrors() {
		var why []string
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				why = append(why, d.Summary+": "+d.Detail)
			}
		}
		return strings.Join(why, " ")
	}
	return ""
}

// prepare decides a probe's route and resolves its functions or events,
// checking what it uses against what the target has.
func (u *unit) prepare(p *spec.Probe, regs bpf.Regs) (*gen, hcl.Diagnostics) {
	source := sourceAttributes(p)
	bn, diag := resolveBinaryName(p, u.facts, u.files)
	if diag != nil {
		return nil, hcl.Diagnostics{diag}
	}
	p = bn.p
	var km kernelMatch
	if p.Addr.Kind == bpf.KindKernel {
		km = matchKernelFunctions(p, u.facts)
	}
	cp := &Probe{Description: Description{
		Address: p.Addr, Binary: p.Binary, Library: bn.library, Root: bn.root, PID: p.PID, USDT: p.USDT, Source: source,
	}}
	for _, pat := range p.Functions {
		cp.Patterns = append(cp.Patterns, pat.Text)
	}
	for _, pat := range p.Exclude {
		cp.Exclude = append(cp.Exclude, pat.Text)
	}
	g := &gen{p: p, facts: u.facts, regs: regs, out: cp, u: u}
	var diags hcl.Diagnostics
	if p.Addr.Kind == bpf.KindTracepoint {
		// A tracepoint's route depends on its events, resolved first.
		if diags = g.resolveEvents(); diags.HasErrors() {
			return nil, diags
		}
	}
	d, diag := chooseRoute(p, u.facts, km, cp.Tracepoints)
	if diag != nil {
		return nil, append(diags, diag)
	}
	cp.Route, cp.Attach, cp.Reason, cp.Cost = d.route, d.families, d.reason, d.cost
	cp.Unpinnable = compiled.Unpinnable(d.families, u.facts)
	g.d, g.storage = d, entryStorage(p, d)
	switch p.Addr.Kind {
	case bpf.KindKernel:
		cp.Functions, cp.Missing, diags = resolveKernelFunctions(p, u.facts, km, d)
	case bpf.KindUser:
		if p.USDT == "" {
			cp.Functions, cp.Missing, diags = resolveUserFunctions(bn, u.facts, u.files)
			break
		}
		if cp.Sites, diags = resolveUSDT(bn, u.facts); cp.Sites != nil {
			cp.Functions = []string{p.USDT}
		}
	case bpf.KindProfile:
		_, cp.Sampler, _ = chooseProfileRoute(p, u.facts)
	}
	diags = append(diags, g.checkTarget(d)...)
	if diags.HasErrors() {
		return nil, diags
	}
	return g, diags
}

// prepareAll prepares every probe of cfg, leaving out (in out.Skipped)
// the optional ones that cannot attach.
func (u *unit) prepareAll(cfg *spec.Config, regs bpf.Regs, out *Output) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, p := range cfg.Probes {
		g, d := u.prepare(p, regs)
		if why := skipReason(p, g, d); why != "" {
			out.Skipped = append(out.Skipped, Skipped{Address: p.Addr, Why: why})
			continue
		}
		diags = append(diags, d...)
		if g != nil {
			u.gens = append(u.gens, g)
		}
	}
	return diags
}

// buildAll builds every probe's programs and digest, the probes shared
// out among the CPUs: by now the unit's tables are laid out, so what a
// build reads of the unit (layouts, policy, the event buffer) no longer
// changes, and each build writes only its own gen. It goes in three
// rounds: every probe's maps and its code key; the code of the first
// probe of each key (and of those without one); the others' copies of
// it (codecache.go), and every digest.
func (u *unit) buildAll() {
	keys := make([]string, len(u.gens))
	u.eachGen(len(u.gens), func(k int) {
		g := u.gens[k]
		g.build()
		if !g.diags.HasErrors() {
			keys[k] = g.codeKey()
		}
	})
	first := map[string]int{}
	var own, copies []int // gens generated, gens copied
	for k, key := range keys {
		if _, seen := first[key]; key != "" && seen {
			copies = append(copies, k)
			continue
		}
		if key != "" {
			first[key] = k
		}
		own = append(own, k)
	}
	leaders := make([]*leaderCode, len(u.gens))
	u.eachGen(len(own), func(i int) {
		k := own[i]
		g := u.gens[k]
		switch {
		case g.diags.HasErrors():
		case keys[k] != "":
			leaders[k] = g.buildLeader()
		default:
			g.programs()
		}
	})
	u.eachGen(len(copies), func(i int) {
		g := u.gens[copies[i]]
		if l := leaders[first[keys[copies[i]]]]; l != nil {
			g.copyCode(l)
		} else {
			g.programs()
		}
	})
	u.eachGen(len(u.gens), func(k int) {
		g := u.gens[k]
		if !g.diags.HasErrors() {
			g.out.Digest = digest(g.out, g.p, g.codeText)
		}
	})
}

// eachGen runs f(0..n-1) on every CPU.
func (u *unit) eachGen(n int, f func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(goruntime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < n; k = int(next.Add(1) - 1) {
				f(k)
			}
		})
	}
	wg.Wait()
}

// layoutTables lays out the tables the probes use; one whose type cannot
// be told is an error, unless others (failed, whether earlier) explain it.
func (u *unit) layoutTables(cfg *spec.Config, out *Output, failed bool) {
	for _, t := range cfg.Tables {
		if len(u.uses[t]) == 0 {
			continue // every probe that uses it is skipped (optional): so is the table
		}
		if l := u.layout(t); l != nil {
			out.Tables = append(out.Tables, l)
		} else if !failed && !u.diags.HasErrors() {
			if d := filledBySkipped(cfg, out, t); d != nil {
				u.diags = append(u.diags, d)
				continue
			}
			u.diags = append(u.diags, diagf(t.DeclRange, "Table type unknown",
				"What %q holds cannot be told on the target from its uses: store a value whose type is plain (an integer, str(...), comm).", t.Name))
		}
	}
}

// resolveEvents resolves a tracepoint probe's event names and globs to the
// target's events, and reads their formats. The index of an event in the
// sorted list is its attach cookie: event says which one fired.
func (g *gen) resolveEvents() hcl.Diagnostics {
	p := g.p
	var diags hcl.Diagnostics
	chosen := map[string]bool{}
	for _, pat := range p.Events {
		if d := g.chooseEvents(pat, chosen); d != nil {
			diags = append(diags, d)
		}
	}
	for ev := range chosen {
		g.out.Tracepoints = append(g.out.Tracepoints, ev)
	}
	sort.Strings(g.out.Tracepoints)
	if len(g.out.Tracepoints) == 1 {
		g.out.Event = g.out.Tracepoints[0]
	}
	if len(p.Events) > 1 || len(p.Events) == 1 && bpf.IsEventGlob(p.Events[0].Text) {
		for _, pat := range p.Events {
			g.out.Patterns = append(g.out.Patterns, pat.Text)
		}
	}
	for _, ev := range g.out.Tracepoints {
		rng := p.EventRange
		for _, pat := range p.Events {
			if pat.Text == ev {
				rng = pat.Range
			}
		}
		if d := g.readFormat(ev, rng); d != nil {
			diags = append(diags, d)
		}
	}
	return diags
}

// chooseEvents adds to chosen the events pattern pat names or matches on
// the target; an optional one that names or matches none is Missing.
func (g *gen) chooseEvents(pat spec.Pattern, chosen map[string]bool) *hcl.Diagnostic {
	f := g.facts
	if !bpf.IsEventGlob(pat.Text) {
		if _, err := f.Tracepoint(pat.Text); pat.Optional && errors.Is(err, bpf.ErrNoTracepoint) {
			g.out.Missing = append(g.out.Missing, fmt.Sprintf("optional(%q): the target (%s) has no such tracepoint", pat.Text, f.Label()))
			return nil
		}
		chosen[pat.Text] = true
		return nil
	}
	matched, err := f.MatchEvents(pat.Text)
	var d *hcl.Diagnostic
	switch {
	case errors.Is(err, bpf.ErrEventsUnknown):
		return diagf(pat.Range, "Event list unknown",
			"%q is a glob, and the target (%s) does not list its events. Plan against the live kernel or a facts file (probectl target -o FILE), or name the events.", pat.Text, f.Label())
	case err != nil:
		return diagf(pat.Range, "Event list unreadable",
			"%q is a glob, and the target's list of events cannot be read: %v.", pat.Text, err)
	case len(matched) == 0 && pat.Optional:
		g.out.Missing = append(g.out.Missing, fmt.Sprintf("optional(%q): no event of the target matches", pat.Text))
	case len(matched) == 0:
		d = diagf(pat.Range, "Glob matches no event",
			"No tracepoint of the target (%s) matches %q. The events are listed under /sys/kernel/tracing/events.", f.Label(), pat.Text)
	}
	for _, ev := range matched {
		chosen[ev] = true
	}
	return d
}

// readFormat reads the format of event ev (named at rng) for the target.
// An event whose format the target does not carry is reported at its
// first field read (unit.unknownFormats).
func (g *gen) readFormat(ev string, rng hcl.Range) *hcl.Diagnostic {
	f := g.facts
	tp, err := f.Tracepoint(ev)
	switch {
	case err == nil:
		g.tps = append(g.tps, tp)
	case errors.Is(err, bpf.ErrNoTracepoint):
		return g.noTracepoint(rng, ev)
	case errors.Is(err, bpf.ErrFormatUnknown):
		g.unformatted = append(g.unformatted, ev)
	case f.Source == "live":
		return diagf(rng, "Tracepoint format unreadable",
			"The format of %q cannot be read from the running kernel: %v. Check the event under /sys/kernel/tracing/events.", ev, err)
	default:
		return diagf(rng, "Tracepoint format unreadable",
			"The format of %q cannot be read for the target (%s): %v.", ev, f.Label(), err)
	}
	return nil
}

// noTracepoint reports an event that the target's kernel does not have,
// with the nearest of the events it has.
func (g *gen) noTracepoint(rng hcl.Range, ev string) *hcl.Diagnostic {
	f := g.facts
	list, _ := f.EventList()
	hint := nearest(ev, slices.DeleteFunc(slices.Clone(list), func(e string) bool { return e == ev }))
	switch f.Source {
	case "live":
		return diagf(rng, "Tracepoint not found",
			"The running kernel has no tracepoint %q.%s List them under /sys/kernel/tracing/events.", ev, hint)
	case "profile":
		group, _, _ := strings.Cut(ev, ":")
		if !slices.ContainsFunc(list, func(e string) bool { return strings.HasPrefix(e, group+":") }) {
			hint += fmt.Sprintf(" No tracepoint built into that kernel is in the group %q: if a module adds it, plan against a facts file (probectl target -o FILE) written where the module is loaded.", group)
		}
		return diagf(rng, "Tracepoint not found",
			"%q is not on %s: the profile's kernel (Linux %s %s) has no such tracepoint.%s", ev, f.Name, f.Kernel, f.Arch, hint)
	}
	return diagf(rng, "Tracepoint not found", "%q is not on the target (%s): its kernel has no such tracepoint.%s", ev, f.Label(), hint)
}

// unknownFormats reports the events whose format the target does not know
// (a facts file written without formats) that probes read fields of: once
// per probe, at its first field read, naming all such events of the probe.
func (u *unit) unknownFormats() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, g := range u.gens {
		if len(g.unformatted) == 0 {
			continue
		}
		var at *spec.ArgsField
		for _, x := range g.exprs() {
			spec.Walk(x, func(x spec.Expr) {
				if a, ok := x.(*spec.ArgsField); ok && (at == nil || rangeBefore(a.Range(), at.Range())) {
					at = a
				}
			})
		}
		if at == nil {
			continue
		}
		events := slices.Sorted(slices.Values(g.unformatted))
		what := fmt.Sprintf("the format of %q is", events[0])
		if len(events) > 1 {
			what = fmt.Sprintf("the formats of %s are", quoteList(events))
		}
		diags = append(diags, diagf(at.Range(), "Tracepoint format unknown",
			"args.%s cannot be located: %s not known for the target (%s), which lists the events but not their fields. Plan against the live kernel, or a facts file written by this version of probectl target -o FILE.",
			at.Name, what, g.facts.Label()))
	}
	return diags
}

// rangeBefore orders ranges by file, then by where they start.
func rangeBefore(a, b hcl.Range) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	return a.Start.Byte < b.Start.Byte
}

// quoteList quotes names and joins them: "a", "b" and "c".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// checkTarget checks what the spec uses against what the target has: the
// helpers behind func and event, and names they are compared with.
func (g *gen) checkTarget(d decision) hcl.Diagnostics {
	p, f := g.p, g.facts
	var diags hcl.Diagnostics
	usesCookie := false
	for _, x := range g.exprs() {
		spec.Walk(x, func(x spec.Expr) {
			switch x := x.(type) {
			case *spec.Var:
				usesCookie = usesCookie || g.usesCookie(x)
				d, sites := g.checkUSDTArg(x)
				if d != nil {
					diags = append(diags, d)
				}
				usesCookie = usesCookie || sites
				if d := g.checkSince(x); d != nil {
					diags = append(diags, d)
				}
			case *spec.ArgsField:
				// A field at different offsets in the events is picked
				// by the event's cookie (perEvent).
				usesCookie = usesCookie || g.fieldMoves(x.Name)
			case *spec.Binary:
				if name, ok := spec.FuncName(x); ok {
					if d := g.resolveFuncName(name, x.R.Range()); d != nil {
						diags = append(diags, d)
					}
				}
				if name, ok := spec.EventName(x); ok {
					if d := g.resolveEventName(name, x.R.Range()); d != nil {
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
	// The slot of per-call entry data is keyed by the function's cookie,
	// a constant when the probe attaches one function known now.
	if (usesCookie || g.storage == StorageMap && !g.oneFunction()) && !cookie {
		diags = append(diags, diagf(p.DeclRange, "No attach cookies",
			"func, event, per-call entry data and USDT arguments that differ between sites need bpf_get_attach_cookie (Linux 5.15; 5.19 for fentry/fexit), which the target (%s) lacks.", f.Label()))
	}
	return append(diags, g.checkLinks(d)...)
}

// fieldMoves reports whether the args field name sits at different
// offsets in the probe's events, so that reading it needs the cookie.
func (g *gen) fieldMoves(name string) bool {
	if len(g.tps) < 2 || g.tps[0].Field(name) == nil {
		return false
	}
	for _, tp := range g.tps[1:] {
		if f := tp.Field(name); f == nil || f.Offset != g.tps[0].Field(name).Offset {
			return true
		}
	}
	return false
}

// resolveEventName finds the index (the attach cookie) of an event named
// in "event == NAME".
func (g *gen) resolveEventName(name string, rng hcl.Range) *hcl.Diagnostic {
	i, found := slices.BinarySearch(g.out.Tracepoints, name)
	if !found {
		return diagf(rng, "Not an event of this probe",
			"event == %q can never hold: this probe's events are %s. Use one of them.", name, strings.Join(g.out.Tracepoints, ", "))
	}
	if g.eventIndex == nil {
		g.eventIndex = map[string]int{}
	}
	g.eventIndex[name] = i
	return nil
}

// checkLinks checks the resolved functions against the limits of the link
// families that attach them.
func (g *gen) checkLinks(d decision) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, fam := range d.families {
		if fi, _ := fam.Info(); fi.Limit > 0 && len(g.out.Functions) > fi.Limit {
			diags = append(diags, diagf(g.p.FunctionsRange, "Too many functions for one link",
				"These patterns match %d functions, and one %s link attaches at most %d. Narrow the patterns, or split the functions across probes.",
				len(g.out.Functions), fam, fi.Limit))
			break
		}
	}
	return diags
}

// resolveFuncName finds the index (the attach cookie) of a function named
// in "func == NAME". The list is the target's resolution, or, with exact
// names only, the names themselves: sorted, without the excluded.
func (g *gen) resolveFuncName(name string, rng hcl.Range) *hcl.Diagnostic {
	list, glob := g.knownFunctions()
	if list == nil {
		return diagf(rng, "Function list unknown",
			"func == %q needs the probe's function list, and %q is a glob the target (%s) cannot resolve. Plan against the live kernel or a facts file (probectl target -o FILE), or list the functions by name.",
			name, glob, g.facts.Label())
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

// knownFunctions is the probe's function list: the target's resolution,
// or, with exact names only, the names themselves, sorted, without the
// excluded. With a glob the target cannot resolve it is nil, and glob is
// that glob.
func (g *gen) knownFunctions() (list []string, glob string) {
	if g.out.Functions != nil {
		return g.out.Functions, ""
	}
	names := map[string]bool{}
	for _, pat := range g.p.Functions {
		if isGlob(pat.Text) {
			return nil, pat.Text
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
	list = make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	return list, ""
}

// diagf returns an error diagnostic at rng.
func diagf(rng hcl.Range, summary, detail string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: sprintf(detail, args...), Subject: rng.Ptr()}
}
