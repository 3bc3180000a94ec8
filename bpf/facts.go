package bpf

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Arch is a CPU architecture as the kernel's uname reports it, normalised.
type Arch string

// The architectures probectl generates code for.
const (
	ArchX86_64 Arch = "x86_64"
	ArchArm64  Arch = "arm64"
)

// Version is a kernel version.
type Version struct {
	Major, Minor, Patch int
}

// ParseVersion parses "6.12.117", "6.12", or a uname release such as
// "6.1.0-50-amd64" (the distribution suffix is ignored).
func ParseVersion(s string) (Version, error) {
	var v Version
	head := s
	if i := strings.IndexAny(head, "-+~ "); i >= 0 {
		head = head[:i]
	}
	parts := strings.Split(head, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("kernel version %q: want MAJOR.MINOR[.PATCH]", s)
	}
	nums := []*int{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Version{}, fmt.Errorf("kernel version %q: %q is not a number", s, p)
		}
		*nums[i] = n
	}
	return v, nil
}

func (v Version) String() string {
	if v.Patch == 0 {
		return fmt.Sprintf("%d.%d", v.Major, v.Minor)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// MarshalText implements encoding.TextMarshaler.
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Version) UnmarshalText(b []byte) error {
	parsed, err := ParseVersion(string(b))
	if err != nil {
		return err
	}
	*v = parsed
	return nil
}

// FprobeBackend is how the kernel implements fprobe, the machinery behind
// the kprobe.multi link family.
type FprobeBackend string

// The fprobe backends.
const (
	// FprobeNone: CONFIG_FPROBE is off (or the kernel predates 5.18).
	FprobeNone FprobeBackend = "none"
	// FprobeRethook: 5.18 to 6.13, fprobe on an ftrace_ops, exits through rethook.
	FprobeRethook FprobeBackend = "rethook"
	// FprobeFgraph: 6.14 and later, fprobe rewritten on the function-graph tracer.
	FprobeFgraph FprobeBackend = "fgraph"
)

// Links says which link families the kernel can attach.
type Links struct {
	Kprobe        bool `json:"kprobe"`         // legacy kprobe/kretprobe (perf event)
	KprobeMulti   bool `json:"kprobe_multi"`   // kprobe.multi/kretprobe.multi, 5.18
	KprobeSession bool `json:"kprobe_session"` // kprobe.session, 6.10
	Fentry        bool `json:"fentry"`         // fentry/fexit trampolines
	// Fsession: fsession (7.0 on x86_64; arm64's JIT followed in
	// bpf-next early 2026, so 7.1 there [unchecked]), one trampoline
	// program for a function's entry and exit, with the session kfuncs;
	// detected by loading one.
	Fsession    bool `json:"fsession"`
	Uprobe      bool `json:"uprobe"`       // uprobe/uretprobe (perf event)
	UprobeMulti bool `json:"uprobe_multi"` // uprobe.multi, 6.6
	// UprobeSession: uprobe.session (6.13), one program for a user
	// function's entry and exit; derived from UprobeMulti and the version.
	UprobeSession bool `json:"uprobe_session"`
	Tracepoint    bool `json:"tracepoint"` // tracepoints through perf events
	// RawTracepoint: raw tracepoints (BPF_PROG_TYPE_RAW_TRACEPOINT, 4.17),
	// which run without a perf event and so without its skip while
	// another BPF program runs on the CPU.
	RawTracepoint bool `json:"raw_tracepoint"`
	// TPBtf: BTF-typed raw tracepoints (tp_btf, 5.5), whose programs read
	// the TP_PROTO parameters with their types; detected by loading one.
	TPBtf bool `json:"tp_btf"`
}

// Helpers says which helpers and kfuncs that probectl's code uses exist.
type Helpers struct {
	AttachCookie        bool `json:"attach_cookie"`          // bpf_get_attach_cookie on kprobe, uprobe, multi links (5.15)
	TracingAttachCookie bool `json:"tracing_attach_cookie"`  // bpf_get_attach_cookie on fentry/fexit (5.19)
	FuncArg             bool `json:"func_arg"`               // bpf_get_func_arg/ret on fentry/fexit (5.17)
	Ringbuf             bool `json:"ringbuf"`                // BPF_MAP_TYPE_RINGBUF (5.8)
	SessionKfuncs       bool `json:"session_kfuncs"`         // bpf_session_cookie, bpf_session_is_return (6.10)
	SessionKfuncsCtxArg bool `json:"session_kfuncs_ctx_arg"` // the 7.0 prototype that takes ctx in R1
}

// Perf says what profile probes can sample with, and how deep the kernel
// records stacks.
type Perf struct {
	// Link: BPF links on perf events (BPF_LINK_CREATE, 5.15), which attach
	// profile probes and can be pinned.
	Link bool `json:"link"`
	// Cycles: the machine has a hardware CPU cycle counter that can sample
	// (PERF_COUNT_HW_CPU_CYCLES). A property of the machine, not of the
	// kernel: profiles (which describe kernels) say false, and facts that
	// differ only in it are the same kernel.
	Cycles bool `json:"cycles"`
	// CyclesWhy says why there are no hardware cycles, when detected.
	CyclesWhy string `json:"cycles_why,omitempty"`
	// MaxStack is kernel.perf_event_max_stack, the deepest stack a stack
	// map may hold: 127 unless changed, 0 when unknown.
	MaxStack int `json:"max_stack,omitempty"`
}

// Facts describe a target kernel: everything the compiler needs to choose
// routes and generate code. Facts are a plain value: detected once, written
// to a file, embedded in plans and compared at apply time.
type Facts struct {
	// Source says where the facts came from: "live", "profile" or "file".
	Source string `json:"source"`
	// Name is the profile name, the file path, or the live kernel's release.
	Name    string  `json:"name"`
	Arch    Arch    `json:"arch"`
	Kernel  Version `json:"kernel"`
	Release string  `json:"release,omitempty"`
	BTF     bool    `json:"btf"`
	// ISAv4 is BPF ISA v4 (Linux 6.6): gotol, the jump with a 32-bit
	// offset, lets programs jump further than 32767 instructions.
	ISAv4 bool  `json:"isa_v4"`
	Links Links `json:"links"`
	// Fprobe is the backend of the kprobe.multi family.
	Fprobe FprobeBackend `json:"fprobe"`
	// FtraceWithRegs and FtraceWithArgs are CONFIG_DYNAMIC_FTRACE_WITH_REGS
	// and CONFIG_DYNAMIC_FTRACE_WITH_ARGS.
	FtraceWithRegs bool `json:"ftrace_with_regs"`
	FtraceWithArgs bool `json:"ftrace_with_args"`
	// FprobeEntryFastPath: entry-only fprobes use a plain ftrace_ops instead
	// of fgraph (6.19, on arches with WITH_REGS or WITH_ARGS).
	FprobeEntryFastPath bool    `json:"fprobe_entry_fast_path"`
	Helpers             Helpers `json:"helpers"`
	Perf                Perf    `json:"perf"`
	// CPUs is the number of possible CPUs, 0 when unknown (profiles).
	CPUs int `json:"cpus,omitempty"`
	// Functions lists the kernel functions that can be probed, sorted.
	// Empty when unknown: patterns then stay unresolved until apply.
	Functions []string `json:"functions,omitempty"`
	// Tracepoints holds the formats of the live kernel's tracepoints that
	// the specs use (read from tracefs), by "group:event".
	Tracepoints map[string]*TracepointFormat `json:"tracepoints,omitempty"`
	// Events lists the target's tracepoints ("group:event", sorted), for
	// resolving event globs; nil when unknown. A profile has its kernel's
	// in its capture of their formats instead.
	Events []string `json:"events,omitempty"`
	// TracepointFormats is every tracepoint's format, a capture
	// ([CaptureTracepoints]) gzipped: facts files carry the kernel's
	// (probectl target -o), and profiles embed theirs. It is unpacked when
	// a tracepoint is first asked for.
	TracepointFormats []byte `json:"tracepoint_formats,omitempty"`
	// formats indexes the capture: a profile's embedded one, or
	// TracepointFormats. Copies of the facts share it.
	formats *formatSet
	// KernelBTF is the target's raw vmlinux BTF, gzipped: facts files carry
	// it (probectl target -o); live facts read the kernel's when needed, and
	// profiles have none. [Facts.Types] parses it: set it before.
	KernelBTF []byte `json:"kernel_btf,omitempty"`
	// Root is the directory the target's files are seen under from here,
	// "" for "/": the node agent in a pod reads the host's binaries under
	// its -host-root (bpf/symbols' OpenIn resolves paths within it).
	Root string `json:"-"`
	// Binaries are the user binaries another node published, nil for a
	// target whose binaries are read from Root.
	Binaries Binaries `json:"-"`
	// LocalBTF says the target's kernel BTF is the running kernel's,
	// though the facts are not live: a node's NodeFacts whose BTF identity
	// is this machine's (fleet checks it). Reads through BTF are then
	// resolved with it rather than at apply.
	LocalBTF bool `json:"-"`
	// tracepointErrs holds the events whose formats could not be read.
	tracepointErrs map[string]error
	// types is the parsed BTF, shared by copies of the facts.
	types *typesCache
}

// Label is a short description such as "linux 6.12.117 x86_64 (live)".
func (f *Facts) Label() string {
	return fmt.Sprintf("linux %s %s (%s %s)", f.Kernel, f.Arch, f.Source, f.Name)
}

// Tracepoint returns the format of a "group:event" tracepoint. It returns
// an error wrapping [ErrNoTracepoint] when the target's kernel has no such
// event, [ErrFormatUnknown] when the target knows no formats (a facts file
// written without them), or why the format cannot be read.
func (f *Facts) Tracepoint(event string) (*TracepointFormat, error) {
	if tp := f.Tracepoints[event]; tp != nil {
		return tp, nil
	}
	if err := f.tracepointErrs[event]; err != nil {
		return nil, err
	}
	switch {
	case f.Source == "live":
		return nil, ErrNoTracepoint // LoadTracepoints read what tracefs has
	case f.formats != nil:
		return f.formats.format(event)
	case len(f.Events) > 0:
		if _, found := slices.BinarySearch(f.Events, event); !found {
			return nil, ErrNoTracepoint
		}
	}
	return nil, ErrFormatUnknown
}

// HasFunction reports whether the function list is known and has name.
func (f *Facts) HasFunction(name string) bool {
	i := sort.SearchStrings(f.Functions, name)
	return i < len(f.Functions) && f.Functions[i] == name
}

// Differences lists the facts in which f and other differ, ignoring where
// they came from, the patch level, the CPU count, the lists of functions
// and tracepoints, the BTF data, and what belongs to the machine or its
// settings (a hardware cycle counter, perf_event_max_stack). It is empty when a compiler would decide the same way on both.
func (f *Facts) Differences(other *Facts) []string {
	var diffs []string
	add := func(what string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			diffs = append(diffs, fmt.Sprintf("%s: %v, not %v", what, a, b))
		}
	}
	add("arch", f.Arch, other.Arch)
	add("kernel", fmt.Sprintf("%d.%d", f.Kernel.Major, f.Kernel.Minor), fmt.Sprintf("%d.%d", other.Kernel.Major, other.Kernel.Minor))
	add("btf", f.BTF, other.BTF)
	add("isa_v4", f.ISAv4, other.ISAv4)
	add("links", fmt.Sprintf("%+v", f.Links), fmt.Sprintf("%+v", other.Links))
	add("fprobe", f.Fprobe, other.Fprobe)
	add("ftrace_with_regs", f.FtraceWithRegs, other.FtraceWithRegs)
	add("ftrace_with_args", f.FtraceWithArgs, other.FtraceWithArgs)
	add("fprobe_entry_fast_path", f.FprobeEntryFastPath, other.FprobeEntryFastPath)
	add("helpers", fmt.Sprintf("%+v", f.Helpers), fmt.Sprintf("%+v", other.Helpers))
	add("perf_link", f.Perf.Link, other.Perf.Link)
	return diffs
}

// MaxCPUs bounds the CPU count of a facts file (CONFIG_NR_CPUS is at most
// 8192), which multiplies the memory of per-CPU maps.
const MaxCPUs = 1 << 16

// MaxFactsFile bounds a facts file: the functions of a kernel take a few
// MB, its BTF (gzipped, base64) a few more.
const MaxFactsFile = 256 << 20

// ReadFactsFile reads facts written by "probectl target -o FILE". It must
// be a regular file; nothing blocks.
func ReadFactsFile(path string) (*Facts, error) {
	b, err := ReadRegular(path, MaxFactsFile)
	if err != nil {
		return nil, fmt.Errorf("read facts: %w", err)
	}
	return ParseFacts(b, path)
}

// ParseFacts reads facts as "probectl target -o" writes them from b (a
// file's contents, or the facts a node published in the cluster); name
// says where they came from. The facts' Source becomes "file".
func ParseFacts(b []byte, name string) (*Facts, error) {
	path := name
	if len(b) > MaxFactsFile {
		return nil, fmt.Errorf("read facts %s: %d bytes; at most %d", path, len(b), MaxFactsFile)
	}
	var f Facts
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("read facts %s: %w", path, err)
	}
	if f.Arch != ArchX86_64 && f.Arch != ArchArm64 {
		return nil, fmt.Errorf("read facts %s: unsupported arch %q", path, f.Arch)
	}
	if f.CPUs < 0 || f.CPUs > MaxCPUs {
		return nil, fmt.Errorf("read facts %s: %d CPUs; Linux has at most %d", path, f.CPUs, MaxCPUs)
	}
	for ev, tp := range f.Tracepoints {
		if tp == nil {
			return nil, fmt.Errorf("read facts %s: tracepoint %s has no format", path, ev)
		}
		for i := range tp.Fields {
			fl := &tp.Fields[i]
			fl.Class = ClassifyField(fl.Type, fl.Size)
			if err := fl.check(); err != nil {
				return nil, fmt.Errorf("read facts %s: tracepoint %s: %w", path, ev, err)
			}
		}
	}
	if len(f.KernelBTF) > MaxKernelBTF {
		return nil, fmt.Errorf("read facts %s: kernel BTF of %d bytes; at most %d", path, len(f.KernelBTF), MaxKernelBTF)
	}
	sort.Strings(f.Functions)
	sort.Strings(f.Events)
	if gz := f.TracepointFormats; len(gz) > 0 {
		f.formats = newFormatSet("the tracepoint formats of "+path, func() ([]byte, error) { return gz, nil })
	}
	f.Source, f.Name = "file", path
	return f.shareTypes(), nil
}

// WriteFile writes the facts as indented JSON.
func (f *Facts) WriteFile(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return WriteNew(path, append(b, '\n'), 0o644)
}

// Derive fills in the facts that follow from others: the fprobe backend and
// its entry-only fast path. Detection and profiles both call it, so the rule
// lives in one place.
func (f *Facts) Derive() {
	switch {
	case !f.Links.KprobeMulti:
		f.Fprobe = FprobeNone
	case f.Kernel.AtLeast(6, 14):
		f.Fprobe = FprobeFgraph
	default:
		f.Fprobe = FprobeRethook
	}
	// "tracing: fprobe: optimization for entry only case" and its WITH_ARGS
	// follow-up, both in 6.19.
	f.FprobeEntryFastPath = f.Fprobe != FprobeNone && f.Kernel.AtLeast(6, 19) &&
		(f.FtraceWithRegs || f.FtraceWithArgs)
	// "uprobe, bpf: Add session support" (BPF_TRACE_UPROBE_SESSION), 6.13.
	f.Links.UprobeSession = f.Links.UprobeMulti && f.Kernel.AtLeast(6, 13)
}
