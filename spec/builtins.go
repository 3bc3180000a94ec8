package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/probectl/probectl/bpf"
)

// The built-in values, one entry each: what the spec language checks, the
// README lists, the diagnostics name and a bpftrace user's spelling maps
// to. The compiler holds each value's code under the same name (its
// builtinCode), and a test holds the two tables to each other.

// Form is how a built-in name is written.
type Form int

const (
	// FormValue is a plain value: pid, ret.
	FormValue Form = iota
	// FormRoot is the root of a path: task.FIELD, args.FIELD, entry.NAME.
	FormRoot
	// FormStack is a stack, bare or with a depth: kstack, ustack(N).
	FormStack
)

// Phase is the handler a value exists in.
type Phase int

const (
	// Anywhere: on_entry and on_exit.
	Anywhere Phase = iota
	// EntryOnly: on_entry (the argument registers are overwritten by the
	// time the function returns).
	EntryOnly
	// ExitOnly: on_exit.
	ExitOnly
)

// Refusal is the error a use of a value gets where it does not exist. In
// both texts {name} stands for the value's name, {kinds} for the probe
// kinds that have it and {profile} for the values a profile probe has.
type Refusal struct{ Summary, Detail string }

// Builtin is one built-in value of the spec language.
type Builtin struct {
	// Name is what a spec writes (the root, for a path or a stack).
	Name string
	// Written is how the README and the lists name it, when not Name
	// (arg0..arg5, task.FIELD).
	Written string
	Form    Form
	// Phase is the handler it exists in.
	Phase Phase
	// Type is its type in the spec; TypeTarget when the target's BTF
	// types it (TargetTyped says on which probes, if not all).
	Type        Type
	TargetTyped []bpf.Kind
	// Refused says, per probe kind that lacks the value, what to write.
	Refused map[bpf.Kind]Refusal
	// PhaseRefusal is the error outside its Phase.
	PhaseRefusal Refusal
	// Path is the kernel data the value reads, from the current task, by
	// field names resolved against the target's BTF (ppid:
	// real_parent.tgid); nil for a value a helper or the context gives.
	Path []string
	// Since is the oldest kernel that has it (its helper's), zero for
	// every kernel probectl runs on.
	Since bpf.Version
	// Helper is the BPF helper that reads it, for the documentation.
	Helper string
	// NonNegative: the value is never negative, so a sum of it is a counter.
	NonNegative bool
	// Named: the value compares with a name literal, which the compiler
	// turns into its index (func == "vfs_read"; FuncName, EventName).
	Named bool
	// Register: on kernel probes the value is a whole register, which may
	// hold a pointer to cast (cast(arg0, "struct NAME").FIELD).
	Register bool
	// USDTOnly: only a USDT probe (a user probe with usdt) has the value.
	USDTOnly bool
	// Doc says what it is, in one line of the README.
	Doc string
	// Bpftrace is bpftrace's spelling of the value; BpftraceHint, when
	// that differs from Name, what the error for it says probectl writes.
	Bpftrace, BpftraceHint string
}

// Refusals shared by several values.
var (
	noFunction = Refusal{"{name} is not available",
		"A profile probe samples whatever each CPU is running: there is no probed function, so no {name}. It has {profile}."}
	noEvent = Refusal{"event is for tracepoints",
		"event says which of a tracepoint probe's events fired; a profile probe samples one perf event on every CPU."}
)

// MaxUSDTArgs is how many arguments a USDT probe can have: sys/sdt.h's
// STAP_PROBE12.
const MaxUSDTArgs = 12

// argEntries are arg0 to arg5, the argument registers, and arg6 to
// arg11, a USDT probe's further arguments.
func argEntries() []*Builtin {
	var out []*Builtin
	for n := range 6 {
		out = append(out, &Builtin{
			Name: fmt.Sprintf("arg%d", n), Written: "arg0..arg5", Type: TypeInt, Register: true,
			Refused: map[bpf.Kind]Refusal{
				bpf.KindProfile:    noFunction,
				bpf.KindTracepoint: {"argN is not for tracepoints", "Tracepoints have named fields: use args.FIELD."},
			},
			Phase: EntryOnly,
			PhaseRefusal: Refusal{"Arguments are gone in on_exit",
				"Argument registers are overwritten by the time the function returns. Save it in on_entry (save = { {name} = {name} }) and read entry.{name}."},
			Doc:      "the function's arguments, whole registers; a USDT probe's, as its note types them",
			Bpftrace: fmt.Sprintf("arg%d", n),
		})
	}
	for n := 6; n < MaxUSDTArgs; n++ {
		b := *out[0]
		b.Name, b.Written, b.Bpftrace, b.USDTOnly = fmt.Sprintf("arg%d", n), fmt.Sprintf("arg6..arg%d", MaxUSDTArgs-1), fmt.Sprintf("arg%d", n), true
		b.Refused = map[bpf.Kind]Refusal{
			bpf.KindKernel:     noArgRegister,
			bpf.KindProfile:    noFunction,
			bpf.KindTracepoint: {"argN is not for tracepoints", "Tracepoints have named fields: use args.FIELD."},
		}
		b.Doc = "a USDT probe's further arguments, as its note types them"
		out = append(out, &b)
	}
	return out
}

// noArgRegister refuses arg6 and above where they would be a function's:
// past the sixth, arguments are on the stack.
var noArgRegister = Refusal{"{name} is for USDT probes",
	"A function's arguments past the sixth are on the stack, which arg0 to arg5 do not reach; arg6 to arg11 are a USDT probe's further arguments (usdt = \"provider:name\")."}

// podEntries are pod, namespace, container and node: names of the task's
// cgroup. The kernel keys by the cgroup's id; user space names it when
// results are read (internal/pods: from the cgroup's path, and the API
// server's pods of the node the agent watches).
func podEntries() []*Builtin {
	docs := []struct{ name, doc string }{
		{"pod", "the task's pod, by its cgroup: its name (its UID without the node agent), \"\" outside pods; the key is the cgroup ID, named when read; in when, compared with a name against the node's pods"},
		{"namespace", "the task's pod's namespace (\"\" without the node agent or outside pods)"},
		{"container", "the task's container in its pod: its name (its ID without the node agent)"},
		{"node", "the node the task runs on: $NODE_NAME, else the host's name"},
	}
	var out []*Builtin
	for _, d := range docs {
		out = append(out, &Builtin{Name: d.name, Type: TypeInt, NonNegative: true, Helper: "bpf_get_current_cgroup_id", Doc: d.doc})
	}
	return out
}

// builtinList is every built-in value, in the order the README and the
// diagnostics list them.
var builtinList = slices.Concat([]*Builtin{
	{Name: "pid", Type: TypeInt, NonNegative: true, Helper: "bpf_get_current_pid_tgid",
		Doc: "the process ID (the kernel's tgid)", Bpftrace: "pid"},
	{Name: "tid", Type: TypeInt, NonNegative: true, Helper: "bpf_get_current_pid_tgid",
		Doc: "the thread ID (the kernel's pid)", Bpftrace: "tid"},
	{Name: "ppid", Type: TypeInt, NonNegative: true, Path: []string{"real_parent", "tgid"},
		Refused: map[bpf.Kind]Refusal{bpf.KindUser: {"ppid is for kernel data",
			"ppid reads the current task's parent through the kernel's BTF: {kinds} probes have it."}},
		Doc: "the parent's process ID (task.real_parent.tgid)", Bpftrace: "curtask->real_parent->tgid"},
	{Name: "uid", Type: TypeInt, NonNegative: true, Helper: "bpf_get_current_uid_gid",
		Doc: "the user ID", Bpftrace: "uid"},
	{Name: "gid", Type: TypeInt, NonNegative: true, Helper: "bpf_get_current_uid_gid",
		Doc: "the group ID", Bpftrace: "gid"},
	{Name: "cpu", Type: TypeInt, NonNegative: true, Helper: "bpf_get_smp_processor_id",
		Doc: "the CPU the probe runs on", Bpftrace: "cpu"},
	{Name: "numaid", Type: TypeInt, NonNegative: true, Helper: "bpf_get_numa_node_id",
		Doc: "the NUMA node of the CPU the probe runs on", Bpftrace: "numaid"},
	{Name: "cgroup", Type: TypeInt, NonNegative: true, Helper: "bpf_get_current_cgroup_id",
		Doc: "the task's cgroup v2 ID; cgroup_path(cgroup) shows its path", Bpftrace: "cgroupid",
		BpftraceHint: "cgroup (the current task's cgroup v2 id), shown by path with cgroup_path(cgroup)"},
}, podEntries(), []*Builtin{
	{Name: "comm", Type: TypeComm, Helper: "bpf_get_current_comm",
		Doc: "the task's name, 16 bytes", Bpftrace: "comm"},
	{Name: "cwd", Type: StringType(CwdSize),
		Refused: map[bpf.Kind]Refusal{bpf.KindUser: {"cwd is for kernel data",
			"cwd walks the current task's working directory through the kernel's BTF: {kinds} probes have it."}},
		Doc:      fmt.Sprintf("the task's working directory, its full path across mounts (at most %d components; task.fs.pwd walked)", CwdDepth),
		Bpftrace: "curtask->fs->pwd", BpftraceHint: "cwd: the task's working directory as a path (task.fs.pwd walked up to the root)"},
	{Name: "func", Type: TypeInt, NonNegative: true, Named: true,
		Refused: map[bpf.Kind]Refusal{
			bpf.KindProfile: noFunction,
			bpf.KindTracepoint: {"func is not for tracepoints",
				"func names the probed function of kernel and user probes; a tracepoint probe has event, which of its events fired."},
		},
		Doc: "which of the probe's functions fired; compares with a name (func == \"calloc\")", Bpftrace: "probe",
		BpftraceHint: "func (kernel and user probes: which function fired) or event (tracepoint probes: which event)"},
	{Name: "event", Type: TypeInt, NonNegative: true, Named: true,
		Refused: map[bpf.Kind]Refusal{
			bpf.KindProfile: noEvent,
			bpf.KindKernel:  {"event is for tracepoints", "event says which of a tracepoint probe's events fired; kernel and user probes have func."},
			bpf.KindUser:    {"event is for tracepoints", "event says which of a tracepoint probe's events fired; kernel and user probes have func."},
		},
		Doc: "which of the probe's events fired; compares with a name (event == \"sched:sched_wakeup\")", Bpftrace: "probe"},
	{Name: "ktime", Type: TypeInt, NonNegative: true, Helper: "bpf_ktime_get_ns",
		Doc: "nanoseconds since boot", Bpftrace: "nsecs", BpftraceHint: "ktime: nanoseconds since boot (bpf_ktime_get_ns)"},
	{Name: "elapsed", Type: TypeInt, NonNegative: true, Helper: "bpf_ktime_get_ns",
		Doc: "nanoseconds since the probe was loaded (ktime less the load's ktime)", Bpftrace: "elapsed"},
	{Name: "jiffies", Type: TypeInt, NonNegative: true, Helper: "bpf_jiffies64", Since: bpf.Version{Major: 5, Minor: 5},
		Doc: "the kernel's tick count (jiffies_64), as /proc/timer_list shows it", Bpftrace: "jiffies"},
}, argEntries(), []*Builtin{
	{Name: "ret", Type: TypeInt, TargetTyped: []bpf.Kind{bpf.KindKernel}, Register: true,
		Refused: map[bpf.Kind]Refusal{
			bpf.KindProfile:    noFunction,
			bpf.KindTracepoint: {"ret is not available", "Tracepoints have no return value; read args.ret of a sys_exit_* event instead."},
		},
		Phase:        ExitOnly,
		PhaseRefusal: Refusal{"ret is only for on_exit", "The return value exists only when the function returns. Move this into on_exit."},
		Doc:          "the return value; typed by BTF on kernel probes", Bpftrace: "retval",
		BpftraceHint: "ret: the return value, in on_exit"},
	{Name: "kstack", Form: FormStack, Doc: "the kernel's call stack; kstack(N) keeps N frames", Bpftrace: "kstack"},
	{Name: "ustack", Form: FormStack, Doc: "the process's call stack; ustack(N) keeps N frames", Bpftrace: "ustack"},
	{Name: "entry", Written: "entry.NAME", Form: FormRoot, Phase: ExitOnly,
		Doc: "what on_entry saved", Bpftrace: "@start[tid]"},
	{Name: "args", Written: "args.FIELD", Form: FormRoot,
		Refused: map[bpf.Kind]Refusal{
			bpf.KindProfile: {"args is not available",
				"A profile probe samples whatever each CPU is running: there is no probed function or event, so no arguments. It has {profile}."},
			bpf.KindUser: {"args.NAME needs BTF", "User functions have no BTF to name their arguments: read them as arg0 to arg5."},
		},
		Doc: "a tracepoint's field, or a kernel function's argument by name (BTF)", Bpftrace: "args.FIELD"},
	{Name: "task", Written: "task.FIELD", Form: FormRoot,
		Refused: map[bpf.Kind]Refusal{bpf.KindUser: {"task is for kernel data",
			"task is the current task_struct, read through the kernel's BTF: {kinds} probes have it."}},
		Doc: "the current task_struct, read field by field (task.real_parent.comm)", Bpftrace: "curtask",
		BpftraceHint: "task: the current task_struct, read field by field (task.real_parent.tgid)"},
})

// builtinByName holds builtinList's entries by name.
var builtinByName = func() map[string]*Builtin {
	m := map[string]*Builtin{}
	for _, b := range builtinList {
		m[b.Name] = b
	}
	return m
}()

// Builtins returns every built-in value, in the order the README lists
// them. The entries are the table's own: read them, never change them.
func Builtins() []*Builtin { return slices.Clone(builtinList) }

// LookupBuiltin returns the built-in value called name, or nil.
func LookupBuiltin(name string) *Builtin { return builtinByName[name] }

// Has reports whether a probe of kind has the value: it is not refused
// there, and the probe has the handler it exists in.
func (b *Builtin) Has(kind bpf.Kind) bool {
	_, refused := b.Refused[kind]
	_, entryOnly := noExit[kind] // the kinds without on_exit (decode.go)
	return !refused && !(b.Phase == ExitOnly && entryOnly)
}

// TypeIn is the value's type in a probe of kind.
func (b *Builtin) TypeIn(kind bpf.Kind) Type {
	if slices.Contains(b.TargetTyped, kind) {
		return TypeTarget
	}
	return b.Type
}

// KindsWith lists the probe kinds that have the value, for messages
// ("kernel, tracepoint and profile").
func (b *Builtin) KindsWith() string {
	var ks []string
	for _, k := range bpf.Kinds {
		if b.Has(k) {
			ks = append(ks, string(k))
		}
	}
	return andList(ks)
}

// expand fills a refusal's placeholders for b.
func (b *Builtin) expand(text string) string {
	return strings.NewReplacer("{name}", b.Name, "{kinds}", b.KindsWith(), "{profile}", valuesOf(bpf.KindProfile, false)).Replace(text)
}

// valuesOf lists the built-in values a probe of kind has, written as the
// README does (arg0..arg5 once), in backticks for markdown.
func valuesOf(kind bpf.Kind, markdown bool) string {
	var names []string
	for _, b := range builtinList {
		w := b.written()
		if markdown {
			w = "`" + w + "`"
		}
		if b.Has(kind) && !slices.Contains(names, w) {
			names = append(names, w)
		}
	}
	return andList(names)
}

// written is how lists name the value.
func (b *Builtin) written() string {
	if b.Written != "" {
		return b.Written
	}
	return b.Name
}

// andList joins "a, b and c".
func andList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// bpftraceSpellings maps bpftrace's spelling of a value probectl names
// otherwise to what the hint says.
var bpftraceSpellings = func() map[string]string {
	m := map[string]string{}
	for _, b := range builtinList {
		if b.BpftraceHint != "" {
			m[b.Bpftrace] = b.BpftraceHint
		}
	}
	return m
}()
