package compiled

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/sys"
)

// Family is a link family: the kind of link a program is attached with.
type Family string

// Link families, as plans name them.
const (
	FamilyKprobeMulti    Family = "kprobe.multi"
	FamilyKretprobeMulti Family = "kretprobe.multi"
	FamilyKprobeSession  Family = "kprobe.session"
	FamilyFentry         Family = "fentry"
	FamilyFexit          Family = "fexit"
	FamilyFsession       Family = "fsession" // one trampoline program for entry and exit (7.0 on x86_64, later on arm64)
	FamilyKprobe         Family = "kprobe"
	FamilyKretprobe      Family = "kretprobe"
	FamilyUprobeMulti    Family = "uprobe.multi"
	FamilyUretprobeMulti Family = "uretprobe.multi"
	FamilyUprobeSession  Family = "uprobe.session"
	FamilyUprobe         Family = "uprobe"
	FamilyUretprobe      Family = "uretprobe"
	FamilyTracepoint     Family = "tracepoint"     // a perf event on the tracepoint
	FamilyRawTracepoint  Family = "raw_tracepoint" // the tracepoint's BPF hook, without a perf event
	FamilyTPBtf          Family = "tp_btf"         // that hook with typed TP_PROTO parameters, a program per event
	FamilyPerfEvent      Family = "perf_event"     // one BPF link per CPU's perf event
)

// FamilyInfo is what a link family is, the one place that says it: the
// compiler builds programs from it, the plan counts links by it, the
// runtime attaches by it (an attacher per family) and the displays name
// its fact. A new family is one entry here, its attacher in runtime, and
// where it is a kernel-function route, its figures in routecost.json;
// TestFamilyConformance (and runtime's TestAttachersCoverFamilies) hold
// every entry to them.
type FamilyInfo struct {
	Family Family
	Kind   bpf.Kind // the probes it attaches
	Role   Role
	// Type and AttachType are the program's; Context what R1 points at.
	Type       ebpf.ProgramType
	AttachType ebpf.AttachType
	Context    Context
	// Multi: one link covers every function (or every event).
	Multi bool
	// PerFunction: one program loaded per function (trampolines).
	PerFunction bool
	// Limit is the most functions one link attaches, 0 for no limit.
	Limit int
	// Fact is the bpf.LinkFacts entry (a field of bpf.Links) whose
	// presence the family needs; "" for perf_event, which needs
	// bpf.Perf.Link instead.
	Fact string
	// CountsMisses: its link info reports hits the kernel could not
	// deliver (kprobe_multi and perf-event kprobe link info).
	CountsMisses bool
	// PerfEvent: it attaches through a perf event. Its link is a BPF
	// link, which apply pins, only where the kernel links BPF to perf
	// events (bpf.Perf.Link, 5.15); below, cilium/ebpf attaches with
	// perf_event_open and PERF_EVENT_IOC_SET_BPF, a descriptor that
	// lives as long as the process holding it.
	PerfEvent bool
}

// AttachTraceUprobeSession is BPF_TRACE_UPROBE_SESSION (6.13), which
// cilium/ebpf v0.22 knows only internally.
const AttachTraceUprobeSession = ebpf.AttachType(57)

// Context is what R1 points at when a program starts.
type Context int

// The program contexts.
const (
	ContextRegs       Context = iota // struct pt_regs: kprobe, kprobe.multi, kprobe.session, uprobe
	ContextTracing                   // u64 array: a BPF trampoline's (fentry, fexit, fsession), tp_btf's TP_PROTO parameters
	ContextTracepoint                // the tracepoint's record
	// ContextRawTracepoint: the tracepoint's TP_PROTO arguments as u64s
	// (struct bpf_raw_tracepoint_args), not its record; the compiler
	// takes the route only for probes that read none of them.
	ContextRawTracepoint
)

// Kernel limits on the functions of one multi link.
const (
	MaxKprobeMulti = 1 << 20 // MAX_KPROBE_MULTI_CNT
	MaxUprobeMulti = 1 << 20 // MAX_UPROBE_MULTI_CNT
)

// families is every link family, in the order plans list them.
var families = []FamilyInfo{
	{Family: FamilyKprobeMulti, Kind: bpf.KindKernel, Role: RoleEntry, Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceKprobeMulti, Context: ContextRegs,
		Multi: true, Limit: MaxKprobeMulti, Fact: "kprobe.multi", CountsMisses: true},
	{Family: FamilyKretprobeMulti, Kind: bpf.KindKernel, Role: RoleExit, Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceKprobeMulti, Context: ContextRegs,
		Multi: true, Limit: MaxKprobeMulti, Fact: "kprobe.multi", CountsMisses: true},
	{Family: FamilyKprobeSession, Kind: bpf.KindKernel, Role: RoleSession, Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceKprobeSession, Context: ContextRegs,
		Multi: true, Limit: MaxKprobeMulti, Fact: "kprobe.session", CountsMisses: true},
	{Family: FamilyFentry, Kind: bpf.KindKernel, Role: RoleEntry, Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, Context: ContextTracing,
		PerFunction: true, Fact: "fentry/fexit"},
	{Family: FamilyFexit, Kind: bpf.KindKernel, Role: RoleExit, Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFExit, Context: ContextTracing,
		PerFunction: true, Fact: "fentry/fexit"},
	{Family: FamilyFsession, Kind: bpf.KindKernel, Role: RoleSession, Type: ebpf.Tracing, AttachType: sys.AttachTraceFsession, Context: ContextTracing,
		PerFunction: true, Fact: "fsession"},
	{Family: FamilyKprobe, Kind: bpf.KindKernel, Role: RoleEntry, Type: ebpf.Kprobe, AttachType: ebpf.AttachNone, Context: ContextRegs,
		Fact: "kprobe", CountsMisses: true, PerfEvent: true},
	{Family: FamilyKretprobe, Kind: bpf.KindKernel, Role: RoleExit, Type: ebpf.Kprobe, AttachType: ebpf.AttachNone, Context: ContextRegs,
		Fact: "kprobe", CountsMisses: true, PerfEvent: true},
	{Family: FamilyUprobeMulti, Kind: bpf.KindUser, Role: RoleEntry, Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceUprobeMulti, Context: ContextRegs,
		Multi: true, Limit: MaxUprobeMulti, Fact: "uprobe.multi", CountsMisses: true},
	{Family: FamilyUretprobeMulti, Kind: bpf.KindUser, Role: RoleExit, Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceUprobeMulti, Context: ContextRegs,
		Multi: true, Limit: MaxUprobeMulti, Fact: "uprobe.multi", CountsMisses: true},
	{Family: FamilyUprobeSession, Kind: bpf.KindUser, Role: RoleSession, Type: ebpf.Kprobe, AttachType: AttachTraceUprobeSession, Context: ContextRegs,
		Multi: true, Limit: MaxUprobeMulti, Fact: "uprobe.session", CountsMisses: true},
	{Family: FamilyUprobe, Kind: bpf.KindUser, Role: RoleEntry, Type: ebpf.Kprobe, AttachType: ebpf.AttachNone, Context: ContextRegs,
		Fact: "uprobe", PerfEvent: true},
	{Family: FamilyUretprobe, Kind: bpf.KindUser, Role: RoleExit, Type: ebpf.Kprobe, AttachType: ebpf.AttachNone, Context: ContextRegs,
		Fact: "uprobe", PerfEvent: true},
	{Family: FamilyTracepoint, Kind: bpf.KindTracepoint, Role: RoleEvent, Type: ebpf.TracePoint, AttachType: ebpf.AttachNone, Context: ContextTracepoint,
		Multi: true, Fact: "tracepoint", PerfEvent: true},
	{Family: FamilyRawTracepoint, Kind: bpf.KindTracepoint, Role: RoleEvent, Type: ebpf.RawTracepoint, AttachType: ebpf.AttachNone, Context: ContextRawTracepoint,
		Multi: true, Fact: "raw_tracepoint"},
	{Family: FamilyTPBtf, Kind: bpf.KindTracepoint, Role: RoleEvent, Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, Context: ContextTracing,
		PerFunction: true, Fact: "tp_btf"},
	{Family: FamilyPerfEvent, Kind: bpf.KindProfile, Role: RoleSample, Type: ebpf.PerfEvent, AttachType: ebpf.AttachNone, Context: ContextRegs, PerfEvent: true},
}

// Families returns every link family, in the order plans list them.
func Families() []FamilyInfo { return append([]FamilyInfo(nil), families...) }

// Info returns the table's entry for f; ok is false for an unknown family
// (a hostile or newer saved plan).
func (f Family) Info() (info FamilyInfo, ok bool) {
	for _, fi := range families {
		if fi.Family == f {
			return fi, true
		}
	}
	return FamilyInfo{}, false
}

// Available reports whether facts has what the family needs to attach:
// its link fact, or for perf_event, BPF links on perf events.
func (fi FamilyInfo) Available(f *bpf.Facts) bool {
	if fi.Fact == "" {
		return f.Perf.Link
	}
	lf, ok := bpf.LinkFactNamed(fi.Fact)
	return ok && lf.Has(f.Links)
}

// Unpinnable says why links of fams cannot be pinned on the target f,
// and so why apply cannot keep them; "" when they can. Only a process
// holds them: probectl run.
func Unpinnable(fams []Family, f *bpf.Facts) string {
	if f.Perf.Link {
		return ""
	}
	for _, fam := range fams {
		if fi, ok := fam.Info(); ok && fi.PerfEvent {
			return fmt.Sprintf("%s links are perf events, which the target (%s) cannot pin: BPF links on perf events came in Linux 5.15. "+
				"apply cannot keep them; probectl run holds them while it runs", fam, f.Label())
		}
	}
	return ""
}

// JoinFamilies writes families as plans do: "kprobe.multi + kretprobe.multi".
func JoinFamilies(fams []Family) string {
	s := make([]string, len(fams))
	for i, f := range fams {
		s[i] = string(f)
	}
	return strings.Join(s, " + ")
}

// Multi reports whether one link of family covers every function.
func Multi(family Family) bool {
	fi, _ := family.Info()
	return fi.Multi
}
