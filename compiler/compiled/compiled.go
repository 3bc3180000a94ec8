package compiled

import (
	"math"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
)

// Route is the kernel machinery a probe runs on.
type Route string

// The routes.
const (
	RouteFtrace     Route = "ftrace"     // fprobe on a plain ftrace_ops (entry only)
	RouteFgraph     Route = "fgraph"     // fprobe on the function-graph tracer (6.14+)
	RouteRethook    Route = "rethook"    // fprobe exits through rethook (5.18 to 6.13)
	RouteTrampoline Route = "trampoline" // BPF trampolines: fentry/fexit, fsession
	RouteKprobe     Route = "kprobe"     // legacy kprobes and kretprobes
	RouteUprobe     Route = "uprobe"     // uprobes, uretprobes, uprobe.multi
	RouteTracepoint Route = "tracepoint" // a perf event on the tracepoint
	// RouteRawTracepoint: the program on the tracepoint's own BPF hook,
	// which runs whatever other BPF program is running on the CPU.
	RouteRawTracepoint Route = "raw_tracepoint"
	// RouteTPBtf: the same hook, the program loaded against the event's
	// btf_trace_NAME typedef, reading its parameters typed.
	RouteTPBtf   Route = "tp_btf"
	RouteProfile Route = "perf_event" // a sampling perf event on every CPU
)

// Storage is where entry data lives between a call's entry and its exit.
type Storage string

// Entry-data storage.
const (
	StorageNone   Storage = "none"   // nothing passes from entry to exit
	StorageCookie Storage = "cookie" // the kprobe.session, uprobe.session or fsession cookie (8 bytes)
	StorageMap    Storage = "map"    // a per-call slot in an LRU hash keyed by (thread, function)
)

// Role is what a program does for its probe.
type Role string

// The program roles.
const (
	RoleEntry   Role = "entry"   // runs at function entry
	RoleExit    Role = "exit"    // runs at function return
	RoleSession Role = "session" // both, one session program (kprobe, uprobe or fsession)
	RoleEvent   Role = "event"   // a tracepoint's program
	RoleSample  Role = "sample"  // a profile probe's program, run on each sample
)

// KeyKind is how a key or event field decodes.
type KeyKind string

// The key kinds.
const (
	KeyInt    KeyKind = "int"    // a signed integer
	KeyUint   KeyKind = "uint"   // an unsigned 64-bit integer, as the kernel stores it (a u64 field, u64(x))
	KeyFunc   KeyKind = "func"   // the index of the probe's function: its name
	KeyEvent  KeyKind = "event"  // the index of the probe's event: its name
	KeyComm   KeyKind = "comm"   // a task name, NUL-padded
	KeyString KeyKind = "string" // text, NUL-terminated
	KeyBytes  KeyKind = "bytes"  // a byte array, shown in hex
	KeyArgv   KeyKind = "argv"   // strings one after another, each ended by a NUL: shown joined by spaces
	KeyPath   KeyKind = "path"   // a path's names, leaf first, each ended by a NUL: shown as /root/../leaf
	KeyBuf    KeyKind = "buf"    // buf(): the length read (8 bytes), then the bytes, shown as bpftrace's %r
	// KeyKStack is a kernel stack: the id (8 bytes, negative: no stack, the
	// errno) of a stack in the probe's stack trace map KeyField.StackMap.
	KeyKStack KeyKind = "kstack"
	// KeyUStack is a user stack: its id, then the process (8 bytes
	// each: the tgid, and above it the start time, see bpf/symbols.ProcessStarted).
	// Its stack trace map holds build ids and file offsets.
	KeyUStack KeyKind = "ustack"
)

// Output is what the kernel should have for a config on one target.
type Output struct {
	Facts *bpf.Facts
	// Scope is whose tasks the probes see.
	Scope  Scope
	Probes []*Probe
	// Tables are shared by the probes: they live as long as the spec set.
	Tables []*Table
	// Events is the event buffer the probes' events go through, nil when
	// no probe emits events. It lives as long as the spec set.
	Events *EventBuffer
	// Skipped are the optional probes that cannot attach on the target,
	// and why; they are left out of Probes.
	Skipped []Skipped
}

// Skipped is an optional probe (optional = true, or whose every pattern is
// optional("...")) that will not be attached, and why.
type Skipped struct {
	Address bpf.Address `json:"address"`
	Why     string      `json:"why"`
}

// Description says what a compiled probe is: its address, its route and
// why, its link families, its functions or event, where entry data lives,
// and its digest. Plans, state and status carry it embedded: a probe is
// described once, here.
type Description struct {
	Address bpf.Address `json:"address"`
	Route   Route       `json:"route"`
	Attach  []Family    `json:"attach"`
	Reason  string      `json:"reason"`
	// Unpinnable says why the target cannot pin the probe's links
	// ([Unpinnable]); apply refuses such a probe, probectl run holds it.
	Unpinnable string `json:"unpinnable,omitempty"`
	// Cost is what the measured cost table (routecost.json) says the
	// route costs on the target, for kernel probes; nil without a table
	// for the target's arch.
	Cost *Estimate `json:"cost,omitempty"`
	// Functions is what the patterns resolved to on the target (sorted, the
	// index is the attach cookie), or nil when the target's function list
	// is unknown; Patterns and Exclude are as written.
	Functions []string `json:"functions"`
	Patterns  []string `json:"patterns,omitempty"`
	Exclude   []string `json:"exclude,omitempty"`
	Binary    string   `json:"binary,omitempty"`
	// Library is the library name binary was given as ("libc"), which
	// the dynamic linker's cache resolved to Binary.
	Library string `json:"library,omitempty"`
	// Root is the directory Binary is resolved under, chroot-like ("" for
	// "/"): the host's root as the node agent sees it (-host-root), or a
	// process's /proc/PID/root for a probe with pid.
	Root string `json:"root,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// USDT is the USDT probe ("provider:name") of Binary a user probe
	// attaches at (Functions is then just it), and Sites are its places
	// in the binary, one uprobe each; a site's index is its attach
	// cookie. Sites is nil when the binary was not read.
	USDT  string     `json:"usdt,omitempty"`
	Sites []USDTSite `json:"sites,omitempty"`
	Event string     `json:"event,omitempty"`
	// Tracepoints are the events a tracepoint probe attaches, sorted (its
	// patterns resolved; the index is the attach cookie); Event is the one
	// event of a probe that has only one.
	Tracepoints []string `json:"tracepoints,omitempty"`
	// Sampler is what a profile probe samples on every CPU.
	Sampler   *bpf.Sampler `json:"sampler,omitempty"`
	EntryData EntryData    `json:"entry_data"`
	// PodWhen are the conditions that compare pod values with names
	// (namespace == "shop"), as written: the plan says they are matched
	// against the node's pods.
	PodWhen []string `json:"pod_when,omitempty"`
	// Tables are the tables the probe uses.
	Tables []string `json:"tables,omitempty"`
	// Missing says which optional("...") patterns matched nothing on the
	// target: they attach nothing, and the probe attaches the rest.
	Missing []string `json:"missing,omitempty"`
	// Deferred lists the kernel data the probe reads through BTF that the
	// target could not resolve (a built-in profile carries no BTF): it is
	// resolved at apply, against the live kernel. A probe with deferred
	// accesses is a forecast; it is never loaded.
	Deferred []string `json:"deferred,omitempty"`
	// Digest identifies the compiled probe: equal digests, equal kernel
	// objects.
	Digest string `json:"digest"`
	// Source is the probe's attributes as the user wrote them, for the
	// plan's attribute diff (Change.Changes); absent in states written
	// before it was recorded. Not in the digest.
	Source []Attribute `json:"source,omitempty"`
}

// USDTSite is one place of a USDT probe in its binary (one
// NT_STAPSDT note, bpf/symbols.USDT).
type USDTSite struct {
	// Address is the probe's virtual address in the binary, as readelf
	// -n shows it; Offset its file offset, where the uprobe goes.
	Address uint64 `json:"address"`
	Offset  uint64 `json:"offset"`
	// RefCtrOffset is the file offset of the probe's semaphore (the
	// uprobe's ref_ctr_offset: the kernel counts the attached uprobes in
	// it, and the program evaluates the probe's arguments only while it
	// is not zero); 0 without one.
	RefCtrOffset uint64 `json:"ref_ctr_offset,omitempty"`
	// Args are the site's argument specifiers, as the note writes them.
	Args string `json:"args,omitempty"`
}

// Attribute is one attribute of a probe as written: its name
// ("on_entry.when", `on_exit.hist "lat".value`) and its source text.
type Attribute struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Probe is one compiled probe.
type Probe struct {
	Description

	Programs []*Program
	Maps     []*Map
	// Shared are the tables the programs use, whose maps the runtime
	// provides: they belong to the spec set, not to the probe.
	Shared []*Table `json:"-"`
	// Buffer is the spec set's event buffer when the probe emits events:
	// its map, like the tables', is the runtime's to provide.
	Buffer *EventBuffer `json:"-"`
	// Aggregations decode the maps; Events decode ring buffer records.
	Aggregations []*Aggregation
	Events       []*EventLayout
	// Stats locates the counters of the stats map.
	Stats Stats
}

// Stats locates the probe's counters in its per-CPU stats array. Each
// aggregation's dropped keys are at its DroppedIndex.
type Stats struct {
	EventsDropped int `json:"events_dropped"`
	EntryHits     int `json:"entry_hits"` // runs of the entry program (or half)
	ExitHits      int `json:"exit_hits"`  // runs of the exit program (or half)
	Size          int `json:"size"`
}

// EntryData is what the entry handler keeps for the exit handler.
type EntryData struct {
	Size    int     `json:"size"`
	Storage Storage `json:"storage"`
}

// Program is one BPF program of a probe.
type Program struct {
	// Name is the kernel's name for it (at most 15 characters).
	Name string
	Role Role
	// Family is the link family it is attached with.
	Family     Family
	Type       ebpf.ProgramType
	AttachType ebpf.AttachType
	// PerFunction: loaded once per function (fentry/fexit: AttachTo).
	PerFunction  bool
	Instructions asm.Instructions
	StackBytes   int
}

// InstructionCount is the number of raw BPF instructions.
func (p *Program) InstructionCount() int { return int(p.Instructions.Size() / asm.InstructionSize) }

// Map is one BPF map of a probe.
type Map struct {
	// Ref is the name the programs refer to it by.
	Ref string
	// Name is the kernel's name for it (at most 15 characters).
	Name       string
	Type       ebpf.MapType
	KeySize    uint32
	ValueSize  uint32
	MaxEntries uint32
	// Flags are the map's creation flags (stack maps of user stacks:
	// BPF_F_STACK_BUILD_ID).
	Flags   uint32 `json:",omitempty"`
	Purpose string
	// Match is the predicate of a pod map (PodMapRef): the cgroups it
	// holds are those whose pod matches it, filled at apply.
	Match *PodMatch `json:",omitempty"`
	// Start marks the start map (StartMapRef): its one u64 is written at
	// load with the kernel's monotonic clock (bpf_ktime_get_ns), which
	// elapsed counts from.
	Start bool `json:",omitempty"`
	// Symbols marks the kaddr map (KaddrMapRef): its one value is the
	// addresses of these kernel symbols, a u64 each in order, written at
	// load from /proc/kallsyms (the kernel's addresses move at boot).
	Symbols []string `json:",omitempty"`
}

// KaddrMapRef is the ref of a probe's kaddr map (Map.Symbols).
const KaddrMapRef = "kaddr"

// StartMapRef is the ref of a probe's start map (Map.Start).
const StartMapRef = "start"

// Spec returns the map's cilium/ebpf spec.
func (m *Map) Spec() *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: m.Name, Type: m.Type, KeySize: m.KeySize, ValueSize: m.ValueSize, MaxEntries: m.MaxEntries, Flags: m.Flags}
}

// KeyField is one part of an aggregation's key, or one field of an
// event's record.
type KeyField struct {
	Name   string  `json:"name"`
	Kind   KeyKind `json:"kind"`
	Offset int     `json:"offset"`
	Size   int     `json:"size"`
	// StackMap is the ref of the stack trace map a kstack or ustack id
	// is in.
	StackMap string `json:"stack_map,omitempty"`
	// Decode names the display decoder that show, -json and events apply
	// in user space (the kernel keeps the number): errno, signal, syscall,
	// inet, inet6, hex, cgroup, labels (spec.Decoder), ksym, usym, and
	// pod, namespace, container, node (DecodePod...).
	// Empty: the value shows by its kind.
	Decode string `json:"decode,omitempty"`
	// Labels name numbers, each written in decimal: the spec's labels
	// block for labels, the target's system calls for syscall.
	Labels map[string]string `json:"labels,omitempty"`
	// Label is the metric label of an aggregation's column (README,
	// "Serve"): the name by gives it, else one its expression means
	// (errno for errno_name(args.ret)). Empty in states written before
	// it, which label the column by its Name.
	Label string `json:"label,omitempty"`
}

// IsStack reports whether the field is a kstack or ustack id.
func (f KeyField) IsStack() bool { return f.Kind == KeyKStack || f.Kind == KeyUStack }

// The decoders of the pod values (compiler's builtins): a cgroup ID
// shown as its pod's name, namespace, container, or the node's name.
const (
	DecodePod       = "pod"
	DecodeNamespace = "namespace"
	DecodeContainer = "container"
	DecodeNode      = "node"
)

// AggregationKind is what an aggregation keeps, as plans, state and show
// name it.
type AggregationKind string

// The aggregation kinds: the spec's actions that keep a map.
const (
	AggCount AggregationKind = "count"
	AggSum   AggregationKind = "sum"
	AggMin   AggregationKind = "min"
	AggMax   AggregationKind = "max"
	AggHist  AggregationKind = "hist"  // log2 buckets
	AggLHist AggregationKind = "lhist" // linear buckets
)

// IsHistogram reports whether the aggregation keeps buckets: the bucket is
// the last 8 bytes of its key.
func (k AggregationKind) IsHistogram() bool { return k == AggHist || k == AggLHist }

// LinearBuckets is the number of in-range buckets of an lhist from lo to
// hi in steps of step (hi > lo, step > 0): the last one may be partial.
// It computes without overflow for any int64 bounds, and saturates.
func LinearBuckets(lo, hi, step int64) int64 {
	span := uint64(hi) - uint64(lo) // fits in a uint64, not always in an int64
	n := span / uint64(step)
	if span%uint64(step) != 0 {
		n++
	}
	return int64(min(n, math.MaxInt64))
}

// Aggregation describes one aggregation map.
type Aggregation struct {
	Name    string          `json:"name"`
	Kind    AggregationKind `json:"kind"`
	MapRef  string          `json:"map"`
	Key     []KeyField      `json:"key"`
	KeySize int             `json:"key_size"`
	// Histograms: the bucket index is the last 8 bytes of the key.
	LinearMin  int64 `json:"min,omitempty"`
	LinearMax  int64 `json:"max,omitempty"`
	LinearStep int64 `json:"step,omitempty"`
	MaxKeys    int   `json:"max_keys"`
	// DroppedIndex is its dropped-keys counter in the stats map.
	DroppedIndex int `json:"dropped_index"`
	// Signed marks a sum whose values may be negative (the compiler
	// cannot prove them otherwise: see the README's "Serve"), so that it
	// may fall: it is served as a gauge, not a counter.
	Signed bool `json:"signed,omitempty"`
	// Unit is what the values measure (the spec's unit, "ns"); a scrape
	// serves them in BaseUnit (seconds, bytes), divided by PerBase, and
	// names the family for it. Empty: served as the kernel keeps them.
	Unit     string `json:"unit,omitempty"`
	BaseUnit string `json:"base_unit,omitempty"`
	PerBase  int64  `json:"per_base,omitempty"`
	// ExportStacks serves the key's kstack and ustack columns as labels;
	// without it a scrape adds their keys up.
	ExportStacks bool `json:"export_stacks,omitempty"`
	// HistSum marks a histogram whose per-CPU value is its count and the
	// sum of its observations (16 bytes): a scrape serves _sum. States
	// written before it keep only counts.
	HistSum bool `json:"hist_sum,omitempty"`
}

// SharedValue reports whether the aggregation keeps one value per key in a
// plain hash map, which every CPU adds to with an atomic add, rather than
// one value per CPU in a per-CPU hash map: a count, sum or histogram with
// keys of its own (by). A preallocated plain hash is made in a tenth of
// the time of a per-CPU one (issue 22: apply of many probes), but CPUs
// that hit one key at once share its cache line (bench/contend.sh). Min
// and max compare before they store, which an atomic add cannot do; an
// aggregation without by has few keys (one, or its buckets: MapEntries),
// cheap to make per CPU and hit from every CPU: these stay per-CPU. This
// decides the layout; readers go by the type of the map they read, so
// that states written before read as ever.
func (a *Aggregation) SharedValue() bool {
	return (a.Kind == AggCount || a.Kind == AggSum || a.Kind.IsHistogram()) && len(a.Key) > 0
}

// Log2Buckets is how many buckets a log2 histogram has at most: negative
// values, zero, and 2+floor(log2(v)) for the positive ones.
const Log2Buckets = 65

// MapEntries is the size of the aggregation's map: MaxKeys, or fewer when
// it has no by and so at most one key, or a histogram's buckets.
func (a *Aggregation) MapEntries() int {
	if len(a.Key) > 0 {
		return a.MaxKeys
	}
	n := int64(1)
	switch a.Kind {
	case AggHist:
		n = Log2Buckets
	case AggLHist:
		n = LinearBuckets(a.LinearMin, a.LinearMax, a.LinearStep) + 2 // and the two open ends
	}
	return int(min(n, int64(a.MaxKeys)))
}

// Monotonic reports whether the aggregation only grows while it is
// applied: a count, and a sum that is not Signed. A scrape serves it as a
// counter (named with _total), the others as gauges.
func (a *Aggregation) Monotonic() bool {
	return a.Kind == AggCount || a.Kind == AggSum && !a.Signed
}

// EventLayout describes one event action's records: a header (the
// layout id, then the time; EventHeaderSize bytes), then the fields.
type EventLayout struct {
	Name string `json:"name"`
	ID   int    `json:"id"` // its index among the probe's events
	// Layout is the id the records carry (16 hex digits): it names the
	// probe, the event and the layout of its fields, across applies.
	Layout string     `json:"layout,omitempty"`
	Fields []KeyField `json:"fields"`
	Size   int        `json:"size"`
}
