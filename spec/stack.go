package spec

import (
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/probectl/probectl/bpf"
)

// This file lowers call stacks (kstack, ustack), checks where they are
// kept, and decodes the profile probe kind.

// Stack is kstack, ustack, kstack(N) or ustack(N): the call stack of the
// kernel or of the current process where the probe fired, at most Depth
// frames from the innermost. The program keeps it as an id in a stack
// trace map; show symbolizes it.
type Stack struct {
	exprBase
	User  bool
	Depth int
}

// MaxStackDepth is the deepest stack the kernel records: its
// perf_event_max_stack (kernel.perf_event_max_stack, 127 unless changed).
const MaxStackDepth = 127

// StackType is the type of a kernel or user stack depth frames deep.
func StackType(user bool, depth int) Type {
	if user {
		return Type{KindUStack, depth}
	}
	return Type{KindKStack, depth}
}

// IsStack reports whether t is a call stack.
func (t Type) IsStack() bool { return t.Kind == KindKStack || t.Kind == KindUStack }

// stackVar lowers a bare kstack or ustack: the deepest stack.
func (s *scope) stackVar(e *hclsyntax.ScopeTraversalExpr) Expr {
	if len(e.Traversal) != 1 {
		return s.errorf(e.Range(), "Unsupported traversal", "%s is a call stack; it has no fields.", e.Traversal.RootName())
	}
	user := e.Traversal.RootName() == "ustack"
	return &Stack{exprBase: s.base(e, StackType(user, MaxStackDepth)), User: user, Depth: MaxStackDepth}
}

// stackCall lowers kstack(N) and ustack(N): a stack at most N frames deep.
func (s *scope) stackCall(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) != 1 {
		return s.errorf(e.Range(), "Wrong number of arguments",
			"%s takes the most frames to keep, from 1 to %d: %s(20). Without it (%s) the stack is %d frames deep at most.",
			e.Name, MaxStackDepth, e.Name, e.Name, MaxStackDepth)
	}
	n, ok := s.smallInt(e.Args[0], 1, MaxStackDepth)
	if !ok {
		return &invalid{exprBase{rng: e.Range()}}
	}
	user := e.Name == "ustack"
	return &Stack{exprBase: s.base(e, StackType(user, int(n))), User: user, Depth: int(n)}
}

// stackMisuse reports a stack used as something it is not, and says what
// a stack is for; it returns whether it did.
func (s *scope) stackMisuse(x Expr, what string) bool {
	if isInvalid(x) || !x.Type().IsStack() {
		return false
	}
	s.errorf(x.Range(), "Stack used as a value",
		"%s is a %s: an id the kernel gives a recorded call stack, which %s cannot use. A stack is a key (by = [kstack]), an event field, a saved value or a table's value; show prints it symbolized.",
		x.Text(), x.Type(), what)
	return true
}

// perfEventNames are the events a profile probe samples on: "auto", and
// bpf.PerfEvents' names and aliases.
func perfEventNames() []string {
	out := []string{"auto"}
	for _, e := range bpf.PerfEvents {
		out = append(out, e.Name)
		if e.Alias != "" {
			out = append(out, e.Alias)
		}
	}
	return out
}

// Profile sampling limits: frequency in Hz per CPU, period_ns in
// nanoseconds, period in occurrences of a counting event. 100000 Hz is
// the kernel's default perf_event_max_sample_rate; the CPU clock fires at
// most every 10 µs.
const (
	MaxFrequency = 100000
	MinPeriodNS  = 10_000
	MaxPeriodNS  = 10_000_000_000
	MaxPeriod    = 1 << 40
)

// Limits of stack_entries, the distinct stacks a profile's stack map
// holds: a user stack of 127 frames takes 8 KiB once stored (every entry
// preallocated before Linux 6.1), so 1,048,576 is already 8 GiB; the
// compiler refuses less than that, by the memory of the probe's maps.
const (
	MinStackEntries = 64
	MaxStackEntries = 1 << 20
)

// profileAttr decodes an attribute of a profile probe.
func (d *decoder) profileAttr(p *Probe, attr *hcl.Attribute) {
	switch attr.Name {
	case "frequency":
		p.SampleRange = attr.Expr.Range()
		if n, ok := d.intAttr(attr, 1, MaxFrequency); ok {
			p.Frequency = n
		}
	case "period_ns":
		p.SampleRange = attr.Expr.Range()
		if n, ok := d.intAttr(attr, MinPeriodNS, MaxPeriodNS); ok {
			p.PeriodNS = n
		}
	case "period":
		p.SampleRange = attr.Expr.Range()
		if n, ok := d.intAttr(attr, 1, MaxPeriod); ok {
			p.Period = n
		}
	case "stack_entries":
		p.StackEntriesRange = attr.Expr.Range()
		if n, ok := d.intAttr(attr, MinStackEntries, MaxStackEntries); ok {
			p.StackEntries = n
		}
	case "one_cpu":
		p.OneCPURange = attr.Expr.Range()
		p.OneCPU = d.boolAttr(attr)
	case "event":
		p.PerfEventRange = attr.Expr.Range()
		if s, ok := d.stringAttr(attr); ok {
			p.PerfEvent = s
			if _, known := bpf.LookupPerfEvent(s); !known && s != "auto" {
				d.errorf(attr.Expr.Range(), "Unknown profile event",
					"%q is not an event a profile probe samples on.%s Use \"cpu-clock\" (a timer on every CPU), \"cycles\" (the CPU's hardware cycle counter), \"auto\" (cycles where the machine has them, else cpu-clock), a software event the kernel counts (\"page-faults\", \"context-switches\", \"cpu-migrations\"...) or a hardware one (\"instructions\", \"cache-misses\"...): bpftrace's software: and hardware: event names and aliases.",
					s, nearestName(s, perfEventNames()))
			}
		}
	}
}

// checkProfile checks that a profile probe says how often to sample: one
// of frequency, period_ns (a clock event's) and period (a counting
// event's).
func (d *decoder) checkProfile(p *Probe, b *hcl.Block, content *hcl.BodyContent) {
	var given []*hcl.Attribute
	for _, name := range []string{"frequency", "period_ns", "period"} {
		if a := content.Attributes[name]; a != nil {
			given = append(given, a)
		}
	}
	slices.SortFunc(given, func(a, b *hcl.Attribute) int { return a.Range.Start.Byte - b.Range.Start.Byte })
	switch {
	case len(given) > 1:
		d.errorf(given[1].NameRange, "Sampling rate given twice",
			"%s is already set at %s. A profile probe samples either at a frequency (frequency = 99, Hz per CPU), at a period of time (period_ns = 10000000) or every N events it counts (period = 100): keep one.",
			given[0].Name, pos(given[0].NameRange))
	case len(given) == 0:
		d.errorf(b.DefRange, "Missing required argument",
			"profile probes need how often to sample each CPU: frequency = 99 (Hz), period_ns = 10000000, or for an event that counts occurrences period = N. Add one to the probe block.")
	}
	ev, known := bpf.LookupPerfEvent(p.PerfEvent)
	clock := p.PerfEvent == "auto" || known && ev.Clock
	if period := content.Attributes["period_ns"]; period != nil && !clock && known {
		if ev.Name == "cpu-cycles" {
			d.errorf(period.NameRange, "Period of a cycle counter",
				"period_ns is time, and event = %q counts CPU cycles, whose rate varies: sample cycles at a frequency (frequency = 99) or every N of them (period = 1000000), or time with event = \"cpu-clock\".", p.PerfEvent)
		} else {
			d.errorf(period.NameRange, "Period of a counting event",
				"period_ns is time, and event = %q counts occurrences: sample every N of them (period = %d, bpftrace's default for it) or at a frequency (frequency = 99).", p.PerfEvent, ev.DefaultPeriod)
		}
	}
	if period := content.Attributes["period"]; period != nil && clock {
		d.errorf(period.NameRange, "Period of a clock event",
			"period counts occurrences, and event = %q counts time: give the time between samples as period_ns = 10000000, or a frequency (frequency = 99).", p.PerfEvent)
	}
}
