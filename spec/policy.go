package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
)

// DenyClass names a class of constructs a [Policy] refuses ("validate",
// "plan" and "apply" take them as -deny CLASS[,CLASS...]).
type DenyClass string

// RawAddress is a read of kernel memory at an address that is not kernel
// data the kernel's BTF types: cast(0xffffffff82000000, "struct x").f
// reads any kernel address, cast(argN, ...) or kernel_str(entry.p) an
// address a process may have chosen. A spec that may do so is root on
// the machine. Under the policy kernel memory is read only through
// kernel data named through BTF (args.NAME, task, their fields, and casts
// of those), and tracepoint fields that are strings in the record. It
// trusts BTF's pointer types: a parameter or field declared __user is a
// plain pointer in BTF without type tags (GCC-built kernels), so reading
// it as kernel memory still reads where a process pointed it.
const RawAddress DenyClass = "raw-address"

// DenyClassDoc is a class and what it refuses, for help and errors.
type DenyClassDoc struct {
	Class   DenyClass
	Refuses string
}

// DenyClasses lists the classes, each with what it refuses.
var DenyClasses = []DenyClassDoc{
	{RawAddress, "reading kernel memory at an address that is not kernel data typed by BTF"},
}

// Policy is the set of classes refused; the zero Policy refuses nothing.
type Policy struct {
	deny []DenyClass
}

// ParsePolicy reads a comma-separated list of class names ("" is the zero
// Policy). An unknown name is an error that lists the known ones.
func ParsePolicy(list string) (Policy, error) {
	var p Policy
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(DenyClasses, func(c DenyClassDoc) bool { return string(c.Class) == name })
		if i < 0 {
			known := make([]string, len(DenyClasses))
			for j, c := range DenyClasses {
				known[j] = fmt.Sprintf("%s (%s)", c.Class, c.Refuses)
			}
			return Policy{}, fmt.Errorf("no such class %q; the classes: %s", name, strings.Join(known, ", "))
		}
		if !p.Denies(DenyClasses[i].Class) {
			p.deny = append(p.deny, DenyClasses[i].Class)
		}
	}
	return p, nil
}

// Denies reports whether p refuses class c.
func (p Policy) Denies(c DenyClass) bool { return slices.Contains(p.deny, c) }

// String is the list ParsePolicy reads.
func (p Policy) String() string {
	s := make([]string, len(p.deny))
	for i, c := range p.deny {
		s[i] = string(c)
	}
	return strings.Join(s, ",")
}

// Enforce puts cfg under policy p: it returns an error at every construct
// p refuses that the spec shows, and records p in cfg.Policy, under which
// the compiler refuses the rest on the target (a tracepoint field's type
// comes from the event's format).
func (cfg *Config) Enforce(p Policy) hcl.Diagnostics {
	cfg.Policy = p
	var diags hcl.Diagnostics
	if !p.Denies(RawAddress) {
		return diags
	}
	for _, pr := range cfg.Probes {
		for _, x := range pr.Exprs() {
			Walk(x, func(x Expr) {
				if d := rawAddress(pr, x); d != nil {
					diags = append(diags, d)
				}
			})
		}
	}
	return diags
}

// rawAddress is the diagnostic for x when x reads kernel memory at an
// address that is not kernel data named through BTF, else nil.
func rawAddress(p *Probe, x Expr) *hcl.Diagnostic {
	var addr Expr
	var what string
	switch x := x.(type) {
	case *KernelPath:
		if x.Root != RootCast {
			return nil
		}
		addr, what = x.Base, "cast"
	case *Str:
		if !readsKernel(p, x) {
			return nil
		}
		addr, what = x.X, "kernel_str"
		if x.Space == SpaceAuto {
			what = "str"
		}
	default:
		return nil
	}
	switch addr.(type) {
	case *KernelPath:
		return nil // typed by BTF: the compiler insists on a pointer
	case *ArgsField:
		if _, ok := x.(*Str); ok {
			return nil // a string in the record, or refused by the compiler
		}
	}
	return DenyRawAddress(what, addr, "not kernel data typed by BTF")
}

// DenyRawAddress is the diagnostic of policy RawAddress at addr, the
// address fn ("cast", "str", "kernel_str") reads kernel memory at; why
// says what addr is.
func DenyRawAddress(fn string, addr Expr, why string) *hcl.Diagnostic {
	rng := addr.Range()
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Raw address denied", Subject: &rng,
		Detail: fmt.Sprintf("%s reads kernel memory at %s, %s: it may read any kernel memory, and the policy (-deny %s) refuses it. "+
			"Read kernel data by name instead: args.NAME, task and their fields, or cast(args.NAME, \"struct S\") of a void * (or drop -deny %s).",
			fn, addr.Text(), why, RawAddress, RawAddress)}
}

// readsKernel reports whether x, in probe p, reads kernel memory at an
// address (rather than user memory, or a string in place): kernel_str,
// and str() of kernel data through BTF, or on kernel probes and
// tracepoints outside syscalls:* (whose pointers are the process's). It
// is the compiler's rule (which reads the events matched on the target),
// told from the patterns: a pattern outside syscalls:* counts as kernel.
func readsKernel(p *Probe, x *Str) bool {
	switch x.Space {
	case SpaceKernel:
		return true
	case SpaceUser:
		return false
	}
	if _, ok := x.X.(*KernelPath); ok {
		return true
	}
	switch p.Addr.Kind {
	case bpf.KindUser:
		return false
	case bpf.KindTracepoint:
		for _, ev := range p.Events {
			if !strings.HasPrefix(ev.Text, "syscalls:") {
				return true
			}
		}
		return false
	}
	return true
}
