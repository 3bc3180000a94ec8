package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// Types on the target. The spec types what it can see without a target;
// tracepoint fields and kernel data through BTF are KindTarget there, and
// are resolved here against the target's facts: an integer (pointers
// included), a string (char[N], __data_loc char[]) or bytes (u8[16]).
// Every use of a resolved value is checked again, at its range.

// typeOf is x's type on the target. It is memoized, and reports nothing:
// checkTypes has reported what is wrong before code is generated.
func (g *gen) typeOf(x spec.Expr) spec.Type {
	if t, ok := g.types[x]; ok {
		return t
	}
	t := g.resolve(x)
	if g.types == nil {
		g.types = map[spec.Expr]spec.Type{}
	}
	g.types[x] = t
	return t
}

// typeErrorf records a type error once per expression.
func (g *gen) typeErrorf(x spec.Expr, rng hcl.Range, summary, detail string, args ...any) spec.Type {
	if g.typeErrs == nil {
		g.typeErrs = map[spec.Expr]bool{}
	}
	if !g.typeErrs[x] {
		g.typeErrs[x] = true
		g.errorf(rng, summary, detail, args...)
	}
	return spec.Type{}
}

func (g *gen) resolve(x spec.Expr) spec.Type {
	if t, ok := g.resolveRead(x); ok {
		return t
	}
	return g.resolveOp(x)
}

// resolveRead types the data an expression reads: a record's field,
// kernel data, a value, a saved value, a table's; false for the rest.
func (g *gen) resolveRead(x spec.Expr) (spec.Type, bool) {
	switch x := x.(type) {
	case *spec.ArgsField:
		return g.fieldType(x), true
	case *spec.KernelPath:
		return g.kernelType(x), true
	case *spec.Var:
		if x.Name == "ret" && g.p.Addr.Kind == bpf.KindKernel {
			return g.retType(x), true
		}
		if b := spec.LookupBuiltin(x.Name); b != nil && b.Path != nil {
			return g.pathType(x, b), true
		}
		if x.Name == "cwd" {
			return g.cwdType(x), true
		}
		return x.Type(), true
	case *spec.EntryRef:
		for _, f := range g.p.Entry.Save {
			if f.Name == x.Name {
				return g.typeOf(f.Value), true
			}
		}
		return x.Type(), true
	case *spec.TableRead:
		return g.u.tableSlot(x.Table, x.Field), true
	case *spec.KernelConst:
		return g.kernelConst(x), true
	}
	return spec.Type{}, false
}

// resolveOp types an operator or a function from its operands.
func (g *gen) resolveOp(x spec.Expr) spec.Type {
	switch x := x.(type) {
	case *spec.Unary:
		if t := g.typeOf(x.X); x.Op != spec.OpNot && !g.numeric(x.X, t) {
			return spec.Type{}
		}
	case *spec.Binary:
		return g.resolveBinary(x)
	case *spec.Cond:
		return g.resolveCond(x)
	case *spec.Str:
		return g.resolveStr(x)
	case *spec.Join:
		if t := g.typeOf(x.X); t.Kind != 0 && !g.numeric(x.X, t) {
			return spec.Type{}
		}
	case *spec.Buf:
		return g.resolveBuf(x)
	case *spec.StartsWith:
		return g.resolveStartsWith(x)
	case *spec.ByteSwap:
		return g.numericOf(x, x.X)
	case *spec.KernelRead:
		return g.numericOf(x, x.X)
	case *spec.IntCast:
		return g.numericOf(x, x.X)
	case *spec.Display:
		return g.displayType(x)
	}
	return x.Type()
}

// resolveStartsWith checks that starts_with reads a string.
func (g *gen) resolveStartsWith(x *spec.StartsWith) spec.Type {
	if t := g.typeOf(x.X); t.Kind != 0 && t.Kind != spec.KindTarget && !t.IsString() {
		return g.typeErrorf(x, x.X.Range(), "starts_with needs a string", "%s is a %s on the target.", x.X.Text(), t)
	}
	return x.Type()
}

// numericOf is x's type when its operand is a number on the target.
func (g *gen) numericOf(x, operand spec.Expr) spec.Type {
	if !g.numeric(operand, g.typeOf(operand)) {
		return spec.Type{}
	}
	return x.Type()
}

// resolveCond types a condition: an integer one needs numbers in both
// branches.
func (g *gen) resolveCond(x *spec.Cond) spec.Type {
	g.typeOf(x.If)
	tt, ft := g.typeOf(x.Then), g.typeOf(x.Else)
	if x.Type().Kind == spec.KindInt && (!g.numeric(x.Then, tt) || !g.numeric(x.Else, ft)) {
		return spec.Type{}
	}
	return x.Type()
}

// resolveStr checks that str reads a string: through a pointer, or a char
// array in place.
func (g *gen) resolveStr(x *spec.Str) spec.Type {
	switch t := g.typeOf(x.X); t.Kind {
	case spec.KindInt:
		return g.strFromInt(x)
	case spec.KindString, spec.KindTarget:
		// a char array to read in place; kernel data resolved at apply
	case 0:
	default:
		return g.typeErrorf(x, x.X.Range(), "str needs a pointer",
			"%s is a %s on the target, not a pointer or a char array.", x.X.Text(), t)
	}
	return x.Type()
}

// strFromInt checks str of an integer: it must be a pointer, and under
// the raw-address policy not one from a tracepoint's record.
func (g *gen) strFromInt(x *spec.Str) spec.Type {
	if what, notPtr := g.notPointer(x.X); notPtr {
		return g.typeErrorf(x, x.X.Range(), "str needs a pointer",
			"%s is %s on the target, not a pointer or a char array: there is no string to read.", x.X.Text(), what)
	}
	if f, ok := x.X.(*spec.ArgsField); ok && g.u.policy.Denies(spec.RawAddress) && g.space(x) == spec.SpaceKernel {
		// A record's integer or pointer is not typed by BTF and may
		// be a value a process passed (spec.RawAddress).
		fn := map[spec.Space]string{spec.SpaceAuto: "str", spec.SpaceKernel: "kernel_str"}[x.Space]
		d := spec.DenyRawAddress(fn, f, "a number in the event's record, not a string in it")
		return g.typeErrorf(x, *d.Subject, d.Summary, "%s", d.Detail)
	}
	return x.Type()
}

// displayType checks what a decoder shows, on the target: an integer for
// most; an IPv4 address (an integer or 4 bytes) for inet, 16 bytes for
// inet6. The key holds the value as it is (and the port after it).
func (g *gen) displayType(x *spec.Display) spec.Type {
	t := g.typeOf(x.X)
	switch {
	case t.Kind == 0:
		return spec.Type{}
	case t.Kind == spec.KindTarget: // resolved at apply
	case x.Decoder == spec.DecodeInet:
		if t.Kind != spec.KindInt && !(t.Kind == spec.KindBytes && t.Size == 4) {
			return g.typeErrorf(x, x.X.Range(), "inet needs an IPv4 address",
				"%s has type %s on the target: inet shows a 32-bit address as the kernel stores it (an integer, or 4 bytes).", x.X.Text(), typeName(t))
		}
	case x.Decoder == spec.DecodeInet6:
		if t.Kind != spec.KindBytes || t.Size != 16 {
			return g.typeErrorf(x, x.X.Range(), "inet6 needs an IPv6 address",
				"%s has type %s on the target: inet6 shows a 16-byte address (in6_u.u6_addr8, a u8[16] field).", x.X.Text(), typeName(t))
		}
	default:
		if !g.numeric(x.X, t) {
			return spec.Type{}
		}
	}
	if x.Port != nil {
		if !g.numeric(x.Port, g.typeOf(x.Port)) {
			return spec.Type{}
		}
		return x.Type()
	}
	if x.Decoder == spec.DecodeUsym {
		return x.Type() // the address and the process id
	}
	return t
}

// unsigned64 reports whether x is a 64-bit value the target declares
// unsigned: a u64 tracepoint field or a pointer, an unsigned long or a
// pointer in kernel data or a kernel function's return, u64(x), or a
// value saved from one. show prints it as the kernel stores it, where a
// signed integer would print negative above 2^63.
func (g *gen) unsigned64(x spec.Expr) bool {
	switch x := x.(type) {
	case *spec.IntCast:
		return x.Bits == 64 && !x.Signed
	case *spec.ArgsField:
		return g.unsignedField(x)
	case *spec.KernelPath:
		a := g.access[x]
		return a != nil && !a.deferred && a.leaf.integer() && a.leaf.size == 8 && !a.leaf.signed
	case *spec.Var:
		return x.Name == "ret" && g.retRead != nil && g.retRead.size == 8 && !g.retRead.signed
	case *spec.EntryRef:
		if v := g.saved(x.Name); v != nil {
			return g.unsigned64(v)
		}
	}
	return false
}

// unsignedField reports whether the probe's (first) event declares field
// x a u64 or a pointer.
func (g *gen) unsignedField(x *spec.ArgsField) bool {
	if len(g.tps) == 0 {
		return false
	}
	f := g.tps[0].Field(x.Name)
	return f != nil && f.Size == 8 && !f.Signed && (f.Class == bpf.FieldInteger || f.Class == bpf.FieldPointer)
}

// nonNegative reports whether x's value is never negative where guards
// (the action's when, its handler's) hold, as the compiler can prove: a
// value a guard bounds (when = ret > 0; a conjunct X > c or X >= c, c a
// literal >= 0, X written as in the value); a literal >= 0; a value the target declares
// unsigned (a tracepoint field, kernel data, a kernel function's ret),
// u8(x) to u64(x); a built-in value the table says is (pid, ktime, ...:
// spec.Builtin.NonNegative); a comparison or !x (0 or 1); +, *, /, %, |, ^ and >> of
// such values, & with one, a condition whose branches are, a value saved
// from one; and ktime - entry.NAME where NAME saved ktime (the clock does
// not go back, and the entry half ran before). Anything else may be
// negative: a signed field or ret, arg0-arg5 and a user function's ret
// (the registers, untyped), other differences, -x, ~x and <<. A sum of
// values that are never negative never falls: it is served as a counter.
func (g *gen) nonNegative(x spec.Expr, guards ...spec.Expr) bool {
	for _, w := range guards {
		if bounded(w, x) {
			return true
		}
	}
	if nn, ok := g.nonNegativeRead(x); ok {
		return nn
	}
	nn := func(x spec.Expr) bool { return g.nonNegative(x, guards...) }
	switch x := x.(type) {
	case *spec.IntLit:
		return x.Value >= 0
	case *spec.BoolLit, *spec.Has, *spec.StartsWith:
		return true
	case *spec.IntCast:
		return !x.Signed || nn(x.X) && x.Bits == 64
	case *spec.Unary:
		return x.Op == spec.OpNot
	case *spec.Cond:
		return nn(x.Then) && nn(x.Else)
	case *spec.Binary:
		return g.nonNegativeBinary(x, nn)
	}
	return false
}

// nonNegativeRead says whether data x reads is never negative, as the
// target declares it; false for expressions that are not reads.
func (g *gen) nonNegativeRead(x spec.Expr) (nn, ok bool) {
	switch x := x.(type) {
	case *spec.ArgsField:
		return g.unsignedInEvery(x), true
	case *spec.KernelPath:
		a := g.access[x]
		return a != nil && !a.deferred && a.leaf.integer() && !a.leaf.signed, true
	case *spec.Var:
		return g.nonNegativeVar(x), true
	case *spec.EntryRef:
		if v := g.saved(x.Name); v != nil {
			return g.nonNegative(v), true // on_entry's guards are not these
		}
		return false, true
	}
	return false, false
}

// unsignedInEvery reports whether every event of the probe declares field
// x an unsigned integer or a pointer.
func (g *gen) unsignedInEvery(x *spec.ArgsField) bool {
	if len(g.tps) == 0 {
		return false
	}
	for _, tp := range g.tps {
		f := tp.Field(x.Name)
		if f == nil || f.Signed || f.Class != bpf.FieldInteger && f.Class != bpf.FieldPointer {
			return false
		}
	}
	return true
}

// nonNegativeVar reports whether a value is never negative: a kernel
// function's unsigned ret, and the ids, counters and clocks.
func (g *gen) nonNegativeVar(x *spec.Var) bool {
	if x.Name == "ret" {
		return g.p.Addr.Kind == bpf.KindKernel && g.retRead != nil && !g.retRead.signed
	}
	b := spec.LookupBuiltin(x.Name)
	return b != nil && b.NonNegative
}

// nonNegativeBinary: comparisons and logic give 0 or 1; +, *, /, %, | and
// ^ keep operands that are never negative so, & needs one, >> the left;
// of differences, only ktime - entry.NAME where NAME saved ktime.
func (g *gen) nonNegativeBinary(x *spec.Binary, nn func(spec.Expr) bool) bool {
	switch x.Op {
	case spec.OpEq, spec.OpNe, spec.OpLt, spec.OpLe, spec.OpGt, spec.OpGe, spec.OpAnd, spec.OpOr:
		return true
	case spec.OpAdd, spec.OpMul, spec.OpDiv, spec.OpMod, spec.OpBOr, spec.OpBXor:
		return nn(x.L) && nn(x.R)
	case spec.OpBAnd:
		return nn(x.L) || nn(x.R)
	case spec.OpShr:
		return nn(x.L)
	case spec.OpSub:
		return isVar(x.L, "ktime") && isEntry(x.R) && isVar(g.saved(x.R.(*spec.EntryRef).Name), "ktime")
	}
	return false
}

// bounded reports whether the guard w, where it holds, keeps x >= 0: w or
// one of its && conjuncts is x > c or x >= c (or c < x, c <= x) with c a
// literal >= 0, x written alike, and x reads nothing that another CPU may
// change between the guard's read and the value's (kernel data, tables).
func bounded(w, x spec.Expr) bool {
	fixed := true
	spec.Walk(x, func(x spec.Expr) {
		switch x.(type) {
		case *spec.KernelPath, *spec.TableRead, *spec.Has:
			fixed = false
		}
	})
	return fixed && guardBounds(w, x)
}

func guardBounds(w, x spec.Expr) bool {
	b, ok := w.(*spec.Binary)
	if !ok {
		return false
	}
	if b.Op == spec.OpAnd {
		return guardBounds(b.L, x) || guardBounds(b.R, x)
	}
	l, op, r := b.L, b.Op, b.R
	switch op { // c < x is x > c
	case spec.OpLt:
		l, op, r = r, spec.OpGt, l
	case spec.OpLe:
		l, op, r = r, spec.OpGe, l
	}
	c, ok := r.(*spec.IntLit)
	if !ok || op != spec.OpGt && op != spec.OpGe || c.Value < 0 {
		return false
	}
	return sameText(l, x)
}

// sameText reports whether two expressions are written alike, but spaces.
func sameText(a, b spec.Expr) bool {
	return strings.Join(strings.Fields(a.Text()), "") == strings.Join(strings.Fields(b.Text()), "")
}

// saved is the value on_entry saves as name, or nil.
func (g *gen) saved(name string) spec.Expr {
	if g.p.Entry != nil {
		for _, f := range g.p.Entry.Save {
			if f.Name == name {
				return f.Value
			}
		}
	}
	return nil
}

func isVar(x spec.Expr, name string) bool {
	v, ok := x.(*spec.Var)
	return ok && v.Name == name
}

func isEntry(x spec.Expr) bool {
	_, ok := x.(*spec.EntryRef)
	return ok
}

// numeric checks that a resolved value can be computed with.
func (g *gen) numeric(x spec.Expr, t spec.Type) bool {
	switch t.Kind {
	case spec.KindInt, spec.KindTarget: // KindTarget: kernel data resolved at apply
		return true
	case 0:
		return false // already reported
	case spec.KindString:
		g.typeErrorf(x, x.Range(), "Not an integer",
			"%s is a string on the target (%d bytes), not an integer: compare it with a string literal, or key by it.", x.Text(), t.Size)
	default:
		g.typeErrorf(x, x.Range(), "Not an integer", "%s is a %s on the target, not an integer.", x.Text(), t)
	}
	return false
}

func (g *gen) resolveBinary(x *spec.Binary) spec.Type {
	lt, rt := g.typeOf(x.L), g.typeOf(x.R)
	switch x.Op {
	case spec.OpAnd, spec.OpOr:
		return x.Type()
	case spec.OpEq, spec.OpNe:
		if _, ok := spec.FuncName(x); ok {
			return x.Type()
		}
		if _, ok := spec.EventName(x); ok {
			return x.Type()
		}
		if _, _, ok := spec.PodMatch(x); ok {
			return x.Type()
		}
		if lit, ok := x.R.(*spec.StringLit); ok {
			switch {
			case lt.Kind == 0, lt.Kind == spec.KindTarget:
			case !lt.IsString():
				g.typeErrorf(x, x.Range(), "Mismatched comparison",
					"%s is a %s on the target and %s is a string.", x.L.Text(), lt, x.R.Text())
			case len(lit.Value) >= lt.Size:
				g.typeErrorf(x, lit.Range(), "String too long",
					"%q has %d bytes; %s holds at most %d on the target, so they are never equal.", lit.Value, len(lit.Value), x.L.Text(), lt.Size-1)
			}
			return x.Type()
		}
		if lt.Kind == spec.KindBool && rt.Kind == spec.KindBool {
			return x.Type()
		}
	}
	if g.numeric(x.L, lt) && g.numeric(x.R, rt) {
		return x.Type()
	}
	return spec.Type{}
}

// fieldType resolves args.FIELD of a tracepoint probe from the events'
// formats: every event the probe attaches must have the field, with one
// type.
func (g *gen) fieldType(x *spec.ArgsField) spec.Type {
	if len(g.unformatted) > 0 {
		return spec.Type{} // reported once per event: unit.unknownFormats
	}
	var first *bpf.TracepointField
	var lacking []string
	for _, tp := range g.tps {
		fl := tp.Field(x.Name)
		switch {
		case fl == nil:
			lacking = append(lacking, tp.Event)
		case first == nil:
			first = fl
		case !bpf.SameType(fl.Type, first.Type) || fl.Size != first.Size:
			return g.typeErrorf(x, x.Range(), "Field types differ",
				"args.%s is %s in %s but %s in %s: a probe over several events reads a field only when it has one type in all.",
				x.Name, first.Type, g.tps[0].Event, fl.Type, tp.Event)
		}
	}
	if len(lacking) > 0 {
		if len(g.tps) == 1 {
			return g.typeErrorf(x, x.Range(), "Unknown tracepoint field",
				"%s has no field %q. Its fields: %s.", lacking[0], x.Name, strings.Join(g.tps[0].FieldNames(), ", "))
		}
		return g.typeErrorf(x, x.Range(), "Field missing from events",
			"args.%s is not a field of %s, which this probe also attaches to. Read it only in a probe over events that all have it.", x.Name, strings.Join(lacking, ", "))
	}
	if first == nil {
		return spec.Type{} // no format: reported with the event
	}
	switch first.Class {
	case bpf.FieldInteger, bpf.FieldPointer:
		return spec.TypeInt
	case bpf.FieldString:
		return spec.StringType(first.Size)
	case bpf.FieldDataLoc:
		if first.Elem() == "char" {
			return spec.StringType(spec.DefaultStrSize)
		}
	case bpf.FieldArray:
		return spec.BytesType(first.Size)
	}
	return g.typeErrorf(x, x.Range(), "Field cannot be read",
		"args.%s is %s: probes read integers, pointers, strings (char[N], __data_loc char[]) and byte arrays.", x.Name, first.Type)
}

// checkTypes resolves the type of every expression of the probe, reporting
// each wrong use of a target-typed value at its range.
func (g *gen) checkTypes() {
	for _, x := range g.exprs() {
		spec.Walk(x, func(x spec.Expr) { g.typeOf(x) })
	}
	check := func(x spec.Expr, what string) {
		if x == nil {
			return
		}
		switch t := g.typeOf(x); {
		case t.Kind == spec.KindBool:
			g.typeErrorf(x, x.Range(), "Cannot hold a bool", "%s cannot hold a condition: use %s ? 1 : 0.", what, x.Text())
		}
	}
	for _, h := range g.handlers() {
		for _, f := range h.Save {
			check(f.Value, "save")
		}
		for _, a := range h.Actions {
			if a.Value != nil && a.Kind != spec.Store {
				g.numeric(a.Value, g.typeOf(a.Value))
			}
			for _, b := range a.By {
				check(b, "by")
			}
			for _, f := range a.Fields {
				check(f.Value, string(a.Kind))
			}
		}
	}
}

// handlers lists the probe's handlers.
func (g *gen) handlers() []*spec.Handler {
	var hs []*spec.Handler
	for _, h := range []*spec.Handler{g.p.Entry, g.p.Exit} {
		if h != nil {
			hs = append(hs, h)
		}
	}
	return hs
}

// exprs lists every top-level expression of the probe.
func (g *gen) exprs() []spec.Expr { return g.p.Exprs() }

// slotSize is how many bytes a value of type t takes in a key, a record or
// a table: whole 8-byte words.
func slotSize(t spec.Type) int { return (t.Bytes() + 7) &^ 7 }

// typeName says what a resolved type is, for diagnostics.
func typeName(t spec.Type) string {
	if t.Kind == spec.KindString {
		return fmt.Sprintf("string (%d bytes)", t.Size)
	}
	return t.String()
}

// guards are the conditions under which action a runs: its when and its
// handler's.
func (g *gen) guards(a *spec.Action) []spec.Expr {
	var out []spec.Expr
	if a.When != nil {
		out = append(out, a.When)
	}
	for _, h := range []*spec.Handler{g.p.Entry, g.p.Exit} {
		if h != nil && h.When != nil && slices.Contains(h.Actions, a) {
			out = append(out, h.When)
		}
	}
	return out
}
