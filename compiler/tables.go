package compiler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// Map refs of a table, as the programs that use it refer to its maps.
func tableRef(name string) string      { return "table_" + name }
func tableStatsRef(name string) string { return "tstats_" + name }

// tableUse is one place a table is used: a key, and for stores the value.
type tableUse struct {
	g      *gen
	key    []spec.Expr
	value  spec.Expr     // a store of a single value
	fields []*spec.Field // a store of an object
	rng    hcl.Range
}

// unit is one compilation: every probe's generator, and the tables they
// share, laid out from the types of all their uses.
type unit struct {
	facts   *bpf.Facts
	policy  spec.Policy // what the spec set may not do
	gens    []*gen
	uses    map[*spec.Table][]tableUse
	layouts map[*spec.Table]*Table
	// slots are the types of each laid-out table's value fields.
	slots map[*spec.Table][]spec.Type
	busy  map[*spec.Table]bool
	diags hcl.Diagnostics
	// buffer is the spec set's event buffer, nil when no probe emits events.
	buffer *EventBuffer
	// files is what the compile reads of the host's files, once each.
	files *files
	// cache turns the code cache on (codecache.go); sources are the spec
	// files' text, by name, which its keys read; copied counts the probes
	// whose code it copied.
	cache   bool
	sources map[string][]byte
	copied  atomic.Int64
}

// collectUses records where g uses tables.
func (u *unit) collectUses(g *gen) {
	add := func(t *spec.Table, use tableUse) {
		if u.uses == nil {
			u.uses = map[*spec.Table][]tableUse{}
		}
		use.g = g
		u.uses[t] = append(u.uses[t], use)
	}
	for _, h := range g.handlers() {
		for _, a := range h.Actions {
			if a.Table != nil {
				add(a.Table, tableUse{key: a.Key, value: a.Value, fields: a.Fields, rng: a.DeclRange})
			}
		}
	}
	for _, x := range g.exprs() {
		spec.Walk(x, func(x spec.Expr) {
			switch x := x.(type) {
			case *spec.TableRead:
				add(x.Table, tableUse{key: x.Key, rng: x.Range()})
			case *spec.Has:
				add(x.Table, tableUse{key: x.Key, rng: x.Range()})
			}
		})
	}
}

// tableSlot is the type a table read yields: the table's value, or one
// field of its objects.
func (u *unit) tableSlot(t *spec.Table, field string) spec.Type {
	if u.busy[t] {
		// A store of the table's own value (t[k] + 1): the spec's type,
		// from the shape of its stores, stands in while it is laid out.
		st := t.Value
		if field != "" {
			if f := t.Field(field); f != nil {
				st = f.Type
			}
		}
		if st.Kind != spec.KindTarget {
			return st
		}
		return spec.Type{}
	}
	l := u.layout(t)
	if l == nil {
		return spec.Type{}
	}
	name := "value"
	if field != "" {
		name = field
	}
	for i, f := range l.Value {
		if f.Name == name {
			return u.slots[t][i]
		}
	}
	return spec.Type{}
}

// layout lays a table out from the resolved types of all its uses: every
// use of a key part or a value must have one kind; strings take the
// largest buffer any use gives them.
func (u *unit) layout(t *spec.Table) *Table {
	if l, ok := u.layouts[t]; ok {
		return l
	}
	if u.busy[t] {
		return nil // a table whose value is read from itself: the stores' other uses decide
	}
	if u.busy == nil {
		u.busy, u.layouts = map[*spec.Table]bool{}, map[*spec.Table]*Table{}
	}
	u.busy[t] = true
	defer delete(u.busy, t)
	names := valueNames(t)
	keys, values, ok := u.slotTypes(t, names)
	if !ok {
		u.layouts[t] = nil
		return nil
	}
	l := newTable(t, keys, values, names, tableStackMaps(values, u.probesUsing(t), u.facts))
	u.layouts[t] = l
	if u.slots == nil {
		u.slots = map[*spec.Table][]spec.Type{}
	}
	u.slots[t] = values
	return l
}

// probesUsing counts the probes that use table t.
func (u *unit) probesUsing(t *spec.Table) int {
	seen := map[*gen]bool{}
	for _, use := range u.uses[t] {
		seen[use.g] = true
	}
	return len(seen)
}

// valueNames are the names of a table's value fields: its objects'
// fields, or "value".
func valueNames(t *spec.Table) []string {
	if t.Fields == nil {
		return []string{"value"}
	}
	var names []string
	for _, f := range t.Fields {
		names = append(names, f.Name)
	}
	return names
}

// slotTypes merges the types every use of t gives its key parts and its
// value fields (named names); ok is false when one is unknown or the uses
// disagree (reported).
func (u *unit) slotTypes(t *spec.Table, names []string) (keys, values []spec.Type, ok bool) {
	keys, values, ok = make([]spec.Type, len(t.Key)), make([]spec.Type, len(names)), true
	merge := func(g *gen, slot *spec.Type, x spec.Expr, what string) {
		ok = u.mergeSlot(g, slot, x, what) && ok
	}
	for _, use := range u.uses[t] {
		if len(use.key) != len(keys) {
			continue // reported by the spec
		}
		for i, k := range use.key {
			merge(use.g, &keys[i], k, fmt.Sprintf("%s's key", t.Name))
		}
		if use.value != nil {
			merge(use.g, &values[0], use.value, t.Name)
		}
		for _, f := range use.fields {
			if i := slices.Index(names, f.Name); i >= 0 {
				merge(use.g, &values[i], f.Value, t.Name+"."+names[i])
			}
		}
	}
	for _, v := range values {
		ok = ok && v.Kind != 0
	}
	return keys, values, ok
}

// mergeSlot merges the type of x, a use of a table's slot (what), into
// slot: one kind for every use, strings as large as the largest; false
// when x's type is unknown or another kind (reported).
func (u *unit) mergeSlot(g *gen, slot *spec.Type, x spec.Expr, what string) bool {
	got := g.typeOf(x)
	if got.Kind == spec.KindTarget {
		got = spec.TypeInt // kernel data resolved at apply
	}
	switch {
	case got.Kind == 0:
		return false
	case slot.Kind == 0:
		*slot = got
	case slot.Kind != got.Kind || (got.Kind == spec.KindBytes && got.Size != slot.Size):
		u.diags = append(u.diags, diagf(x.Range(), "Mismatched table types",
			"%s is a %s on the target, but other uses of %s make it a %s.", x.Text(), typeName(got), what, typeName(*slot)))
		return false
	case got.Size > slot.Size:
		slot.Size = got.Size
	}
	return true
}

// newTable lays out table t from the types of its key parts and value
// fields, with its maps and digest.
func newTable(t *spec.Table, keys, values []spec.Type, names []string, stacks []*Map) *Table {
	l := &Table{Address: bpf.Address{Kind: bpf.KindTable, Name: t.Name}, MaxKeys: t.MaxKeys, Objects: t.Fields != nil}
	for i, kt := range keys {
		l.Key = append(l.Key, KeyField{Name: fmt.Sprintf("key%d", i), Kind: kindOf(kt), Offset: l.KeySize, Size: slotSize(kt)})
		l.KeySize += slotSize(kt)
	}
	for i, vt := range values {
		l.Value = append(l.Value, KeyField{Name: names[i], Kind: kindOf(vt), Offset: l.ValueSize, Size: slotSize(vt)})
		l.ValueSize += slotSize(vt)
	}
	l.Maps = []*Map{
		{Ref: tableRef(t.Name), Name: mapName("t_" + t.Name), Type: ebpf.Hash, KeySize: uint32(l.KeySize), ValueSize: uint32(l.ValueSize),
			MaxEntries: uint32(t.MaxKeys), Purpose: fmt.Sprintf("table %q", t.Name)},
		{Ref: tableStatsRef(t.Name), Name: "probectl.tstat", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1,
			Purpose: "stores the full table could not take"},
	}
	l.Maps = append(l.Maps, stacks...)
	h := sha256.New()
	_ = json.NewEncoder(h).Encode([]any{l.Address.String(), l.Key, l.Value, l.MaxKeys, l.Maps})
	l.Digest = hex.EncodeToString(h.Sum(nil))[:16]
	return l
}

// kindOf is how a value of type t decodes.
func kindOf(t spec.Type) KeyKind {
	switch t.Kind {
	case spec.KindString:
		return KeyString
	case spec.KindBytes:
		return KeyBytes
	}
	return KeyInt
}

// filledBySkipped is the error for table t when only optional probes the
// target leaves out store into it: the probes left reading it would read
// nothing, for the reason those were left out (the reason's summary).
func filledBySkipped(cfg *spec.Config, out *Output, t *spec.Table) *hcl.Diagnostic {
	for _, s := range out.Skipped {
		for _, p := range cfg.Probes {
			if p.Addr != s.Address {
				continue
			}
			for _, a := range p.Actions() {
				if a.Kind == spec.Store && a.Table == t {
					summary, _, _ := strings.Cut(s.Why, ": ")
					return diagf(t.DeclRange, summary,
						"Only %s stores into %q, and the target leaves it out (it is optional): %s", p.Addr, t.Name, s.Why)
				}
			}
		}
	}
	return nil
}
