package compiled

import (
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
)

// PlanFormatVersion is the version of the plan's JSON form. It changes
// only in ways that keep existing fields' meaning.
const PlanFormatVersion = "1"

// Action is what a plan does to a probe.
type Action string

// Actions a plan can take on a probe.
const (
	ActionCreate  Action = "create"
	ActionReplace Action = "replace"
	ActionDelete  Action = "delete"
	ActionNoOp    Action = "no-op"
)

// Plan is what would change on a target: the stable, documented JSON of
// "probectl plan -json" (README, "Plan JSON").
type Plan struct {
	FormatVersion string     `json:"format_version"`
	Target        PlanTarget `json:"target"`
	// Scope is whose tasks the probes see: the node's, or one namespace's
	// pods'.
	Scope   Scope     `json:"scope"`
	Changes []*Change `json:"changes"`
	// Tables are the spec set's tables: resources of their own, which
	// live as long as the spec set (an apply that keeps one keeps its
	// contents).
	Tables []*TableChange `json:"tables,omitempty"`
	// Events is the spec set's event buffer, a resource of its own too
	// (an apply that keeps it keeps the records not read yet).
	Events  *EventsChange `json:"events,omitempty"`
	Summary Summary       `json:"summary"`
	// Skipped are the optional probes that will not be attached, and why.
	Skipped []Skipped `json:"skipped,omitempty"`
}

// EventsChange is the event buffer's entry in a plan.
type EventsChange struct {
	EventBuffer
	Action Action `json:"action"`
	Why    string `json:"why,omitempty"`
	// Users are the probes that emit events.
	Users []bpf.Address `json:"users"`
	// Maps is the buffer's map as plans show maps.
	Maps        []PlanMap `json:"maps"`
	MemoryBytes int64     `json:"memory_bytes"`
}

// EventsChange plans the event buffer of out.
func (out *Output) EventsChange(action Action) *EventsChange {
	c := &EventsChange{EventBuffer: *out.Events, Action: action, Users: []bpf.Address{}}
	c.setMaps()
	for _, p := range out.Probes {
		if p.Buffer != nil {
			c.Users = append(c.Users, p.Address)
		}
	}
	return c
}

// setMaps fills the plan's view of the buffer's map and its memory.
func (c *EventsChange) setMaps() {
	c.Maps = nil
	for _, m := range c.EventBuffer.Maps {
		c.Maps = append(c.Maps, PlanMap{Name: m.Name, Type: m.Type.String(), KeySize: m.KeySize,
			ValueSize: m.ValueSize, MaxEntries: m.MaxEntries, Purpose: m.Purpose})
	}
	c.MemoryBytes = c.EventBuffer.MemoryBytes()
}

// NewEventsChange is the plan's entry for an applied buffer b.
func NewEventsChange(b EventBuffer, action Action, why string) *EventsChange {
	c := &EventsChange{EventBuffer: b, Action: action, Why: why, Users: []bpf.Address{}}
	c.setMaps()
	return c
}

// TableChange is one table's entry in a plan.
type TableChange struct {
	Table
	Action Action `json:"action"`
	Why    string `json:"why,omitempty"`
	// Users are the probes that use the table.
	Users []bpf.Address `json:"users"`
}

// TableChanges plans the creation of every table of out.
func (out *Output) TableChange(t *Table, action Action) *TableChange {
	c := &TableChange{Table: *t, Action: action}
	for _, p := range out.Probes {
		for _, name := range p.Tables {
			if name == t.Address.Name {
				c.Users = append(c.Users, p.Address)
			}
		}
	}
	return c
}

// MemoryBytes estimates a table's locked memory.
func (t *Table) MemoryBytes(cpus int) int64 {
	p := &Probe{Maps: t.Maps}
	return p.MemoryBytes(cpus)
}

// PlanTarget is the target's facts, with the function list cut to its
// size and without the BTF data or the tracepoint formats.
type PlanTarget struct {
	*bpf.Facts
	Functions         []string `json:"functions,omitempty"`
	FunctionCount     int      `json:"function_count"`
	KernelBTF         []byte   `json:"kernel_btf,omitempty"`
	TracepointFormats []byte   `json:"tracepoint_formats,omitempty"`
}

// Summary counts the changes by action.
type Summary struct {
	Create  int `json:"create"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
	NoOp    int `json:"no_op"`
}

// Change is one probe's entry in a plan: the probe's description, what
// the plan does to it and why, and what it costs.
type Change struct {
	Description
	Action Action `json:"action"`
	// Why says what changed, for replace and delete.
	Why string `json:"why,omitempty"`
	// Changes are the attributes a replace changed, as written before and
	// after ("" when absent on one side); empty when the state did not
	// record the probe's source.
	Changes []AttributeChange `json:"changes,omitempty"`
	// Source shadows the description's, and is never set: the plan shows
	// what changed in it (Changes), not all of it; the state keeps it.
	Source []Attribute `json:"source,omitempty"`
	// Links is the number of links, null when it depends on unresolved functions.
	Links       *int          `json:"links"`
	Programs    []PlanProgram `json:"programs"`
	Maps        []PlanMap     `json:"maps"`
	MemoryBytes int64         `json:"memory_bytes"`
}

// PlanProgram is a program in a plan.
type PlanProgram struct {
	Name         string `json:"name"`
	Role         Role   `json:"role"`
	Family       Family `json:"family"`
	Type         string `json:"type"`
	AttachType   string `json:"attach_type,omitempty"`
	Instructions int    `json:"instructions"`
	StackBytes   int    `json:"stack_bytes"`
	PerFunction  bool   `json:"per_function,omitempty"`
}

// PlanMap is a map in a plan.
type PlanMap struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	KeySize    uint32 `json:"key_size"`
	ValueSize  uint32 `json:"value_size"`
	MaxEntries uint32 `json:"max_entries"`
	Purpose    string `json:"purpose"`
	// Metric is, for a sum's map, how a scrape serves the sum: "counter",
	// or "gauge" when its values may be negative (Aggregation.Signed);
	// empty for other maps (their kind says).
	Metric string `json:"metric,omitempty"`
	// Served is, for the map of an aggregation with a unit, the family a
	// scrape serves it as (probectl_hist_kernel_io_lat_seconds) and the
	// base unit.
	Served     string `json:"served,omitempty"`
	ServedUnit string `json:"served_unit,omitempty"`
}

// NewPlan plans the creation of every probe of out.
func NewPlan(out *Output) *Plan {
	plan := &Plan{FormatVersion: PlanFormatVersion, Target: PlanTarget{Facts: out.Facts, FunctionCount: len(out.Facts.Functions)}, Scope: out.Scope, Skipped: out.Skipped}
	for _, p := range out.Probes {
		plan.Changes = append(plan.Changes, p.Change(ActionCreate, out.Facts))
	}
	for _, t := range out.Tables {
		plan.Tables = append(plan.Tables, out.TableChange(t, ActionCreate))
	}
	if out.Events != nil {
		plan.Events = out.EventsChange(ActionCreate)
	}
	plan.Count()
	return plan
}

// Count recomputes the summary.
func (p *Plan) Count() {
	p.Summary = Summary{}
	actions := make([]Action, 0, len(p.Changes)+len(p.Tables))
	for _, c := range p.Changes {
		actions = append(actions, c.Action)
	}
	for _, t := range p.Tables {
		actions = append(actions, t.Action)
	}
	if p.Events != nil {
		actions = append(actions, p.Events.Action)
	}
	for _, a := range actions {
		switch a {
		case ActionCreate:
			p.Summary.Create++
		case ActionReplace:
			p.Summary.Replace++
		case ActionDelete:
			p.Summary.Delete++
		default:
			p.Summary.NoOp++
		}
	}
}

// Change describes the probe as a plan entry.
func (p *Probe) Change(action Action, facts *bpf.Facts) *Change {
	c := &Change{Description: p.Description, Action: action, Links: p.LinkCount()}
	for _, prog := range p.Programs {
		c.Programs = append(c.Programs, PlanProgram{
			Name: prog.Name, Role: prog.Role, Family: prog.Family, Type: prog.Type.String(),
			AttachType: attachTypeName(prog.AttachType), Instructions: prog.InstructionCount(),
			StackBytes: prog.StackBytes, PerFunction: prog.PerFunction,
		})
	}
	aggs := map[string]*Aggregation{}
	for _, a := range p.Aggregations {
		aggs[a.MapRef] = a
	}
	for _, m := range p.Maps {
		pm := PlanMap{Name: m.Name, Type: m.Type.String(), KeySize: m.KeySize,
			ValueSize: m.ValueSize, MaxEntries: m.MaxEntries, Purpose: m.Purpose}
		if a := aggs[m.Ref]; a != nil && a.Kind == AggSum {
			pm.Metric = map[bool]string{true: "counter", false: "gauge"}[a.Monotonic()]
		}
		if a := aggs[m.Ref]; a != nil && a.Unit != "" {
			pm.Served, pm.ServedUnit = a.ServedName(string(p.Address.Kind), p.Address.Name), a.BaseUnit
		}
		c.Maps = append(c.Maps, pm)
	}
	c.MemoryBytes = p.MemoryBytes(facts.CPUs)
	return c
}

func attachTypeName(at ebpf.AttachType) string {
	if at == ebpf.AttachNone {
		return ""
	}
	return at.String()
}

// LinkCount is the number of links the probe needs, or nil when it depends
// on functions not resolved yet.
func (p *Probe) LinkCount() *int {
	n := 0
	for _, fam := range p.Attach {
		fi, _ := fam.Info()
		switch {
		case fi.Kind == bpf.KindProfile:
			if p.Sampler != nil && p.Sampler.OneCPU {
				return &[]int{1}[0]
			}
			return nil // one per online CPU, counted at apply
		case fi.Kind == bpf.KindTracepoint:
			n += max(len(p.Tracepoints), 1) // one link per event
		case fi.Multi:
			n++
		case p.USDT != "" && p.Sites != nil:
			n += len(p.Sites) // one uprobe per site
		case p.Functions == nil:
			return nil
		default:
			n += len(p.Functions)
		}
	}
	return &n
}

// MemoryBytes estimates the locked kernel memory of the probe's maps and
// programs for cpus CPUs (1 when unknown). Hash maps preallocate every
// element: a fixed overhead, the key, and one value per CPU for per-CPU
// maps; one created with BPF_F_NO_PREALLOC (stacks stored by content)
// takes its buckets at load and each element as it is stored, which the
// map's purpose bounds.
func (p *Probe) MemoryBytes(cpus int) int64 {
	const mapNoPrealloc = 1 // BPF_F_NO_PREALLOC
	cpus = max(cpus, 1)
	const elemOverhead = 48 // struct htab_elem
	var total int64
	for _, m := range p.Maps {
		key, val, n := int64(m.KeySize+7)&^7, int64(m.ValueSize+7)&^7, int64(m.MaxEntries)
		switch m.Type {
		case ebpf.PerCPUHash:
			total += n * (elemOverhead + key + 8 + val*int64(cpus))
		case ebpf.PerCPUArray:
			total += n * val * int64(cpus)
		case ebpf.Hash, ebpf.LRUHash:
			if m.Flags&mapNoPrealloc != 0 {
				buckets := int64(1)
				for buckets < n {
					buckets *= 2
				}
				total += buckets * 16 // struct bucket
				break
			}
			total += n * (elemOverhead + key + val)
		case ebpf.RingBuf:
			total += n
		default:
			total += n * (key + val)
		}
	}
	for _, prog := range p.Programs {
		copies := int64(1)
		if prog.PerFunction && p.Functions != nil {
			copies = int64(len(p.Functions))
		}
		total += copies * int64(prog.InstructionCount()) * 8 * 2 // bytecode and JIT image, roughly
	}
	return total
}

// layouts are the key layouts of the aggregations, then the fields of the
// events.
func (p *Probe) layouts() [][]KeyField {
	var out [][]KeyField
	for _, a := range p.Aggregations {
		out = append(out, a.Key)
	}
	for _, ev := range p.Events {
		out = append(out, ev.Fields)
	}
	return out
}

// Display says how a probe's keys and event fields show: per aggregation
// and event, each field's name, decoder and labels. Two probes with equal
// digests show alike.
func (p *Probe) Display() [][]KeyField {
	var out [][]KeyField
	for _, fields := range p.layouts() {
		shown := make([]KeyField, len(fields))
		for i, f := range fields {
			shown[i] = KeyField{Name: f.Name, Kind: f.Kind, Decode: f.Decode, Labels: f.Labels}
		}
		out = append(out, shown)
	}
	return out
}

// AttributeChange is an attribute a replace changes: its source text
// before and after ("" where it was not, or is no longer, written).
type AttributeChange struct {
	Attribute string `json:"attribute"`
	Before    string `json:"before"`
	After     string `json:"after"`
}

// DiffAttributes lists the attributes that differ between before and
// after, in after's order, then those only before had. An action added
// or removed is one change: its own attributes (named after it) are left
// out.
func DiffAttributes(before, after []Attribute) []AttributeChange {
	all := diffAttributes(before, after)
	var whole []string
	for _, c := range all {
		if c.Before == "" || c.After == "" {
			whole = append(whole, c.Attribute+".")
		}
	}
	out := all[:0]
	for _, c := range all {
		if !slices.ContainsFunc(whole, func(p string) bool { return strings.HasPrefix(c.Attribute, p) }) {
			out = append(out, c)
		}
	}
	return out
}

func diffAttributes(before, after []Attribute) []AttributeChange {
	old := map[string]string{}
	for _, a := range before {
		old[a.Name] = a.Text
	}
	var out []AttributeChange
	seen := map[string]bool{}
	for _, a := range after {
		seen[a.Name] = true
		if b, ok := old[a.Name]; !ok || b != a.Text {
			out = append(out, AttributeChange{Attribute: a.Name, Before: b, After: a.Text})
		}
	}
	for _, a := range before {
		if !seen[a.Name] {
			out = append(out, AttributeChange{Attribute: a.Name, Before: a.Text})
		}
	}
	return out
}
