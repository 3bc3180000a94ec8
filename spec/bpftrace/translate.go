package bpftrace

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// The translator walks the program twice: the first walk learns what each
// map is (an aggregation, a table, a constant labels table, a value kept
// from a function's entry for its exit), the second writes the spec.

type mapKind int

const (
	mUnknown mapKind = iota
	mAgg
	mTable
	mLabels
	mSaved
)

type mapUse struct {
	probe int  // index of the spec probe
	exit  bool // in on_exit
	op    string
	byTid bool
	plain bool // a store without a condition
	value string
}

type mapInfo struct {
	name    string // bpftrace's name, without @
	kind    mapKind
	hcl     string // the table's or aggregation's name in the spec
	val     valKind
	decl    *MapDecl
	begin   []*Assign // stores in BEGIN
	uses    []mapUse
	elseUse bool   // used where a saved value cannot be (BEGIN aside)
	shared  bool   // used by more than one spec probe
	deco    string // the decoder its values are shown through
	// pointee: every store is of a pointer to this struct (a tracepoint
	// field whose format names it), in user memory when pointeeUser;
	// pointees counts the stores, mixed says they differ.
	pointee     string
	pointeeUser bool
	pointees    int
	mixed       bool
}

// storePointee records what a store's value points to (the first pass).
func (m *mapInfo) storePointee(v hx) {
	m.pointees++
	if m.pointees == 1 {
		m.pointee, m.pointeeUser = v.pointee, v.user
		return
	}
	if v.pointee != m.pointee || v.user != m.pointeeUser {
		m.mixed = true
	}
}

// pointsTo is the struct every value of the table points to, "" when
// the stores do not all say the same.
func (m *mapInfo) pointsTo() (string, bool) {
	if m.mixed {
		return "", false
	}
	return m.pointee, m.pointeeUser
}

type kv struct{ k, v string }

type action struct {
	kind, name string
	attrs      []kv
	fields     []kv // an event's
	pos        Pos
	reads      []string       // tables its condition and values read
	hadTime    bool           // an event after time(): its time is the TIME column
	gens       map[string]int // a delete's: the stores its key and condition saw
	// unforked is a delete's condition without the conditions of the
	// forks it is under: its form when both copies of a fork delete.
	unforked *action
	prints   []Print // an event's: the printfs it carries
	bt       *btAgg  // an aggregation's: the bpftrace map it holds
}

type handler struct {
	when    string
	save    []kv
	actions []*action
}

type outProbe struct {
	pos      Pos
	kind     string // tracepoint, kernel, user, profile
	name     string
	attrs    []kv
	key      string // kind and targets: an entry and an exit probe of the same key are one probe
	entry    *handler
	exit     *handler
	comments []string
}

type translator struct {
	prog       *Program
	pass       int
	maps       map[string]*mapInfo
	probes     []*outProbe
	names      map[string]bool
	columns    []string // the header row BEGIN prints
	notes      []string
	pending    []string // comments for the next probe
	expansions int
	steps      int // loop steps written out (MaxLoopSteps)
	// optional: config missing_probes = ignore or warn; every probe may
	// be missing.
	optional bool
	opts     Options // bpftrace's command-line options
	// stopAfter is the shortest interval probe calling exit().
	stopAfter time.Duration
	// begin, end and intervals are what BEGIN, END and interval probes
	// print (maps.go).
	begin, end []Step
	intervals  []Interval
	// beginText is what BEGIN's printfs print (for a program of BEGIN
	// alone), beginExit whether BEGIN calls exit(); forRun: the program
	// is for probectl run, where a program of BEGIN alone prints and
	// waits, as bpftrace does.
	beginText strings.Builder
	beginExit bool
	forRun    bool
	// cwdMaps are the maps a walk of the working directory filled (the
	// value cwd stands for them).
	cwdMaps map[string]bool
}

// MaxExpansions bounds the macros a program expands (each may expand
// others, twice each).
const MaxExpansions = 10000

type bailout struct{ err *Error }

func (t *translator) fail(p Pos, summary, detail string) {
	panic(bailout{errAt(p, summary, detail)})
}

func (t *translator) note(format string, args ...any) {
	if t.pass != 2 {
		return
	}
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(t.notes, n) {
		t.notes = append(t.notes, n)
	}
}

func (t *translator) mapOf(name string) *mapInfo {
	m, ok := t.maps[name]
	if !ok {
		m = &mapInfo{name: name}
		t.maps[name] = m
	}
	return m
}

// run translates the program into the spec's parts.
func (t *translator) run() (err *Error) {
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			err = b.err
		}
	}()
	t.probes, t.names, t.notes, t.pending, t.columns = nil, map[string]bool{}, nil, nil, nil
	t.beginText.Reset()
	t.beginExit = false
	t.expansions = 0
	t.steps = 0
	t.begin, t.end, t.intervals = nil, nil, nil
	for _, m := range t.maps {
		m.uses, m.begin, m.elseUse = nil, nil, false
	}
	for i := range t.prog.MapDecls {
		d := &t.prog.MapDecls[i]
		if d.Kind != "hash" && d.Kind != "lruhash" {
			t.fail(d.Pos, "Unsupported map type", fmt.Sprintf("A map of type %s has no equivalent: tables are hash maps (hash or lruhash).", d.Kind))
		}
		t.mapOf(d.Name).decl = d
		if d.Kind == "lruhash" {
			t.note("@%s is an lruhash: a full table here keeps its keys and counts the stores it refused (show), where bpftrace evicts the oldest.", d.Name)
		}
	}
	for _, c := range t.prog.Config {
		if c.Name != "missing_probes" {
			t.fail(c.Pos, "Unsupported config", fmt.Sprintf("config %s has no equivalent in a spec.", c.Name))
		}
		if c.Value != "error" {
			t.optional = true
			t.note("config missing_probes = %s: every probe is optional (the plan says which the target lacks).", c.Value)
		}
	}
	for _, p := range t.prog.Probes {
		t.probe(p)
	}
	if t.pass == 2 {
		t.checkSeeds()
	}
	if len(t.probes) == 0 && !(t.forRun && t.onlyBeginEnd()) {
		at := Pos{Line: 1, Col: 1}
		if len(t.prog.Probes) > 0 {
			at = t.prog.Probes[0].Pos
		}
		t.fail(at, "Nothing to measure", "The program has no probe with an equivalent that measures something (BEGIN, END and interval probes only print).")
	}
	return nil
}

// onlyBeginEnd: the program has BEGIN or END probes and no other.
func (t *translator) onlyBeginEnd() bool {
	for _, p := range t.prog.Probes {
		for _, a := range p.Attach {
			if fam := familyAliases[strings.Split(a.Text, ":")[0]]; fam != "BEGIN" && fam != "END" {
				return false
			}
		}
	}
	return len(t.prog.Probes) > 0
}

// checkSeeds: BEGIN's stores into a map that is not a constant labels
// table can only be the zero values bpftrace programs seed types with (a
// table here starts empty, and a missing key reads as 0 or "").
func (t *translator) checkSeeds() {
	for _, name := range sortedKeys(t.maps) {
		m := t.maps[name]
		if m.kind == mLabels {
			continue
		}
		for _, a := range m.begin {
			if !zeroValue(a.RHS) {
				t.fail(a.Pos, "Unsupported store in BEGIN", fmt.Sprintf("BEGIN stores a value into @%s, which probes also use: a table here starts empty (only a map BEGIN alone fills with strings is a constant labels table).", name))
			}
			t.note("BEGIN's zero values into @%s are left out: a table here starts empty, and a missing key reads as 0.", name)
		}
	}
}

func zeroValue(e Expr) bool {
	switch e := e.(type) {
	case *Num:
		return e.Val == 0
	case *Str:
		return e.Val == ""
	case *Cast:
		return zeroValue(e.X)
	case *Call:
		return (e.Name == "ksym" || e.Name == "usym") && len(e.Args) == 1 && zeroValue(e.Args[0])
	}
	return false
}

// classify decides, after the first walk, what each map is.
func (t *translator) classify() {
	for _, m := range t.maps {
		for _, u := range m.uses {
			if u.probe != m.uses[0].probe {
				m.shared = true
			}
		}
		if m.kind == mAgg {
			continue
		}
		stores := 0
		for _, u := range m.uses {
			if u.op == "store" {
				stores++
			}
		}
		if stores == 0 && len(m.begin) > 0 && t.labelsShaped(m) {
			m.kind = mLabels
			continue
		}
		if t.savable(m) {
			m.kind = mSaved
			continue
		}
		if m.kind == mUnknown && (stores > 0 || len(m.uses) > 0) {
			m.kind = mTable
		}
	}
	// Names: tables and labels are top-level names in expressions.
	used := map[string]bool{}
	for _, name := range sortedKeys(t.maps) {
		m := t.maps[name]
		n := m.name
		if n == "" {
			n = "map"
		}
		if m.kind == mTable || m.kind == mLabels {
			if reserved[n] || builtinName(n) != "" || used[n] {
				n += "_map"
			}
			used[n] = true
		}
		m.hcl = n
	}
}

var reserved = map[string]bool{"args": true, "entry": true, "task": true, "true": true, "false": true, "null": true, "func": true, "event": true, "ret": true, "ktime": true, "for": true, "in": true, "if": true}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// labelsShaped: every store is in BEGIN, of a string constant at a
// number.
func (t *translator) labelsShaped(m *mapInfo) bool {
	for _, a := range m.begin {
		ref := a.LHS.(*MapRef)
		if len(ref.Keys) != 1 || a.Op != "=" {
			return false
		}
		if _, ok := constInt(ref.Keys[0]); !ok {
			return false
		}
		if _, ok := a.RHS.(*Str); !ok {
			return false
		}
	}
	return true
}

func constInt(e Expr) (int64, bool) {
	switch e := e.(type) {
	case *Num:
		return e.Val, true
	case *Cast:
		return constInt(e.X)
	case *Unary:
		if e.Op == "-" {
			v, ok := constInt(e.X)
			return -v, ok
		}
	}
	return 0, false
}

// savable: the map is keyed by tid, stored unconditionally in one
// probe's on_entry and read or deleted in its on_exit only: the value
// on_entry saves for on_exit.
func (t *translator) savable(m *mapInfo) bool {
	if m.elseUse || m.decl != nil || len(m.uses) == 0 {
		return false
	}
	probe, stores := -1, 0
	for _, u := range m.uses {
		if probe >= 0 && u.probe != probe {
			return false
		}
		probe = u.probe
		if !u.byTid {
			return false
		}
		switch u.op {
		case "store":
			if u.exit || !u.plain {
				return false
			}
			stores++
		default:
			if !u.exit {
				return false
			}
		}
	}
	return stores == 1 && t.probes[probe].exit != nil && t.probes[probe].entry != nil
}
