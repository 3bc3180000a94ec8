package compiler

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// decision is a route and the link families that realise it.
type decision struct {
	route    Route
	families []Family
	session  bool
	fsession bool // one fsession program per function: the exit always runs
	reason   string
	cost     *Estimate
	// btfParams: on tp_btf, each args field's index among the TP_PROTO
	// parameters.
	btfParams map[string]int
}

// needsEntryProgram: an entry program runs when on_entry exists.
// needsExitProgram: an exit program runs when on_exit exists.
func handlers(p *spec.Probe) (entry, exit bool) { return p.Entry != nil, p.Exit != nil }

// chooseRoute decides how the kernel runs a probe, the way the kernel
// itself would: fprobe first, trampolines where fprobe is missing, legacy
// kprobes below that. A family the user insists on that the target lacks is
// an error, never a silent fallback.
// A tracepoint probe's route reads its events, resolved on the target.
func chooseRoute(p *spec.Probe, f *bpf.Facts, km kernelMatch, events []string) (decision, *hcl.Diagnostic) {
	switch p.Addr.Kind {
	case bpf.KindTracepoint:
		d, diag := chooseTracepointRoute(p, f, events)
		if diag == nil {
			d.cost = estimateRoute(f, d.families, len(events), false)
			if d.cost != nil {
				d.cost.Events = true
			}
		}
		return d, diag
	case bpf.KindUser:
		return chooseUserRoute(p, f)
	case bpf.KindProfile:
		d, _, err := chooseProfileRoute(p, f)
		if err != nil {
			return d, diagf(p.DeclRange, "Cannot sample", "%s.", err)
		}
		return d, nil
	}
	d, diag := chooseKernelRoute(p, f, km)
	if diag == nil && d.cost == nil {
		n, unresolved := km.count()
		d.cost = estimateRoute(f, d.families, n, unresolved)
	}
	return d, diag
}

// estimateRoute prices fams for n functions by the cost table of f's
// kernel (or the nearest measured one of its arch); nil without one.
func estimateRoute(f *bpf.Facts, fams []Family, n int, unresolved bool) *Estimate {
	k, nearest := costsFor(f)
	if k == nil {
		return nil
	}
	n = forChoice(n, unresolved)
	e, ok := k.estimate(fams, n)
	if !ok {
		return nil
	}
	e.Unresolved, e.Nearest = unresolved, nearest
	return &e
}

// has reports whether f has what family fam needs: its fact in the family
// table.
func has(f *bpf.Facts, fam Family) bool {
	fi, ok := fam.Info()
	return ok && fi.Available(f)
}

// kernelRoutes is what choosing a kernel-function probe's route reads: the
// probe's handlers, the target's routes, the functions matched. Each route
// is a named constructor returning the decision and its reason; why
// prefixes the reason with what led there.
type kernelRoutes struct {
	p           *spec.Probe
	f           *bpf.Facts
	km          kernelMatch
	entry, exit bool
	// The routes the target has: kprobe.multi, kprobe.session with the
	// session kfuncs, trampolines (with BTF and bpf_get_func_arg),
	// fsession on them with the session kfuncs, legacy kprobes.
	haveMulti, haveSession, haveTrampoline, haveFsession, haveLegacy bool
}

func newKernelRoutes(p *spec.Probe, f *bpf.Facts, km kernelMatch) *kernelRoutes {
	r := &kernelRoutes{p: p, f: f, km: km}
	r.entry, r.exit = handlers(p)
	r.haveMulti = has(f, FamilyKprobeMulti)
	r.haveSession = has(f, FamilyKprobeSession) && f.Helpers.SessionKfuncs
	r.haveTrampoline = has(f, FamilyFentry) && f.BTF && f.Helpers.FuncArg
	r.haveFsession = r.haveTrampoline && has(f, FamilyFsession) && f.Helpers.SessionKfuncs
	r.haveLegacy = has(f, FamilyKprobe)
	return r
}

// chooseKernelRoute takes the family the probe insists on, else the
// cheapest by the cost table when it prefers, else the auto rule.
func chooseKernelRoute(p *spec.Probe, f *bpf.Facts, km kernelMatch) (decision, *hcl.Diagnostic) {
	r := newKernelRoutes(p, f, km)
	if ins, ok := insistable[Family(p.Attach)]; ok {
		return r.insisted(ins)
	}
	var prefWhy string
	if p.Prefer != "" {
		d, why := preferRoute(p.Prefer, f, km, r.options())
		if why == "" {
			return r.noteCopies(d), nil
		}
		prefWhy = why
	}
	d, diag := r.auto()
	d.reason = prefWhy + d.reason
	return d, diag
}

// insist is a family attach = "..." may name for a kernel probe: whether
// the target has it, what it needs when not, and the route it takes.
type insist struct {
	have  func(*kernelRoutes) bool
	needs string
	route func(*kernelRoutes, string) decision
}

var insistable = map[Family]insist{
	FamilyKprobeMulti: {func(r *kernelRoutes) bool { return r.haveMulti },
		"the kprobe.multi link (Linux 5.18 with CONFIG_FPROBE; arm64 from 6.14)", (*kernelRoutes).multi},
	FamilyKprobeSession: {func(r *kernelRoutes) bool { return r.haveSession },
		"kprobe.session (Linux 6.10 with CONFIG_FPROBE)", (*kernelRoutes).session},
	FamilyFentry: {func(r *kernelRoutes) bool { return r.haveTrampoline },
		"fentry/fexit trampolines (BTF and Linux 5.17), allowed by the kernel's policy", (*kernelRoutes).trampoline},
	FamilyFsession: {func(r *kernelRoutes) bool { return r.haveFsession },
		"fsession (Linux 7.0 on x86_64, or a later kernel on arm64, with BTF), allowed by the kernel's policy", (*kernelRoutes).fsession},
	FamilyKprobe: {func(r *kernelRoutes) bool { return r.haveLegacy },
		"legacy kprobes (CONFIG_KPROBES)", (*kernelRoutes).legacy},
}

// insisted is the route of attach = "FAMILY": that family, or an error
// when the target lacks it, never a fallback.
func (r *kernelRoutes) insisted(ins insist) (decision, *hcl.Diagnostic) {
	if !ins.have(r) {
		return decision{}, diagf(r.p.AttachRange, "Attach family not available",
			"attach = %q needs %s, which the target (%s) lacks. Use attach = \"auto\" to let probectl choose a route this kernel has.",
			r.p.Attach, ins.needs, r.f.Label())
	}
	if Family(r.p.Attach) == FamilyFsession && !r.exit {
		return decision{}, diagf(r.p.AttachRange, "A session needs an exit",
			"attach = \"fsession\" runs one program at entry and exit; this probe has no on_exit. Use attach = \"fentry\" or \"auto\".")
	}
	return ins.route(r, fmt.Sprintf("attach = %q: ", r.p.Attach)), nil
}

// options are the routes prefer chooses among: those the target has that
// fit the probe (no trampolines for compiler copies; fsession where the
// table measures it, which bench/routes does on kernels that have it).
func (r *kernelRoutes) options() []decision {
	var options []decision
	if r.haveMulti && r.exit && r.haveSession {
		options = append(options, r.session(""))
	}
	if r.haveMulti {
		options = append(options, r.multi(""))
	}
	if r.haveTrampoline && r.km.copies() == 0 {
		options = append(options, r.trampoline(""))
	}
	if r.haveFsession && r.exit && r.km.copies() == 0 {
		options = append(options, r.fsession(""))
	}
	if r.haveLegacy {
		options = append(options, r.legacy(""))
	}
	return options
}

// noteCopies says why a preferred route left trampolines out.
func (r *kernelRoutes) noteCopies(d decision) decision {
	if n := r.km.copies(); r.haveTrampoline && n > 0 {
		d.reason = sprintf("%s (fentry/fexit left out: %d of the functions are compiler copies, without BTF)", d.reason, n)
	}
	return d
}

// noTrampolineWhy says why auto falls back to legacy kprobes: no fprobe,
// and trampolines missing (arm64 before 6.0) or without the helpers the
// programs read arguments and return values with (5.10 on x86_64).
func (r *kernelRoutes) noTrampolineWhy() string {
	if has(r.f, FamilyFentry) && r.f.BTF && !r.f.Helpers.FuncArg {
		return "no fprobe, and the trampolines lack bpf_get_func_arg/ret (5.17): "
	}
	return "no fprobe and no trampolines: "
}

// auto is the rule attach = "auto" follows: fprobe first, trampolines
// where fprobe is missing, legacy kprobes below that, and legacy kprobes
// instead of trampolines for functions some of which lack BTF
// (copiesOnKprobes).
func (r *kernelRoutes) auto() (decision, *hcl.Diagnostic) {
	switch {
	case r.haveMulti && !r.exit:
		return r.multi(""), nil
	case r.haveMulti && r.haveSession:
		return r.session(""), nil
	case r.haveMulti:
		return r.multi("no kprobe.session (6.10): "), nil
	case r.copiesOnKprobes():
		return r.legacy(fmt.Sprintf("no fprobe, and %d of the functions are compiler copies, without the BTF fentry/fexit attach through: ", r.km.copies())), nil
	case r.haveTrampoline && r.exit && r.haveFsession:
		return r.fsession("no fprobe (CONFIG_FPROBE off): "), nil
	case r.haveTrampoline:
		return r.trampoline("no fprobe (CONFIG_FPROBE off, or arm64 before 6.14): "), nil
	case r.haveLegacy:
		return r.legacy(r.noTrampolineWhy()), nil
	}
	return decision{}, diagf(r.p.DeclRange, "No route to kernel functions",
		"The target (%s) has neither fprobe, fentry/fexit nor kprobes, so kernel functions cannot be probed there.", r.f.Label())
}

// copiesOnKprobes says auto takes legacy kprobes where it would take
// trampolines: the functions matched include compiler copies
// (vfs_kern_mount.part.0 in kprobe:vfs_*), which have no BTF, so a
// trampoline cannot attach them. The whole probe moves, not the copies
// alone: one route per probe keeps one program type, one link kind and
// one plan line for it, and a kprobe runs every function the glob
// matched, copies included, so the counts are those of the functions
// matched. attach = "fentry" still refuses the copies (withoutBTF).
func (r *kernelRoutes) copiesOnKprobes() bool {
	return r.haveTrampoline && r.haveLegacy && r.km.copies() > 0
}

// fprobe says which fprobe backend the multi routes run on.
func (r *kernelRoutes) fprobe() string {
	switch r.f.Fprobe {
	case bpf.FprobeRethook:
		return "fprobe on ftrace with rethook for exits (5.18-6.13)"
	case bpf.FprobeFgraph:
		if r.f.FprobeEntryFastPath {
			return "fprobe on fgraph with the entry-only ftrace_ops fast path (6.19+)"
		}
		return "fprobe on fgraph (6.14+), without the entry-only fast path (6.19)"
	}
	return "no fprobe"
}

// multiEntryRoute is the machinery of an entry-only fprobe: a plain
// ftrace_ops with rethook or the 6.19 fast path, else fgraph.
func (r *kernelRoutes) multiEntryRoute() Route {
	if r.f.Fprobe == bpf.FprobeRethook || r.f.FprobeEntryFastPath {
		return RouteFtrace
	}
	return RouteFgraph
}

// multiExitRoute is the machinery of an fprobe with exits.
func (r *kernelRoutes) multiExitRoute() Route {
	if r.f.Fprobe == bpf.FprobeFgraph {
		return RouteFgraph
	}
	return RouteRethook
}

// multi is one kprobe.multi link for all functions, and a kretprobe.multi
// one for exits.
func (r *kernelRoutes) multi(why string) decision {
	if !r.exit {
		return decision{route: r.multiEntryRoute(), families: []Family{FamilyKprobeMulti},
			reason: why + "entry only: one kprobe.multi link for all functions; " + r.fprobe()}
	}
	fams := []Family{FamilyKretprobeMulti}
	if r.entry {
		fams = []Family{FamilyKprobeMulti, FamilyKretprobeMulti}
	}
	return decision{route: r.multiExitRoute(), families: fams,
		reason: why + "entry and exit as kprobe.multi + kretprobe.multi links; " + r.fprobe()}
}

// session is one kprobe.session program for entry and exit.
func (r *kernelRoutes) session(why string) decision {
	return decision{route: r.multiExitRoute(), families: []Family{FamilyKprobeSession}, session: true,
		reason: why + "entry and exit in one kprobe.session program, the entry deciding whether the exit runs; " + r.fprobe()}
}

// trampoline is fentry and fexit programs, one trampoline per function.
func (r *kernelRoutes) trampoline(why string) decision {
	return decision{route: RouteTrampoline, families: byHandler(r.p, FamilyFentry, FamilyFexit),
		reason: why + "one BPF trampoline per function (fentry/fexit)"}
}

// fsession is one fsession program per function, saying where entry data
// lives: the 8-byte cookie, or a per-call slot in a hash map.
func (r *kernelRoutes) fsession(why string) decision {
	d := decision{route: RouteTrampoline, families: []Family{FamilyFsession}, session: true, fsession: true}
	var data string
	switch size := r.p.EntryData(); entryStorage(r.p, d) {
	case StorageCookie:
		data = "; entry data in the session cookie"
	case StorageMap:
		if size > 8 {
			data = fmt.Sprintf("; entry data of %d bytes, more than the 8-byte cookie: a per-call slot in a hash map", size)
		} else {
			data = "; on_entry's when and entry data: a per-call slot in a hash map, since the exit runs whatever the entry returns"
		}
	}
	d.reason = why + "entry and exit in one fsession program per function, on its BPF trampoline" + data
	return d
}

// legacy is one kprobe and one kretprobe per function.
func (r *kernelRoutes) legacy(why string) decision {
	return decision{route: RouteKprobe, families: byHandler(r.p, FamilyKprobe, FamilyKretprobe),
		reason: why + "one legacy kprobe/kretprobe per function"}
}

// byHandler is the entry family when on_entry exists, then the exit
// family when on_exit does.
func byHandler(p *spec.Probe, entry, exit Family) []Family {
	var fams []Family
	if p.Entry != nil {
		fams = append(fams, entry)
	}
	if p.Exit != nil {
		fams = append(fams, exit)
	}
	return fams
}

// forChoice is the number of functions a route is priced for: n, or with
// globs the target cannot resolve, 1,000 (the table's largest size) or n
// if more.
func forChoice(n int, unresolved bool) int {
	if unresolved {
		return max(n, 1000)
	}
	return max(n, 1)
}

// preferRoute chooses among options by the cost table for f's kernel:
// prefer = "hits" the lowest cost per hit, "attach" the lowest attach +
// detach time for the probe's functions, the other figure breaking ties
// within 10%. why is non-empty when the table cannot decide (no table for
// the arch, no option measured): the caller then follows the auto rule and
// says why.
func preferRoute(prefer string, f *bpf.Facts, km kernelMatch, options []decision) (decision, string) {
	k, nearest := costsFor(f)
	if k == nil {
		return decision{}, sprintf("prefer = %q: no measured cost table for %s, so the usual rule: ", prefer, f.Arch)
	}
	n, unresolved := km.count()
	forChoice := forChoice(n, unresolved)
	ps := priceOptions(k, options, forChoice)
	if len(ps) == 0 {
		return decision{}, sprintf("prefer = %q: the table of %s measures none of the routes the target has, so the usual rule: ", prefer, k.Kernel)
	}
	cheapest(ps, prefer)
	table := k.Kernel
	if nearest {
		table += " (the nearest measured kernel)"
	}
	why := sprintf("prefer = %q: %s by the cost table of %s: %s", prefer, preferGoal(prefer, forChoice, unresolved), table, ps[0].show(prefer))
	if len(ps) > 1 {
		why += ", next " + ps[1].show(prefer)
	}
	d := ps[0].d
	d.reason = why + "; " + d.reason
	d.cost = estimateRoute(f, d.families, n, unresolved)
	return d, ""
}

// priced is a route option with its estimate.
type priced struct {
	d decision
	e Estimate
}

// priceOptions prices the options k measures for n functions.
func priceOptions(k *KernelCost, options []decision, n int) []priced {
	var ps []priced
	for _, o := range options {
		if e, ok := k.estimate(o.families, n); ok {
			ps = append(ps, priced{o, e})
		}
	}
	return ps
}

// key is the figures prefer compares, the preferred one first.
func (p priced) key(prefer string) (float64, float64) {
	if prefer == "hits" {
		return p.e.HitNS, p.e.AttachMS
	}
	return p.e.AttachMS, p.e.HitNS
}

func (p priced) show(prefer string) string {
	if prefer == "hits" {
		return sprintf("%s ≈ %.0f ns a hit", JoinFamilies(p.d.families), p.e.HitNS)
	}
	return sprintf("%s ≈ %s", JoinFamilies(p.d.families), fmtMS(p.e.AttachMS))
}

// cheapest orders ps by the preferred figure and moves to the front the
// option that, within 10% of the lowest, is lowest by the other figure.
func cheapest(ps []priced, prefer string) {
	sort.SliceStable(ps, func(i, j int) bool {
		a1, a2 := ps[i].key(prefer)
		b1, b2 := ps[j].key(prefer)
		if a1 != b1 {
			return a1 < b1
		}
		return a2 < b2
	})
	low, _ := ps[0].key(prefer)
	pick := 0
	for i := 1; i < len(ps); i++ {
		k1, k2 := ps[i].key(prefer)
		if _, p2 := ps[pick].key(prefer); k1 <= low*1.1 && k2 < p2 {
			pick = i
		}
	}
	ps[0], ps[pick] = ps[pick], ps[0]
}

// preferGoal says what prefer asks for, for n functions.
func preferGoal(prefer string, n int, unresolved bool) string {
	if prefer != "attach" {
		return "the cheapest per hit"
	}
	what := sprintf("%d functions", n)
	switch {
	case n == 1:
		what = "1 function"
	case unresolved:
		what = sprintf("%d functions (assumed: the globs resolve at apply)", n)
	}
	return "the fastest to attach and detach " + what
}

// userRoutes is what choosing a user probe's route reads; like
// kernelRoutes, each route is a named constructor.
type userRoutes struct {
	p           *spec.Probe
	f           *bpf.Facts
	entry, exit bool
	// haveSession: uprobe.session with the session kfuncs.
	haveMulti, haveSession bool
}

// chooseUserRoute takes the family the probe insists on, else
// uprobe.session for entry and exit, else uprobe.multi, else one uprobe
// per function.
func chooseUserRoute(p *spec.Probe, f *bpf.Facts) (decision, *hcl.Diagnostic) {
	r := &userRoutes{p: p, f: f, haveMulti: has(f, FamilyUprobeMulti),
		haveSession: has(f, FamilyUprobeSession) && f.Helpers.SessionKfuncs}
	r.entry, r.exit = handlers(p)
	attach := Family(p.Attach)
	switch {
	case attach == FamilyUprobeSession:
		return r.insistSession()
	case attach == FamilyUprobeMulti && !r.haveMulti:
		return decision{}, diagf(p.AttachRange, "Attach family not available",
			"attach = \"uprobe.multi\" needs Linux 6.6, which the target (%s) lacks. Use attach = \"auto\".", f.Label())
	case !has(f, FamilyUprobe):
		return decision{}, diagf(p.DeclRange, "No uprobe support", "The target (%s) cannot attach uprobes (CONFIG_UPROBES off).", f.Label())
	case p.USDT != "":
		return r.usdt(), nil
	case attach == FamilyUprobe:
		return r.perFunction("attach = \"uprobe\": "), nil
	case r.haveMulti && r.exit && r.haveSession && attach != FamilyUprobeMulti:
		return r.session(""), nil
	case r.haveMulti:
		return r.multi(), nil
	}
	return r.perFunction("no uprobe.multi (6.6): "), nil
}

// insistSession is the route of attach = "uprobe.session", or why not.
func (r *userRoutes) insistSession() (decision, *hcl.Diagnostic) {
	switch {
	case !r.haveSession:
		return decision{}, diagf(r.p.AttachRange, "Attach family not available",
			"attach = \"uprobe.session\" needs Linux 6.13, which the target (%s) lacks. Use attach = \"auto\".", r.f.Label())
	case !r.exit:
		return decision{}, diagf(r.p.AttachRange, "A session needs an exit",
			"attach = \"uprobe.session\" runs one program at entry and exit; this probe has no on_exit. Use attach = \"auto\" (uprobe.multi for entry only).")
	}
	return r.session("attach = \"uprobe.session\": "), nil
}

// session is one uprobe.session program for entry and exit.
func (r *userRoutes) session(why string) decision {
	return decision{route: RouteUprobe, families: []Family{FamilyUprobeSession}, session: true,
		reason: why + "entry and exit in one uprobe.session program (6.13+), one link for all functions of the binary, the entry deciding whether the exit runs"}
}

// multi is one uprobe.multi link, and a uretprobe.multi one for exits.
func (r *userRoutes) multi() decision {
	return decision{route: RouteUprobe, families: byHandler(r.p, FamilyUprobeMulti, FamilyUretprobeMulti),
		reason: "uprobe.multi (6.6+): one link for all functions of the binary"}
}

// perFunction is one uprobe and one uretprobe perf link per function.
func (r *userRoutes) perFunction(why string) decision {
	return decision{route: RouteUprobe, families: byHandler(r.p, FamilyUprobe, FamilyUretprobe),
		reason: why + "one uprobe/uretprobe perf link per function"}
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
