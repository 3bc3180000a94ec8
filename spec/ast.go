package spec

import (
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
)

// Config is a set of spec files, decoded.
type Config struct {
	// Probes in address order.
	Probes []*Probe
	// Tables by name: state the probes share.
	Tables []*Table
	// Events is the events block, nil when there is none (the event
	// buffer then has the default size).
	Events *Events
	// Labels are the spec set's label tables, by name: constant names for
	// numbers, which labels(NAME, x) shows.
	Labels []*LabelSet
	// Sources holds each file's text by name, for source comments and
	// diagnostics.
	Sources map[string][]byte
	// Policy is what the specs may not do ([Config.Enforce]); the
	// compiler refuses on the target what the spec cannot show.
	Policy Policy
}

// Probe is one probe block.
type Probe struct {
	Addr      bpf.Address
	DeclRange hcl.Range
	// BodyRange is the block's body, from its { to its }; zero when the
	// file is not in HCL's native syntax. Two probes whose bodies read
	// alike compile to the same code (the compiler's code cache).
	BodyRange hcl.Range

	// kernel and user probes
	Functions      []Pattern
	FunctionsRange hcl.Range // the functions list
	Exclude        []Pattern
	Attach         string // "auto" or a link family
	// AttachRange is where attach was set, or the block header.
	AttachRange hcl.Range
	// Prefer is "" (the usual rule), PreferHits or PreferAttach: with
	// attach = "auto", the route is chosen by the measured cost table.
	Prefer      string
	PreferRange hcl.Range
	// EntryDataSize is what the user set, 0 when unset.
	EntryDataSize      int
	EntryDataSizeRange hcl.Range

	// user probes: Binary is a path, or a library name ("libc") that the
	// compiler resolves through the dynamic linker's cache.
	Binary      string
	BinaryRange hcl.Range
	PID         int
	// USDT is the binary's USDT probe ("provider:name") a user probe
	// attaches at, instead of Functions; "" for functions.
	USDT      string
	USDTRange hcl.Range

	// Optional: the probe attaches only if what it names is there; if it
	// is not, the plan says so and the other probes attach.
	Optional      bool
	OptionalRange hcl.Range

	// tracepoint probes: "group:event" names or globs
	Events     []Pattern
	EventRange hcl.Range

	// profile probes: how often each CPU is sampled (Frequency in Hz,
	// PeriodNS for a clock event, or every Period occurrences of a
	// counting event), and on which perf event: "auto", or one of
	// bpf.PerfEvents by name or alias ("cpu-clock", "cycles",
	// "page-faults", "instructions"...).
	Frequency      int64
	PeriodNS       int64
	Period         int64
	SampleRange    hcl.Range
	PerfEvent      string
	PerfEventRange hcl.Range
	// StackEntries is how many distinct stacks each of the probe's stack
	// maps holds (stack_entries); 0: sized by the compiler.
	StackEntries      int64
	StackEntriesRange hcl.Range
	// OneCPU: the probe samples on one CPU only, the first online one,
	// not on every CPU: a timer that runs its body once per period, as
	// bpftrace's interval probes do (one_cpu = true).
	OneCPU      bool
	OneCPURange hcl.Range

	Entry *Handler
	Exit  *Handler
}

// Pattern is a function name or glob, or a tracepoint's event.
type Pattern struct {
	Text  string
	Range hcl.Range
	// Optional: written optional("..."), it may match nothing on the
	// target.
	Optional bool
}

// SaveSize is the number of bytes on_entry saves for on_exit.
func (p *Probe) SaveSize() int {
	if p.Entry == nil {
		return 0
	}
	n := 0
	for _, f := range p.Entry.Save {
		n += f.Value.Type().Bytes()
	}
	return n
}

// EntryData is the size of the entry data the compiler must keep: the size
// the user asked for, or what on_entry saves.
func (p *Probe) EntryData() int {
	if p.EntryDataSize > 0 {
		return p.EntryDataSize
	}
	return p.SaveSize()
}

// Aggregations lists every action of the probe, entry first.
func (p *Probe) Actions() []*Action {
	var all []*Action
	for _, h := range []*Handler{p.Entry, p.Exit} {
		if h != nil {
			all = append(all, h.Actions...)
		}
	}
	return all
}

// Exprs lists every top-level expression of the probe's handlers.
func (p *Probe) Exprs() []Expr {
	var exprs []Expr
	for _, h := range []*Handler{p.Entry, p.Exit} {
		if h == nil {
			continue
		}
		exprs = append(exprs, h.When)
		for _, s := range h.Save {
			exprs = append(exprs, s.Value)
		}
		for _, a := range h.Actions {
			exprs = append(exprs, a.Value, a.When)
			exprs = append(exprs, a.By...)
			exprs = append(exprs, a.Key...)
			for _, fl := range a.Fields {
				exprs = append(exprs, fl.Value)
			}
		}
	}
	return slices.DeleteFunc(exprs, func(x Expr) bool { return x == nil })
}

// Handler is an on_entry or on_exit block.
type Handler struct {
	Exit      bool
	DeclRange hcl.Range
	// When, if not nil, must hold for the handler to run. In on_entry a
	// false When also skips on_exit.
	When    Expr
	Save    []*Field // on_entry only
	Actions []*Action
}

// ActionKind is what an action block does.
type ActionKind string

// The actions.
const (
	Count  ActionKind = "count"
	Sum    ActionKind = "sum"
	Min    ActionKind = "min"
	Max    ActionKind = "max"
	Hist   ActionKind = "hist"   // log2 histogram
	LHist  ActionKind = "lhist"  // linear histogram
	Event  ActionKind = "event"  // a record through a ring buffer
	Store  ActionKind = "store"  // a value into a table
	Delete ActionKind = "delete" // a key out of a table
)

// ActionKinds lists the action block types.
var ActionKinds = []ActionKind{Count, Sum, Min, Max, Hist, LHist, Event, Store, Delete}

// DefaultMaxKeys is an aggregation's key limit when max_keys is not set.
const DefaultMaxKeys = 10240

// The values of a kernel probe's prefer.
const (
	PreferHits   = "hits"   // the family cheapest per hit
	PreferAttach = "attach" // the family fastest to attach and detach
)

// Action is one action block in a handler.
type Action struct {
	Kind      ActionKind
	Name      string
	DeclRange hcl.Range
	Value     Expr // sum, min, max, hist, lhist
	By        []Expr
	// ByNames are the columns' names when by is an object ({ errno = -ret
	// }); nil for a list, whose keys are named by their text.
	ByNames []string
	When    Expr
	MaxKeys int
	// Unit is what the values measure (a key of Units; "" for none): a
	// scrape serves them converted to the base unit, named for it.
	Unit string
	// ExportStacks serves the kstack and ustack columns of by as labels;
	// without it a scrape adds their keys up (show, pprof and flame graphs
	// always have them).
	ExportStacks bool
	// lhist
	Min, Max, Step int64
	// event; store into a table of objects
	Fields []*Field
	// store, delete: the table and the key (store's value is Value, or
	// Fields for a table of objects)
	Table *Table
	Key   []Expr
}

// IsHistogram reports whether the action keeps buckets.
func (a *Action) IsHistogram() bool { return a.Kind == Hist || a.Kind == LHist }

// IsAggregation reports whether the action keeps a map of its own.
func (a *Action) IsAggregation() bool {
	switch a.Kind {
	case Event, Store, Delete:
		return false
	}
	return true
}

// Field is a named expression: a save entry or an event field.
type Field struct {
	Name  string
	Value Expr
	Range hcl.Range
}

// BaseUnit is how a scrape serves an aggregation's unit: in Base (seconds,
// bytes), a value divided by PerBase.
type BaseUnit struct {
	Base    string
	PerBase int64
}

// Units are the units an aggregation may measure (unit = "ns").
var Units = map[string]BaseUnit{
	"ns":    {"seconds", 1_000_000_000},
	"us":    {"seconds", 1_000_000},
	"ms":    {"seconds", 1_000},
	"s":     {"seconds", 1},
	"bytes": {"bytes", 1},
}

// UnitNames lists Units' names, smallest time unit first.
func UnitNames() []string { return []string{"ns", "us", "ms", "s", "bytes"} }
