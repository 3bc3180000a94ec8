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
// it as kernel memory still reads where a process pointed it. kaddr (a
// kernel variable's address) and kernel_u64 (8 bytes at any address) are
// refused outright.
const RawAddress DenyClass = "raw-address"

// The classes a tenant's specs are put under ([TenantPolicy]), besides
// RawAddress: what reads another task's data, or kernel addresses, or
// runs where no task's cgroup says whose work it is.
const (
	// KernelStack is kstack: kernel return addresses (they locate the
	// kernel in memory, defeating KASLR) and the kernel's work on a
	// task's behalf.
	KernelStack DenyClass = "kernel-stack"
	// KernelData is kernel data read through BTF from the current task:
	// task.FIELD and ppid. The task_struct holds kernel pointers and leads
	// through them to other tasks (real_parent, the parent's pid outside
	// the pod, its mm, its files).
	KernelData DenyClass = "kernel-data"
	// NodeWide is a probe whose programs run for whatever task a CPU was
	// running: kernel function probes (they run in interrupts and softirqs
	// and on behalf of other tasks), tracepoints outside syscalls:* and
	// raw_syscalls:* (a block completion, a wakeup of another task, a
	// packet), and profile probes (every CPU sampled). No filter by the
	// current task's cgroup keeps those to one namespace's tasks.
	NodeWide DenyClass = "node-wide"
)

// DenyClassDoc is a class and what it refuses, for help and errors.
type DenyClassDoc struct {
	Class   DenyClass
	Refuses string
}

// DenyClasses lists the classes, each with what it refuses.
var DenyClasses = []DenyClassDoc{
	{RawAddress, "reading kernel memory at an address that is not kernel data typed by BTF, kaddr and kernel_u64"},
	{KernelStack, "kernel call stacks (kstack): kernel addresses"},
	{KernelData, "the current task's kernel data (task.FIELD, ppid), which leads to other tasks'"},
	{NodeWide, "probes that run for whatever task a CPU runs: kernel functions, tracepoints outside syscalls:* and raw_syscalls:*, profiles"},
}

// Policy is the set of classes refused; the zero Policy refuses nothing.
// A tenant's policy ([TenantPolicy]) also names its namespace: the
// compiler then filters every program to the tasks of that namespace's
// pods.
type Policy struct {
	deny      []DenyClass
	namespace string
}

// TenantPolicy is the policy of a namespace's specs (a namespaced
// ProbeSet): every class refused, and the programs filtered in the
// kernel to the tasks of the namespace's pods.
func TenantPolicy(namespace string) Policy {
	p := Policy{namespace: namespace}
	for _, c := range DenyClasses {
		p.deny = append(p.deny, c.Class)
	}
	return p
}

// Tenant is the namespace the policy keeps the probes to, "" for none
// (node-wide).
func (p Policy) Tenant() string { return p.namespace }

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
	for _, pr := range cfg.Probes {
		if p.Denies(NodeWide) {
			diags = append(diags, nodeWide(p, pr)...)
		}
		for _, x := range pr.Exprs() {
			Walk(x, func(x Expr) {
				if d := p.refused(pr, x); d != nil {
					diags = append(diags, d)
				}
			})
		}
	}
	return diags
}

// refused is the diagnostic for x in probe pr under p, else nil.
func (p Policy) refused(pr *Probe, x Expr) *hcl.Diagnostic {
	if p.Denies(RawAddress) {
		if d := rawAddress(pr, x); d != nil {
			return d
		}
	}
	switch x := x.(type) {
	case *Stack:
		if !x.User && p.Denies(KernelStack) {
			return p.refuse(KernelStack, x.Range(), "kstack is the kernel's return addresses, which locate the kernel in memory",
				"Count by ustack (the process's own stack) instead")
		}
	case *KernelPath:
		if x.Root == RootTask && p.Denies(KernelData) {
			return p.refuse(KernelData, x.Range(), x.Text()+" reads the current task's kernel data, whose pointers lead to other tasks' data and are kernel addresses",
				"Use the values the task's own context gives: pid, tid, uid, gid, comm, cgroup")
		}
	case *Var:
		if x.Name == "ppid" && p.Denies(KernelData) {
			return p.refuse(KernelData, x.Range(), "ppid reads the parent task (task.real_parent.tgid), which may be outside the namespace's pods",
				"Use pid and tid, the task's own")
		}
	}
	return nil
}

// nodeWide is the diagnostics of probe pr when its programs run for
// whatever task a CPU runs (class NodeWide).
func nodeWide(p Policy, pr *Probe) hcl.Diagnostics {
	var diags hcl.Diagnostics
	switch pr.Addr.Kind {
	case bpf.KindKernel, bpf.KindProfile:
		why := "a kernel function runs in interrupts and softirqs and on behalf of other tasks, for whatever task the CPU was running"
		if pr.Addr.Kind == bpf.KindProfile {
			why = "a profile probe samples whatever every CPU runs"
		}
		diags = append(diags, p.refuse(NodeWide, pr.DeclRange, why,
			"Trace the namespace's tasks through their system calls (a tracepoint probe on syscalls:*) or their own functions (a user probe)"))
	case bpf.KindTracepoint:
		for _, ev := range pr.Events {
			if !taskTracepoint(ev.Text) {
				diags = append(diags, p.refuse(NodeWide, ev.Range, fmt.Sprintf("the tracepoint %s may fire for whatever task a CPU runs, or describe another task", ev.Text),
					"Only syscalls:* and raw_syscalls:* events run in the calling task's own context"))
			}
		}
	}
	return diags
}

// taskTracepoint reports whether event (a name or glob) is a system call
// tracepoint, which fires in the calling task's own context.
func taskTracepoint(event string) bool {
	return strings.HasPrefix(event, "syscalls:") || strings.HasPrefix(event, "raw_syscalls:")
}

// refuse is the diagnostic of class c at rng: why says what the construct
// reads, fix what to write instead.
func (p Policy) refuse(c DenyClass, rng hcl.Range, why, fix string) *hcl.Diagnostic {
	scope := fmt.Sprintf("the policy (-deny %s) refuses it", c)
	if p.namespace != "" {
		scope = fmt.Sprintf("a namespaced ProbeSet (namespace %s) is kept to its own pods' tasks, and its policy (class %s) refuses it; node-wide tracing is a ClusterProbeSet's, for cluster admins", p.namespace, c)
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: denySummary[c], Subject: &rng,
		Detail: fmt.Sprintf("%s: %s. %s.", why, scope, fix)}
}

// denySummary is each class's diagnostic summary.
var denySummary = map[DenyClass]string{
	RawAddress:  "Raw address denied",
	KernelStack: "Kernel stack denied",
	KernelData:  "Kernel data denied",
	NodeWide:    "Node-wide probe denied",
}

// rawAddress is the diagnostic for x when x reads kernel memory at an
// address that is not kernel data named through BTF, else nil.
func rawAddress(p *Probe, x Expr) *hcl.Diagnostic {
	var addr Expr
	var what string
	switch x := x.(type) {
	case *KernelAddr:
		rng := x.Range()
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: denySummary[RawAddress], Subject: &rng,
			Detail: fmt.Sprintf("kaddr(%q) is a kernel address (it defeats KASLR) and leads kernel_u64 to any kernel variable: the policy (-deny %s) refuses it. "+
				"Read kernel data by name instead: args.NAME, task and their fields (or drop -deny %s).", x.Symbol, RawAddress, RawAddress)}
	case *KernelRead:
		viaKaddr := false
		Walk(x.X, func(y Expr) {
			_, ok := y.(*KernelAddr)
			viaKaddr = viaKaddr || ok
		})
		if viaKaddr {
			return nil // refused at the kaddr
		}
		return DenyRawAddress("kernel_u64", x.X, "an address that is not kernel data typed by BTF")
	case *KernelPath:
		if x.Root != RootCast || x.Space == SpaceUser {
			return nil // user_cast reads user memory
		}
		addr, what = x.Base, "cast"
	case *Buf:
		if !readsKernel(p, &Str{X: x.X, Space: x.Space}) {
			return nil
		}
		if _, ok := x.X.(*KernelPath); ok {
			return nil
		}
		return DenyRawAddress("buf", x.X, "not kernel data typed by BTF")
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
// address fn ("cast", "str", "kernel_str", "kernel_u64") reads kernel
// memory at; why says what addr is.
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
