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
}

// needsEntryProgram: an entry program runs when on_entry exists.
// needsExitProgram: an exit program runs when on_exit exists.
func handlers(p *spec.Probe) (entry, exit bool) { return p.Entry != nil, p.Exit != nil }

// chooseRoute decides how the kernel runs a probe, the way the kernel
// itself would: fprobe first, trampolines where fprobe is missing, legacy
// kprobes below that. A family the user insists on that the target lacks is
// an error, never a silent fallback.
func chooseRoute(p *spec.Probe, f *bpf.Facts, km kernelMatch) (decision, *hcl.Diagnostic) {
	switch p.Addr.Kind {
	case bpf.KindTracepoint:
		if !f.Links.Tracepoint {
			return decision{}, diagf(p.DeclRange, "No tracepoint support",
				"The target (%s) cannot attach tracepoint programs.", f.Label())
		}
		return decision{route: RouteTracepoint, families: []Family{FamilyTracepoint},
			reason: "tracepoint: a perf link on the event"}, nil
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

func chooseKernelRoute(p *spec.Probe, f *bpf.Facts, km kernelMatch) (decision, *hcl.Diagnostic) {
	entry, exit := handlers(p)
	fprobe := func() string {
		switch f.Fprobe {
		case bpf.FprobeRethook:
			return "fprobe on ftrace with rethook for exits (5.18-6.13)"
		case bpf.FprobeFgraph:
			if f.FprobeEntryFastPath {
				return "fprobe on fgraph with the entry-only ftrace_ops fast path (6.19+)"
			}
			return "fprobe on fgraph (6.14+), without the entry-only fast path (6.19)"
		}
		return "no fprobe"
	}
	multiEntryRoute := func() Route {
		if f.Fprobe == bpf.FprobeRethook || f.FprobeEntryFastPath {
			return RouteFtrace
		}
		return RouteFgraph
	}
	multiExitRoute := func() Route {
		if f.Fprobe == bpf.FprobeFgraph {
			return RouteFgraph
		}
		return RouteRethook
	}
	multi := func(why string) decision {
		if !exit {
			return decision{route: multiEntryRoute(), families: []Family{FamilyKprobeMulti},
				reason: why + "entry only: one kprobe.multi link for all functions; " + fprobe()}
		}
		fams := []Family{FamilyKretprobeMulti}
		if entry {
			fams = []Family{FamilyKprobeMulti, FamilyKretprobeMulti}
		}
		return decision{route: multiExitRoute(), families: fams,
			reason: why + "entry and exit as kprobe.multi + kretprobe.multi links; " + fprobe()}
	}
	session := func(why string) decision {
		return decision{route: multiExitRoute(), families: []Family{FamilyKprobeSession}, session: true,
			reason: why + "entry and exit in one kprobe.session program, the entry deciding whether the exit runs; " + fprobe()}
	}
	trampoline := func(why string) decision {
		var fams []Family
		if entry {
			fams = append(fams, FamilyFentry)
		}
		if exit {
			fams = append(fams, FamilyFexit)
		}
		return decision{route: RouteTrampoline, families: fams,
			reason: why + "one BPF trampoline per function (fentry/fexit)"}
	}
	fsession := func(why string) decision {
		d := decision{route: RouteTrampoline, families: []Family{FamilyFsession}, session: true, fsession: true}
		var data string
		switch size := p.EntryData(); entryStorage(p, d) {
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
	legacy := func(why string) decision {
		var fams []Family
		if entry {
			fams = append(fams, FamilyKprobe)
		}
		if exit {
			fams = append(fams, FamilyKretprobe)
		}
		return decision{route: RouteKprobe, families: fams,
			reason: why + "one legacy kprobe/kretprobe per function"}
	}
	haveMulti := f.Links.KprobeMulti
	haveSession := f.Links.KprobeSession && f.Helpers.SessionKfuncs
	haveTrampoline := f.Links.Fentry && f.BTF && f.Helpers.FuncArg
	haveFsession := haveTrampoline && f.Links.Fsession && f.Helpers.SessionKfuncs

	missing := func(family, needs string) (decision, *hcl.Diagnostic) {
		return decision{}, diagf(p.AttachRange, "Attach family not available",
			"attach = %q needs %s, which the target (%s) lacks. Use attach = \"auto\" to let probectl choose a route this kernel has.",
			family, needs, f.Label())
	}
	switch Family(p.Attach) {
	case FamilyKprobeMulti:
		if !haveMulti {
			return missing(p.Attach, "the kprobe.multi link (Linux 5.18 with CONFIG_FPROBE; arm64 from 6.14)")
		}
		return multi("attach = \"kprobe.multi\": "), nil
	case FamilyKprobeSession:
		if !haveSession {
			return missing(p.Attach, "kprobe.session (Linux 6.10 with CONFIG_FPROBE)")
		}
		return session("attach = \"kprobe.session\": "), nil
	case FamilyFentry:
		if !haveTrampoline {
			return missing(p.Attach, "fentry/fexit trampolines (BTF and Linux 5.17), allowed by the kernel's policy")
		}
		return trampoline("attach = \"fentry\": "), nil
	case FamilyFsession:
		if !haveFsession {
			return missing(p.Attach, "fsession (Linux 7.0 on x86_64, or a later kernel on arm64, with BTF), allowed by the kernel's policy")
		}
		if !exit {
			return decision{}, diagf(p.AttachRange, "A session needs an exit",
				"attach = \"fsession\" runs one program at entry and exit; this probe has no on_exit. Use attach = \"fentry\" or \"auto\".")
		}
		return fsession("attach = \"fsession\": "), nil
	case FamilyKprobe:
		if !f.Links.Kprobe {
			return missing(p.Attach, "legacy kprobes (CONFIG_KPROBES)")
		}
		return legacy("attach = \"kprobe\": "), nil
	}
	var options []decision
	if haveMulti && exit && haveSession {
		options = append(options, session(""))
	}
	if haveMulti {
		options = append(options, multi(""))
	}
	if haveTrampoline && km.copies() == 0 {
		options = append(options, trampoline(""))
	}
	// fsession is priced where the table measures it (bench/routes does
	// on kernels that have it); a table without it leaves it out.
	if haveFsession && exit && km.copies() == 0 {
		options = append(options, fsession(""))
	}
	if f.Links.Kprobe {
		options = append(options, legacy(""))
	}
	var prefWhy string
	if p.Prefer != "" {
		d, why := preferRoute(p.Prefer, f, km, options)
		if why == "" {
			if n := km.copies(); haveTrampoline && n > 0 {
				d.reason = sprintf("%s (fentry/fexit left out: %d of the functions are compiler copies, without BTF)", d.reason, n)
			}
			return d, nil
		}
		prefWhy = why
	}
	d, diag := func() (decision, *hcl.Diagnostic) {
		// The rule attach = "auto" follows: fprobe first, trampolines
		// where fprobe is missing, legacy kprobes below that.
		switch {
		case haveMulti && !exit:
			return multi(""), nil
		case haveMulti && haveSession:
			return session(""), nil
		case haveMulti:
			return multi("no kprobe.session (6.10): "), nil
		case haveTrampoline && exit && haveFsession:
			return fsession("no fprobe (CONFIG_FPROBE off): "), nil
		case haveTrampoline:
			return trampoline("no fprobe (CONFIG_FPROBE off, or arm64 before 6.14): "), nil
		case f.Links.Kprobe:
			return legacy("no fprobe and no trampolines: "), nil
		}
		return decision{}, diagf(p.DeclRange, "No route to kernel functions",
			"The target (%s) has neither fprobe, fentry/fexit nor kprobes, so kernel functions cannot be probed there.", f.Label())
	}()
	d.reason = prefWhy + d.reason
	return d, diag
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
	type priced struct {
		d decision
		e Estimate
	}
	var ps []priced
	for _, o := range options {
		if e, ok := k.estimate(o.families, forChoice); ok {
			ps = append(ps, priced{o, e})
		}
	}
	if len(ps) == 0 {
		return decision{}, sprintf("prefer = %q: the table of %s measures none of the routes the target has, so the usual rule: ", prefer, k.Kernel)
	}
	key := func(e Estimate) (float64, float64) {
		if prefer == "hits" {
			return e.HitNS, e.AttachMS
		}
		return e.AttachMS, e.HitNS
	}
	// By the preferred figure; among those within 10% of the lowest, the
	// other figure decides.
	sort.SliceStable(ps, func(i, j int) bool {
		a1, a2 := key(ps[i].e)
		b1, b2 := key(ps[j].e)
		if a1 != b1 {
			return a1 < b1
		}
		return a2 < b2
	})
	low, _ := key(ps[0].e)
	pick := 0
	for i := 1; i < len(ps); i++ {
		k1, k2 := key(ps[i].e)
		if _, p2 := key(ps[pick].e); k1 <= low*1.1 && k2 < p2 {
			pick = i
		}
	}
	ps[0], ps[pick] = ps[pick], ps[0]
	best := ps[0]
	what := sprintf("%d functions", forChoice)
	switch {
	case forChoice == 1:
		what = "1 function"
	case unresolved:
		what = sprintf("%d functions (assumed: the globs resolve at apply)", forChoice)
	}
	table := k.Kernel
	if nearest {
		table += " (the nearest measured kernel)"
	}
	show := func(p priced) string {
		if prefer == "hits" {
			return sprintf("%s ≈ %.0f ns a hit", JoinFamilies(p.d.families), p.e.HitNS)
		}
		return sprintf("%s ≈ %s", JoinFamilies(p.d.families), fmtMS(p.e.AttachMS))
	}
	goal := "the cheapest per hit"
	if prefer == "attach" {
		goal = "the fastest to attach and detach " + what
	}
	why := sprintf("prefer = %q: %s by the cost table of %s: %s", prefer, goal, table, show(best))
	if len(ps) > 1 {
		why += ", next " + show(ps[1])
	}
	d := best.d
	d.reason = why + "; " + d.reason
	d.cost = estimateRoute(f, d.families, n, unresolved)
	return d, ""
}

func chooseUserRoute(p *spec.Probe, f *bpf.Facts) (decision, *hcl.Diagnostic) {
	entry, exit := handlers(p)
	fams := func(e, x Family) []Family {
		var out []Family
		if entry {
			out = append(out, e)
		}
		if exit {
			out = append(out, x)
		}
		return out
	}
	haveSession := f.Links.UprobeSession && f.Helpers.SessionKfuncs
	session := func(why string) decision {
		return decision{route: RouteUprobe, families: []Family{FamilyUprobeSession}, session: true,
			reason: why + "entry and exit in one uprobe.session program (6.13+), one link for all functions of the binary, the entry deciding whether the exit runs"}
	}
	switch {
	case Family(p.Attach) == FamilyUprobeSession && !haveSession:
		return decision{}, diagf(p.AttachRange, "Attach family not available",
			"attach = \"uprobe.session\" needs Linux 6.13, which the target (%s) lacks. Use attach = \"auto\".", f.Label())
	case Family(p.Attach) == FamilyUprobeSession && !exit:
		return decision{}, diagf(p.AttachRange, "A session needs an exit",
			"attach = \"uprobe.session\" runs one program at entry and exit; this probe has no on_exit. Use attach = \"auto\" (uprobe.multi for entry only).")
	case Family(p.Attach) == FamilyUprobeSession:
		return session("attach = \"uprobe.session\": "), nil
	case Family(p.Attach) == FamilyUprobeMulti && !f.Links.UprobeMulti:
		return decision{}, diagf(p.AttachRange, "Attach family not available",
			"attach = \"uprobe.multi\" needs Linux 6.6, which the target (%s) lacks. Use attach = \"auto\".", f.Label())
	case !f.Links.Uprobe:
		return decision{}, diagf(p.DeclRange, "No uprobe support", "The target (%s) cannot attach uprobes (CONFIG_UPROBES off).", f.Label())
	case Family(p.Attach) == FamilyUprobe:
		return decision{route: RouteUprobe, families: fams(FamilyUprobe, FamilyUretprobe),
			reason: "attach = \"uprobe\": one uprobe/uretprobe perf link per function"}, nil
	case f.Links.UprobeMulti && exit && haveSession && Family(p.Attach) != FamilyUprobeMulti:
		return session(""), nil
	case f.Links.UprobeMulti:
		return decision{route: RouteUprobe, families: fams(FamilyUprobeMulti, FamilyUretprobeMulti),
			reason: "uprobe.multi (6.6+): one link for all functions of the binary"}, nil
	}
	return decision{route: RouteUprobe, families: fams(FamilyUprobe, FamilyUretprobe),
		reason: "no uprobe.multi (6.6): one uprobe/uretprobe perf link per function"}, nil
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
