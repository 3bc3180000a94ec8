package compiler

import (
	"debug/elf"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cilium/ebpf/btf"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/spec"
)

// What a target can probe, as probectl list shows it (bpftrace -l):
// patterns in bpftrace's syntax, matched against the target's facts (its
// kernel functions, tracepoints and BTF) and against the function symbols
// of user binaries, read as user probes read them.

// ListSource is the name diagnostics give the pattern argument: they
// point into it as into a file ("pattern:1:8: error: ...").
const ListSource = "pattern"

// Bounds of a pattern argument. A kernel symbol is at most KSYM_NAME_LEN
// (512) bytes and an event's parts 64 each: a longer pattern can match
// nothing, and matching it against every name would only cost time.
const (
	MaxListPattern  = 1024 // bytes in one pattern
	MaxListPatterns = 64   // patterns in one argument, separated by commas
)

// listFamily is what a kind lists.
type listFamily int

const (
	listKernel     listFamily = iota // kernel functions
	listTracepoint                   // tracepoints, GROUP:EVENT
	listUser                         // a binary's functions, BINARY:FUNCTION
	listUSDT                         // a binary's SDT notes, BINARY:PROVIDER:NAME
)

// protoStyle is what -v shows of a kernel function's BTF prototype.
type protoStyle int

const (
	protoArgN     protoStyle = iota // kprobe: arg0, arg1... as bpftrace (registers, floats skipped)
	protoRetval                     // kretprobe: the return type alone ("void" for none)
	protoNamed                      // fentry, fexit: the parameters by name, then "retval"
	protoProbectl                   // kernel: the parameters by name, then "ret", as specs read them
)

// listKind is one kind a pattern may name: its name as printed, bpftrace's
// aliases, what it lists.
type listKind struct {
	name    string
	aliases []string
	family  listFamily
	proto   protoStyle
	// trampoline: the kind attaches through BTF (fentry, fexit), so it
	// lists the functions BTF declares, named with their module as
	// bpftrace names them ("vmlinux:vfs_read").
	trampoline bool
}

var listKinds = []listKind{
	{name: "kernel", family: listKernel, proto: protoProbectl},
	{name: "kprobe", aliases: []string{"k"}, family: listKernel, proto: protoArgN},
	{name: "kretprobe", aliases: []string{"kr"}, family: listKernel, proto: protoRetval},
	{name: "fentry", aliases: []string{"f", "kfunc"}, family: listKernel, proto: protoNamed, trampoline: true},
	{name: "fexit", aliases: []string{"fr", "kretfunc"}, family: listKernel, proto: protoNamed, trampoline: true},
	{name: "tracepoint", aliases: []string{"t"}, family: listTracepoint},
	{name: "user", family: listUser},
	{name: "uprobe", aliases: []string{"u"}, family: listUser},
	{name: "uretprobe", aliases: []string{"ur"}, family: listUser},
	{name: "usdt", aliases: []string{"U"}, family: listUSDT},
}

// unlistedKinds are bpftrace's kinds that name nothing to list, with why.
var unlistedKinds = map[string]string{
	"rawtracepoint": "probectl attaches tracepoints by their events (its route may be a raw tracepoint): list them as tracepoint:GROUP:EVENT.",
	"profile":       "A profile probe samples every CPU at a frequency: there is nothing to list.",
	"interval":      "An interval fires on a timer: there is nothing to list.",
	"software":      "Software events are a fixed set of the kernel's perf counters, the same on every kernel: " + perfEventNames(false) + ". A profile probe samples one (event = \"page-faults\", period = N); software:EVENT:N imports as one.",
	"hardware":      "Hardware events are a fixed set of perf counters of the machine's PMU: " + perfEventNames(true) + ". A profile probe samples one (event = \"instructions\", period = N) where the machine has a PMU; hardware:EVENT:N imports as one.",
}

// perfEventNames lists bpftrace's software or hardware events, with
// their aliases.
func perfEventNames(hardware bool) string {
	var out []string
	for _, e := range bpf.PerfEvents {
		if e.Hardware == hardware {
			n := e.Name
			if e.Alias != "" {
				n += " (" + e.Alias + ")"
			}
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

func lookupListKind(name string) *listKind {
	for i := range listKinds {
		if k := &listKinds[i]; k.name == name || slices.Contains(k.aliases, name) {
			return k
		}
	}
	return nil
}

// ListPattern is one pattern of probectl list, parsed.
type ListPattern struct {
	// Text is the pattern as written.
	Text string
	// Kind is the kind spelt in full ("kprobe" for "k"), "" for a bare
	// pattern, which searches every kernel function and tracepoint.
	Kind string
	// Binary is a user kind's binary: a path, or a library name looked up
	// as user probes look it up (ld.so.cache).
	Binary string
	// Match is the glob names are matched against: a function's name, an
	// event's GROUP:EVENT.
	Match string
	// Range is where the pattern is in the argument.
	Range hcl.Range
	kind  *listKind
}

// ListQuery is the patterns of one probectl list argument.
type ListQuery []ListPattern

// Events are the tracepoint globs the query matches, which a live target
// reads the formats of for -v (bpf.LoadTarget's events).
func (q ListQuery) Events() []string {
	var out []string
	for _, p := range q {
		if p.kind == nil || p.kind.family == listTracepoint {
			out = append(out, p.Match)
		}
	}
	return out
}

// KernelFunctions reports whether the query needs the target's list of
// kernel functions (a quarter of a second to read on a live kernel).
func (q ListQuery) KernelFunctions() bool {
	for _, p := range q {
		if p.kind == nil || p.kind.family == listKernel {
			return true
		}
	}
	return false
}

// ParseListPatterns parses probectl list's argument: patterns separated
// by commas, each [KIND:]NAME as bpftrace -l takes them. An empty
// argument is every kernel function and tracepoint ("*").
func ParseListPatterns(arg string) (ListQuery, hcl.Diagnostics) {
	at := func(off, n int) hcl.Range {
		off = min(max(off, 0), len(arg))
		col := func(o int) int { return utf8.RuneCountInString(arg[:min(o, len(arg))]) + 1 }
		return hcl.Range{Filename: ListSource,
			Start: hcl.Pos{Line: 1, Column: col(off), Byte: off},
			End:   hcl.Pos{Line: 1, Column: col(off + n), Byte: min(off+n, len(arg))}}
	}
	if n := strings.Count(arg, ",") + 1; n > MaxListPatterns {
		return nil, hcl.Diagnostics{diagf(at(0, len(arg)), "Too many patterns",
			"The argument holds %d patterns; at most %d. Run probectl list once per group of patterns.", n, MaxListPatterns)}
	}
	var q ListQuery
	var diags hcl.Diagnostics
	off := 0
	for _, part := range strings.Split(arg, ",") {
		lead := len(part) - len(strings.TrimLeft(part, " \t"))
		text := strings.TrimSpace(part)
		p, d := parseListPattern(text, func(o, n int) hcl.Range { return at(off+lead+o, n) }, arg != "")
		if d != nil {
			diags = append(diags, d)
		} else {
			q = append(q, p)
		}
		off += len(part) + 1
	}
	return q, diags
}

// parseListPattern parses one pattern; at gives the range of its bytes
// o to o+n. inList says the argument was not empty.
func parseListPattern(text string, at func(o, n int) hcl.Range, inList bool) (ListPattern, *hcl.Diagnostic) {
	p := ListPattern{Text: text, Range: at(0, len(text))}
	switch {
	case text == "" && inList:
		return p, diagf(p.Range, "Empty pattern",
			"A comma separates two patterns, such as kprobe:vfs_*,tracepoint:syscalls:sys_enter_*: remove the extra comma, or give the pattern.")
	case text == "":
		text = "*"
	case len(text) > MaxListPattern:
		return p, diagf(at(0, 1), "Pattern too long",
			"The pattern has %d bytes; at most %d (a kernel function's name has at most 512). Shorten it, with * for the parts in between.", len(text), MaxListPattern)
	case !spec.Printable(text):
		bad := strings.IndexFunc(text, func(r rune) bool { return !spec.Printable(string(r)) })
		return p, diagf(at(max(bad, 0), 1), "Pattern not printable",
			"The pattern holds a control character or bytes that are not UTF-8, which no function or event name has: %q. Write it in printable characters.", text)
	}
	kindText, rest, qualified := strings.Cut(text, ":")
	if !qualified || kindText == "*" {
		off := 0
		if qualified {
			text, off = rest, len(kindText)+1
		}
		p.Match = text
		return p, checkListGlob(p, p.Match, at(off, len(text)))
	}
	p.kind = lookupListKind(kindText)
	if p.kind == nil {
		return p, unknownListKind(kindText, at(0, len(kindText)))
	}
	p.Kind = p.kind.name
	restAt := func(o, n int) hcl.Range { return at(len(kindText)+1+o, n) }
	switch p.kind.family {
	case listKernel:
		return parseKernelPattern(p, rest, restAt)
	case listTracepoint:
		return parseTracepointPattern(p, rest, restAt)
	case listUSDT:
		return parseUSDTPattern(p, rest, restAt)
	}
	return parseUserPattern(p, rest, restAt)
}

func unknownListKind(kind string, rng hcl.Range) *hcl.Diagnostic {
	full := map[string]string{"rt": "rawtracepoint", "p": "profile", "i": "interval", "s": "software", "h": "hardware"}
	if f, ok := full[kind]; ok {
		kind = f
	}
	if why, ok := unlistedKinds[kind]; ok {
		return diagf(rng, "Nothing to list", "%s", why)
	}
	var names []string
	for _, k := range listKinds {
		names = append(names, k.name)
	}
	if kind == "" {
		return diagf(rng, "Empty probe kind",
			"A pattern is KIND:NAME, such as kprobe:vfs_* or tracepoint:syscalls:*, or a bare NAME, which searches every kernel function and tracepoint. The kinds: %s.", strings.Join(names, ", "))
	}
	return diagf(rng, "Unknown probe kind",
		"%q is not a kind probectl lists.%s The kinds: %s (and bpftrace's short names: k, kr, f, fr, t, u, ur, U).", kind, nearest(kind, names), strings.Join(names, ", "))
}

// parseKernelPattern parses FUNCTION, or MODULE:FUNCTION with the module
// vmlinux (bpftrace's fentry:vmlinux:vfs_read).
func parseKernelPattern(p ListPattern, rest string, at func(o, n int) hcl.Range) (ListPattern, *hcl.Diagnostic) {
	match, off := rest, 0
	if mod, fn, ok := strings.Cut(rest, ":"); ok {
		if mod != "vmlinux" && mod != "*" {
			return p, diagf(at(0, len(mod)), "Kernel module not listed by name",
				"probectl lists kernel functions by name, a module's among them, without the module: write %s:%s.", p.Kind, fn)
		}
		match, off = fn, len(mod)+1
	}
	if match == "" {
		return p, diagf(at(off, 0), "No function",
			"Name the kernel function after the colon, or a glob of them: %s:vfs_*.", p.Kind)
	}
	p.Match = match
	return p, checkListGlob(p, match, at(off, len(match)))
}

// parseTracepointPattern parses GROUP:EVENT, either a glob.
func parseTracepointPattern(p ListPattern, rest string, at func(o, n int) hcl.Range) (ListPattern, *hcl.Diagnostic) {
	if err := bpf.CheckEventPattern(rest); err != nil {
		return p, diagf(at(0, len(rest)), "Bad tracepoint pattern",
			"%s: %v. Write tracepoint:GROUP:EVENT, either a glob: tracepoint:sched:sched_switch, tracepoint:syscalls:sys_enter_*, tracepoint:*:*open*.", p.Text, err)
	}
	p.Match = rest
	return p, nil
}

// parseUserPattern parses BINARY:FUNCTION; the binary is no glob.
func parseUserPattern(p ListPattern, rest string, at func(o, n int) hcl.Range) (ListPattern, *hcl.Diagnostic) {
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return p, diagf(at(0, len(rest)), "No binary",
			"A user pattern names a binary and its functions, as %s:/bin/bash:readline or %s:libc:malloc*.", p.Kind, p.Kind)
	}
	bin, fn := rest[:i], rest[i+1:]
	switch {
	case bin == "":
		return p, diagf(at(0, 1), "No binary",
			"Name the binary before the function: %s:/bin/bash:%s, or a library as ldconfig -p lists it (libc).", p.Kind, fn)
	case isGlob(bin):
		return p, diagf(at(0, len(bin)), "Binary is a glob",
			"%q would name several binaries; a pattern lists the functions of one. Give its path, or a library's name (libc).", bin)
	case fn == "":
		return p, diagf(at(i+1, 0), "No function",
			"Name the function after the binary, or a glob of them: %s:%s:*.", p.Kind, bin)
	}
	p.Binary, p.Match = bin, fn
	return p, checkListGlob(p, fn, at(i+1, len(fn)))
}

// parseUSDTPattern parses BINARY:PROVIDER:NAME, or BINARY:NAME (of any
// provider), as bpftrace's usdt: takes them; the binary is no glob.
func parseUSDTPattern(p ListPattern, rest string, at func(o, n int) hcl.Range) (ListPattern, *hcl.Diagnostic) {
	parts := strings.Split(rest, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return p, diagf(at(0, len(rest)), "Bad USDT pattern",
			"A USDT pattern names a binary and its probes, as %s:/usr/bin/python3:python:function__entry, %s:/usr/bin/python3:* (every probe) or %s:libc:PROVIDER:NAME.", p.Kind, p.Kind, p.Kind)
	}
	bin, match := parts[0], "*:"+parts[len(parts)-1]
	if len(parts) == 3 {
		match = parts[1] + ":" + parts[2]
	}
	if parts[len(parts)-1] == "*" && len(parts) == 2 {
		match = "*"
	}
	switch {
	case bin == "":
		return p, diagf(at(0, 1), "No binary",
			"Name the binary before the probe: %s:/usr/bin/python3:*, or a library as ldconfig -p lists it (libc).", p.Kind)
	case isGlob(bin):
		return p, diagf(at(0, len(bin)), "Binary is a glob",
			"%q would name several binaries; a pattern lists the USDT probes of one. Give its path, or a library's name (libc).", bin)
	case slices.Contains(parts[1:], ""):
		return p, diagf(at(len(bin)+1, len(rest)-len(bin)-1), "No probe",
			"Name the probe after the binary, or a glob of them: %s:%s:* or %s:%s:PROVIDER:NAME.", p.Kind, bin, p.Kind, bin)
	}
	p.Binary, p.Match = bin, match
	return p, checkListGlob(p, match, at(len(bin)+1, len(rest)-len(bin)-1))
}

// checkListGlob refuses a glob path.Match cannot read.
func checkListGlob(p ListPattern, glob string, rng hcl.Range) *hcl.Diagnostic {
	if _, err := path.Match(glob, ""); err != nil {
		return diagf(rng, "Bad glob",
			"%q is not a valid glob (an unclosed [ or a stray \\). A glob has * for any characters, ? for one, [...] for one of a set.", glob)
	}
	return nil
}

// List matches the query against the target: kernel functions (the
// facts' list, and for fentry and fexit its BTF), tracepoints (the facts'
// events), and user binaries' function symbols read on this machine
// under the target's root. With verbose, each point has its fields: a
// tracepoint's format, a kernel function's BTF prototype. A pattern that
// matches nothing is an error at the pattern; what the target cannot say
// (a profile's functions, BTF it lacks) is an error where the pattern
// needs it, a warning where -v only shows less.
func List(q ListQuery, f *bpf.Facts, verbose bool) ([]compiled.ProbePoint, hcl.Diagnostics) {
	l := &lister{facts: f, verbose: verbose, seen: map[string]bool{}, warned: map[string]bool{}}
	for _, p := range q {
		before := len(l.out)
		var d *hcl.Diagnostic
		switch {
		case p.kind == nil:
			d = l.bare(p)
		case p.kind.family == listKernel:
			d = l.kernel(p, p.kind)
		case p.kind.family == listTracepoint:
			d = l.tracepoints(p)
		case p.kind.family == listUSDT:
			d = l.usdt(p)
		default:
			d = l.user(p)
		}
		if d == nil && len(l.out) == before && !l.matchedSeen {
			d = diagf(p.Range, "Pattern matches nothing", "Nothing on %s matches %q.%s", f.Label(), p.Text, l.hint(p))
		}
		l.matchedSeen = false
		if d != nil {
			l.diags = append(l.diags, d)
		}
	}
	return l.out, l.diags
}

type lister struct {
	facts   *bpf.Facts
	verbose bool
	out     []compiled.ProbePoint
	diags   hcl.Diagnostics
	seen    map[string]bool
	warned  map[string]bool
	// matchedSeen: the pattern matched only points an earlier one listed.
	matchedSeen bool
	// candidates are the names the last pattern was matched against, for
	// the nearest ones when it matched nothing.
	candidates []string
}

func (l *lister) add(p compiled.ProbePoint) {
	if key := p.String(); l.seen[key] {
		l.matchedSeen = true
	} else {
		l.seen[key] = true
		l.out = append(l.out, p)
	}
}

// warn adds a warning once per summary.
func (l *lister) warn(rng hcl.Range, summary, detail string, args ...any) {
	if l.warned[summary] {
		return
	}
	l.warned[summary] = true
	l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: sprintf(detail, args...), Subject: rng.Ptr()})
}

// hint names the nearest candidates of a pattern that is no glob.
func (l *lister) hint(p ListPattern) string {
	if isGlob(p.Match) {
		return " Check the spelling, or widen the glob."
	}
	return nearest(p.Match, l.candidates)
}

// bare lists a pattern without a kind: the tracepoints, then the kernel
// functions (as kprobes), as bpftrace -l does.
func (l *lister) bare(p ListPattern) *hcl.Diagnostic {
	var cands []string
	if events, err := l.facts.EventList(); err == nil {
		l.matchEvents(p, events)
		cands = events
	} else {
		l.warn(p.Range, "Tracepoints not searched", "%s does not list its tracepoints (%v); only its kernel functions are searched.", l.facts.Label(), err)
	}
	if len(l.facts.Functions) > 0 {
		l.kernel(p, lookupListKind("kprobe"))
		cands = append(slices.Clip(cands), l.facts.Functions...)
	} else {
		l.warn(p.Range, "Kernel functions not searched",
			"%s has no list of kernel functions (a built-in profile has none); only its tracepoints are searched. List them against the live kernel, or a facts file written there (probectl target -o FILE).", l.facts.Label())
	}
	l.candidates = cands
	return nil
}

// kernel lists kernel functions: the facts' list, and for a trampoline
// kind only those its BTF declares.
func (l *lister) kernel(p ListPattern, k *listKind) *hcl.Diagnostic {
	f := l.facts
	if len(f.Functions) == 0 {
		return diagf(p.Range, "No kernel functions to list",
			"%s has no list of kernel functions (a built-in profile has none). List them against the live kernel (-target auto), or a facts file written there (probectl target -o FILE).", f.Label())
	}
	var types *btf.Spec
	if k.trampoline || l.verbose {
		var err error
		types, err = f.Types()
		switch {
		case err != nil && k.trampoline:
			return diagf(p.Range, "No BTF to list "+k.name+" with",
				"%s attaches through the kernel's BTF, and %v. List kprobe:%s instead, or against a target with BTF (the live kernel, or a facts file written by probectl target -o FILE).", k.name, err, p.Match)
		case err != nil:
			l.warn(p.Range, "Prototypes not shown", "-v shows kernel functions' prototypes from the target's BTF, and %v.", err)
		}
	}
	l.matchFunctions(p, k, f.Functions, types)
	l.candidates = f.Functions
	return nil
}

func (l *lister) matchFunctions(p ListPattern, k *listKind, fns []string, types *btf.Spec) {
	for _, fn := range fns {
		if ok, _ := path.Match(p.Match, fn); !ok {
			continue
		}
		var proto *btf.FuncProto
		if types != nil {
			proto = funcProto(types, fn)
			if proto == nil && k.trampoline {
				continue // no BTF: no trampoline
			}
		}
		pt := compiled.ProbePoint{Kind: k.name, Name: fn}
		if k.trampoline {
			pt.Name = "vmlinux:" + fn
		}
		if l.verbose && proto != nil {
			pt.Fields = protoFields(proto, k.proto)
		}
		l.add(pt)
	}
}

// funcProto is the prototype BTF declares for fn, nil when it declares
// none or several that differ (the compiler's "Function is ambiguous").
func funcProto(types *btf.Spec, fn string) *btf.FuncProto {
	proto, ambiguous := btfProto(types, fn)
	if ambiguous {
		return nil
	}
	return proto
}

// protoFields spells a prototype as bpftrace -lv does, one declaration a
// line, in the style of the kind.
func protoFields(proto *btf.FuncProto, style protoStyle) []string {
	_, void := proto.Return.(*btf.Void)
	void = void || proto.Return == nil
	var out []string
	switch style {
	case protoRetval:
		if void {
			return []string{"void"}
		}
		return []string{cDecl(proto.Return, "retval")}
	case protoArgN:
		n := 0
		for _, prm := range proto.Params {
			if _, fl := btf.UnderlyingType(prm.Type).(*btf.Float); fl || variadic(prm) {
				continue // in other registers than argN's, or none
			}
			out = append(out, cDecl(prm.Type, fmt.Sprintf("arg%d", n)))
			n++
		}
		return out
	}
	for _, prm := range proto.Params {
		if variadic(prm) {
			out = append(out, "...")
		} else {
			out = append(out, cDecl(prm.Type, prm.Name))
		}
	}
	if !void {
		ret := "retval"
		if style == protoProbectl {
			ret = "ret"
		}
		out = append(out, cDecl(proto.Return, ret))
	}
	return out
}

// cDecl declares name of type t as bpftrace -lv prints it (libbpf's
// btf_dump of the type, then the name): "struct file * file",
// "const char * name", "char * const p", "int (*)(void *) fn".
func cDecl(t btf.Type, name string) string {
	return strings.TrimSpace(cTypeName(t) + " " + name)
}

// variadic reports whether prm is BTF's mark of a variadic function's
// "...": a last parameter of no type and no name.
func variadic(prm btf.FuncParam) bool {
	_, void := prm.Type.(*btf.Void)
	return (void || prm.Type == nil) && prm.Name == ""
}

// cTypeName is cName with pointers as C writes them: a const pointer
// "char * const", a function pointer "int (*)(void *)".
func cTypeName(t btf.Type) string {
	switch v := t.(type) {
	case *btf.Const:
		if _, ptr := v.Type.(*btf.Pointer); ptr {
			return cTypeName(v.Type) + " const"
		}
		return "const " + cTypeName(v.Type)
	case *btf.Pointer:
		proto, ok := v.Target.(*btf.FuncProto)
		if !ok {
			return cTypeName(v.Target) + " *"
		}
		params := make([]string, len(proto.Params))
		for i, prm := range proto.Params {
			params[i] = cTypeName(prm.Type)
		}
		if len(params) == 0 {
			params = []string{"void"}
		}
		return fmt.Sprintf("%s (*)(%s)", cTypeName(proto.Return), strings.Join(params, ", "))
	}
	return cName(t)
}

// tracepoints lists the target's events a pattern matches.
func (l *lister) tracepoints(p ListPattern) *hcl.Diagnostic {
	events, err := l.facts.EventList()
	if err != nil {
		return diagf(p.Range, "Tracepoints unknown",
			"%s does not list its tracepoints (%v). List them against the live kernel, a profile, or a facts file written by probectl target -o FILE.", l.facts.Label(), err)
	}
	l.matchEvents(p, events)
	l.candidates = events
	return nil
}

func (l *lister) matchEvents(p ListPattern, events []string) {
	for _, ev := range events {
		if ok, _ := path.Match(p.Match, ev); !ok {
			continue
		}
		pt := compiled.ProbePoint{Kind: "tracepoint", Name: ev}
		if l.verbose {
			pt.Fields = l.eventFields(p, ev)
		}
		l.add(pt)
	}
}

// eventFields spells an event's fields as its format file declares them,
// and bpftrace -lv prints them: "int __syscall_nr", "char comm[16]".
func (l *lister) eventFields(p ListPattern, ev string) []string {
	tp, err := l.facts.Tracepoint(ev)
	if err != nil {
		if errors.Is(err, bpf.ErrFormatUnknown) {
			l.warn(p.Range, "Fields not shown", "%s lists its tracepoints without their formats (a facts file written by an older probectl). Write the facts again with probectl target -o FILE.", l.facts.Label())
		} else {
			l.warn(p.Range, "Fields not shown", "The format of %s cannot be read: %v.", ev, err)
		}
		return nil
	}
	out := make([]string, 0, len(tp.Fields))
	for _, fl := range tp.Fields {
		typ, dims := fl.Type, ""
		if i := strings.IndexByte(typ, '['); i >= 0 && fl.Class != bpf.FieldDataLoc {
			typ, dims = strings.TrimSpace(typ[:i]), typ[i:]
		}
		out = append(out, typ+" "+fl.Name+dims)
	}
	return out
}

// user lists a binary's function symbols, read as a user probe's binary is
// read: a library name through ld.so.cache, the file under the target's
// root.
func (l *lister) user(p ListPattern) *hcl.Diagnostic {
	f := l.facts
	bin, d := l.binary(p)
	if d != nil {
		return d
	}
	b, err := openBinary(f.Root, bin)
	if err != nil {
		return diagf(p.Range, "Cannot read binary", "%v. The binary must exist and be an ELF file with a symbol table.", err)
	}
	defer b.Close()
	fns := b.functions()
	for _, fn := range fns {
		if ok, _ := path.Match(p.Match, fn); ok && spec.Printable(fn) {
			l.add(compiled.ProbePoint{Kind: p.Kind, Name: bin + ":" + fn})
		}
	}
	l.candidates = fns
	return nil
}

// binary is the path of a user pattern's binary: a library name looked
// up in ld.so.cache under the target's root, as user probes look it up.
func (l *lister) binary(p ListPattern) (string, *hcl.Diagnostic) {
	f := l.facts
	bin := p.Binary
	switch {
	case strings.HasPrefix(bin, "/"):
	case strings.Contains(bin, "/"):
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", diagf(p.Range, "Cannot read binary", "%v. Give the binary's absolute path.", err)
		}
		bin = abs
	default:
		lib, err := symbols.ResolveLibraryIn(f.Root, bin, f.Arch)
		if err != nil {
			return "", diagf(p.Range, "Library not found",
				"%q names a library, which is looked up in the dynamic linker's cache as user probes look it up: %v. Give the library's absolute path, or its name as ldconfig -p lists it.", p.Binary, err)
		}
		bin = lib
	}
	return bin, nil
}

// usdt lists a binary's USDT probes (its SDT notes), one line a probe
// however many sites it has, as bpftrace prints them:
// usdt:/usr/bin/python3.11:python:function__entry. With -v, each
// distinct set of the sites' argument specifiers, as the notes write
// them ("-4@%edi 8@%rsi").
func (l *lister) usdt(p ListPattern) *hcl.Diagnostic {
	bin, d := l.binary(p)
	if d != nil {
		return d
	}
	file, err := symbols.OpenIn(l.facts.Root, bin)
	if err != nil {
		return diagf(p.Range, "Cannot read binary", "%v. The binary must exist and be an ELF file.", err)
	}
	defer file.Close()
	where := symbols.InRoot(l.facts.Root, bin)
	ef, err := elf.NewFile(file)
	if err != nil {
		return diagf(p.Range, "Cannot read binary", "%s: %v. The binary must be an ELF file.", where, err)
	}
	notes, err := symbols.ReadNotes(ef)
	if err != nil {
		return diagf(p.Range, "Cannot read USDT probes", "%s: %v.", where, err)
	}
	if len(notes) == 0 {
		return diagf(p.Range, "No USDT probes",
			"%s has no USDT probes (no .note.stapsdt notes): it was built without sys/sdt.h's probes (for Python, PostgreSQL and others, configure --with-dtrace or --enable-dtrace). List its functions instead: uprobe:%s:*.", where, p.Binary)
	}
	var keys []string
	args := map[string][]string{}
	for _, u := range notes {
		key := u.Key()
		if !spec.Printable(key) {
			continue
		}
		if _, ok := args[key]; !ok {
			keys = append(keys, key)
			args[key] = nil
		}
		if u.Args != "" && !slices.Contains(args[key], u.Args) && spec.Printable(u.Args) {
			args[key] = append(args[key], u.Args)
		}
	}
	for _, key := range keys {
		if ok, _ := path.Match(p.Match, key); !ok {
			continue
		}
		pt := compiled.ProbePoint{Kind: p.Kind, Name: bin + ":" + key}
		if l.verbose {
			pt.Fields = args[key]
		}
		l.add(pt)
	}
	l.candidates = keys
	return nil
}
