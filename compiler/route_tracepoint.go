package compiler

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// tracepointRoutes is what choosing a tracepoint probe's route reads: the
// probe, the target and the events it resolved to. As for kernel and user
// probes, each route is a named constructor.
//
// A perf-event tracepoint program does not run when the event fires inside
// another BPF program on the CPU: trace_call_bpf skips it while a kprobe's
// or a sampling program holds bpf_prog_active (counting a miss), and
// perf's recursion guard drops the event inside another perf-event
// tracepoint's program (counting nothing): a probe's counts come out
// short. A raw
// tracepoint runs its program from the tracepoint itself, guarded only
// against recursion into the same program, and costs less per hit, but
// hands the program the event's TP_PROTO arguments, not the record whose
// fields args.NAME reads. So the raw route is taken only where it keeps
// what the probe reads.
type tracepointRoutes struct {
	p      *spec.Probe
	f      *bpf.Facts
	events []string
}

// chooseTracepointRoute takes a raw tracepoint when the target has one
// for every event and the probe reads nothing a raw tracepoint would give
// differently; else tp_btf when the args it reads are the event's typed
// parameters; else a perf event on the tracepoint, saying why neither.
// attach = "raw_tracepoint", "tp_btf" or "tracepoint" insists on one, an
// error when it does not fit, never a fallback.
func chooseTracepointRoute(p *spec.Probe, f *bpf.Facts, events []string) (decision, *hcl.Diagnostic) {
	r := &tracepointRoutes{p: p, f: f, events: events}
	switch Family(p.Attach) {
	case FamilyTracepoint:
		return r.insistPerf()
	case FamilyRawTracepoint:
		return r.insistRaw()
	case FamilyTPBtf:
		return r.insistTPBtf()
	}
	why := r.notRaw()
	if why == "" {
		return r.raw(""), nil
	}
	if r.noHook() == "" && readsArgs(p) != nil {
		// Only args stand in the raw tracepoint's way: tp_btf reads them
		// when they are its parameters.
		params, whyNot := r.btfParams()
		if whyNot == "" {
			return r.tpBtf(params), nil
		}
		why += "; nor tp_btf: " + whyNot
	}
	if !has(f, FamilyTracepoint) {
		return decision{}, diagf(p.DeclRange, "No tracepoint support",
			"The target (%s) cannot attach tracepoint programs through perf events, and a raw tracepoint does not fit this probe: %s.", f.Label(), why)
	}
	return r.perf("", why), nil
}

// insistPerf is the route of attach = "tracepoint", or why not.
func (r *tracepointRoutes) insistPerf() (decision, *hcl.Diagnostic) {
	if !has(r.f, FamilyTracepoint) {
		return decision{}, diagf(r.p.AttachRange, "Attach family not available",
			"attach = \"tracepoint\" needs tracepoints through perf events, which the target (%s) lacks. Use attach = \"auto\".", r.f.Label())
	}
	return r.perf(`attach = "tracepoint": `, ""), nil
}

// insistRaw is the route of attach = "raw_tracepoint", or why not.
func (r *tracepointRoutes) insistRaw() (decision, *hcl.Diagnostic) {
	if !has(r.f, FamilyRawTracepoint) {
		return decision{}, diagf(r.p.AttachRange, "Attach family not available",
			"attach = \"raw_tracepoint\" needs raw tracepoints (Linux 4.17), which the target (%s) lacks. Use attach = \"auto\".", r.f.Label())
	}
	if why := r.notRaw(); why != "" {
		return decision{}, diagf(r.p.AttachRange, "Raw tracepoint does not fit",
			"attach = \"raw_tracepoint\" does not fit this probe: %s. Use attach = \"auto\", which takes the perf event here.", why)
	}
	return r.raw(`attach = "raw_tracepoint": `), nil
}

// insistTPBtf is the route of attach = "tp_btf", or why not.
func (r *tracepointRoutes) insistTPBtf() (decision, *hcl.Diagnostic) {
	why := r.noHook()
	if why == "" && len(r.events) > 1 && readsEvent(r.p) {
		why = "event tells the events apart by the link's cookie, which probectl does not give tp_btf links"
	}
	params, whyNot := r.btfParams()
	if why == "" {
		why = whyNot
	}
	if why != "" {
		return decision{}, diagf(r.p.AttachRange, "tp_btf does not fit",
			"attach = \"tp_btf\" does not fit this probe: %s. Use attach = \"auto\".", why)
	}
	d := r.tpBtf(params)
	d.reason = `attach = "tp_btf": ` + d.reason
	return d, nil
}

// raw is one raw tracepoint link per event; why prefixes the reason.
func (r *tracepointRoutes) raw(why string) decision {
	what := "the probe reads no args"
	if len(r.events) > 1 {
		what = "the probe reads no args and not event (raw tracepoint links carry no cookie)"
	}
	return decision{route: RouteRawTracepoint, families: []Family{FamilyRawTracepoint},
		reason: why + "raw tracepoint: " + what + ", so the TP_PROTO parameters it gets in place of the format's fields change nothing; it runs even while another BPF program runs on the CPU, where a perf-event tracepoint is skipped"}
}

// perf is one perf-event link per event; why prefixes the reason, and
// whyNotRaw, when the choice was probectl's, ends it.
func (r *tracepointRoutes) perf(why, whyNotRaw string) decision {
	reason := why + "tracepoint: a perf link on the event"
	if whyNotRaw != "" {
		reason += "; not a raw tracepoint: " + whyNotRaw
	}
	return decision{route: RouteTracepoint, families: []Family{FamilyTracepoint}, reason: reason}
}

// notRaw says why a raw tracepoint would not do for the probe, or "".
func (r *tracepointRoutes) notRaw() string {
	if !has(r.f, FamilyRawTracepoint) {
		return "the target has no raw tracepoints (Linux 4.17)"
	}
	if why := r.noHook(); why != "" {
		return why
	}
	if x := readsArgs(r.p); x != nil {
		return fmt.Sprintf("args.%s reads the event's format, and a raw tracepoint passes the TP_PROTO parameters instead", x.Name)
	}
	if len(r.events) > 1 && readsEvent(r.p) {
		return "event tells the events apart by the link's cookie, which probectl cannot give a raw tracepoint link"
	}
	return ""
}

// noHook says why the probe's events are not all raw tracepoints, or "".
func (r *tracepointRoutes) noHook() string {
	if len(r.events) == 0 {
		return "no event resolved on the target"
	}
	for _, ev := range r.events {
		if why := r.noRawHook(ev); why != "" {
			return why
		}
	}
	return ""
}

// tpBtf is a tp_btf program on the event, reading args by params.
func (r *tracepointRoutes) tpBtf(params map[string]int) decision {
	_, name, _ := strings.Cut(r.events[0], ":")
	what := "each args field the probe reads is a TP_PROTO parameter of the same name and type"
	if len(params) == 0 {
		what = "the probe reads no args"
	}
	return decision{route: RouteTPBtf, families: []Family{FamilyTPBtf}, btfParams: params,
		reason: fmt.Sprintf("tp_btf: %s (btf_trace_%s); it runs even while another BPF program runs on the CPU, where a perf-event tracepoint is skipped", what, name)}
}

// btfParams maps each args field the probe reads to its index among the
// event's TP_PROTO parameters, the u64s a tp_btf program's context holds,
// or says why they are not all such parameters: the field and the
// parameter must share the name and be integers of one size and sign.
// The program loads against the event's btf_trace_NAME typedef.
func (r *tracepointRoutes) btfParams() (map[string]int, string) {
	switch {
	case !has(r.f, FamilyTPBtf):
		return nil, "the target has no tp_btf (Linux 5.5, with BTF)"
	case len(r.events) != 1:
		return nil, "probectl loads a tp_btf program for one event only"
	case readsArgs(r.p) == nil:
		return map[string]int{}, "" // the load finds btf_trace_NAME, or fails
	}
	types, err := r.f.Types()
	if err != nil {
		return nil, fmt.Sprintf("it needs the target's BTF (%v)", err)
	}
	ev := r.events[0]
	_, name, _ := strings.Cut(ev, ":")
	var td *btf.Typedef
	if types.TypeByName("btf_trace_"+name, &td) != nil {
		return nil, fmt.Sprintf("the target's BTF has no btf_trace_%s", name)
	}
	// The typedef's prototype names no parameters; the iterator every
	// tracepoint has (__traceiter_NAME, 5.10) takes the same ones, named.
	var iter *btf.Func
	if types.TypeByName("__traceiter_"+name, &iter) != nil {
		return nil, fmt.Sprintf("the target's BTF has no __traceiter_%s to name the parameters", name)
	}
	proto, ok := iter.Type.(*btf.FuncProto)
	if !ok || len(proto.Params) == 0 {
		return nil, fmt.Sprintf("__traceiter_%s has no parameters", name)
	}
	format, err := r.f.Tracepoint(ev)
	if err != nil {
		return nil, fmt.Sprintf("the format of %s: %v", ev, err)
	}
	params := map[string]int{}
	var why string
	for _, x := range r.p.Exprs() {
		spec.Walk(x, func(e spec.Expr) {
			a, ok := e.(*spec.ArgsField)
			if !ok || why != "" {
				return
			}
			why = matchParam(a.Name, format.Field(a.Name), proto.Params[1:], params)
		})
	}
	if why != "" {
		return nil, why
	}
	return params, ""
}

// matchParam finds field name among params (the TP_PROTO parameters
// after the hook's own data pointer) and records its index, or says why
// it is not there as an integer of the field's size and sign.
func matchParam(name string, f *bpf.TracepointField, params []btf.FuncParam, out map[string]int) string {
	if f == nil || f.Class != bpf.FieldInteger {
		return fmt.Sprintf("args.%s is not an integer field", name)
	}
	for i, pr := range params {
		if pr.Name != name {
			continue
		}
		size, signed, ok := btfInteger(pr.Type)
		if !ok || size != f.Size || signed != f.Signed {
			return fmt.Sprintf("args.%s is a %d-byte %s in the format, and its parameter's type is not", name, f.Size, map[bool]string{true: "signed integer", false: "unsigned integer"}[f.Signed])
		}
		out[name] = i
		return ""
	}
	return fmt.Sprintf("args.%s is no TP_PROTO parameter of the event", name)
}

// btfInteger is the size and sign of t when it is an integer or an enum
// (through typedefs and qualifiers).
func btfInteger(t btf.Type) (size int, signed, ok bool) {
	switch t := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		return int(t.Size), t.Encoding&btf.Signed != 0, true
	case *btf.Enum:
		return int(t.Size), t.Signed, true
	}
	return 0, false, false
}

// noRawHook says why event ev has no raw tracepoint of its name, or "".
// The system call events are filters on the sys_enter and sys_exit raw
// tracepoints, which every system call reaches; ftrace's own events and
// dynamic ones (kprobe, uprobe, eprobe, synthetic, user events) have no
// tracepoint. Any other event is one when the target's BTF has its
// btf_trace_NAME typedef; a module's event is not in vmlinux's BTF, and
// stays on perf events. A target without BTF at hand (a profile) goes by
// the group alone, and apply finds the raw tracepoint by name or fails.
func (r *tracepointRoutes) noRawHook(ev string) string {
	group, name, _ := strings.Cut(ev, ":")
	switch group {
	case "syscalls":
		return fmt.Sprintf("%s is a filter on the raw tracepoint of every system call", ev)
	case "ftrace", "kprobes", "uprobes", "eprobes", "synthetic", "user_events":
		return fmt.Sprintf("%s is a %s event, not a tracepoint", ev, group)
	}
	types, err := r.f.Types()
	if err != nil {
		return ""
	}
	var td *btf.Typedef
	if types.TypeByName("btf_trace_"+name, &td) != nil {
		return fmt.Sprintf("%s has no raw tracepoint in the target's BTF (no btf_trace_%s: a module's or a dynamic event)", ev, name)
	}
	return ""
}

// readsArgs returns the first args.NAME the probe reads, or nil.
func readsArgs(p *spec.Probe) *spec.ArgsField {
	var found *spec.ArgsField
	for _, x := range p.Exprs() {
		spec.Walk(x, func(e spec.Expr) {
			if a, ok := e.(*spec.ArgsField); ok && found == nil {
				found = a
			}
		})
	}
	return found
}

// readsEvent reports whether the probe reads the event value.
func readsEvent(p *spec.Probe) bool {
	found := false
	for _, x := range p.Exprs() {
		spec.Walk(x, func(e spec.Expr) {
			if v, ok := e.(*spec.Var); ok && v.Name == "event" {
				found = true
			}
		})
	}
	return found
}
