package compiler

import (
	"fmt"

	"github.com/cilium/ebpf/btf"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/spec"
)

// Resolving kernel paths against BTF: the root's type (an argument's, the
// task's, a cast's), then each field, through pointers the way C's ->
// follows them and into embedded and anonymous structs and unions the way
// C's . does, then the leaf: an integer, a pointer, a bitfield, a char
// array (a string) or another array (bytes).

// Reach of the argument routes: pt_regs holds six arguments (Regs.Args);
// bpf_get_func_arg reads MAX_BPF_FUNC_ARGS slots.
const (
	maxRegArgs     = 6
	maxTracingArgs = 12
)

// resolver resolves one kernel path; its errors are reported once, for x.
type resolver struct {
	g     *gen
	x     spec.Expr
	types *btf.Spec
}

func (r *resolver) fail(rng hcl.Range, summary, detail string, args ...any) bool {
	r.g.typeErrorf(r.x, rng, summary, detail, args...)
	return false
}

// resolveIn resolves path (x itself, or the path a built-in such as ppid
// stands for) against the target's BTF. Without BTF on the target the
// access is deferred to apply.
func (g *gen) resolveIn(x spec.Expr, path *spec.KernelPath) (*access, spec.Type) {
	types, deferred := g.kernelTypes(x)
	switch {
	case deferred:
		return g.deferAccess(x), spec.TypeTarget
	case types == nil:
		return nil, spec.Type{}
	}
	r := &resolver{g: g, x: x, types: types}
	a, t, text, ok := r.root(path)
	switch {
	case !ok:
		return nil, spec.Type{}
	case a.deferred:
		return g.deferAccess(x), spec.TypeTarget
	}
	typ, ok := r.walk(a, t, text, path.Fields)
	if !ok {
		return nil, spec.Type{}
	}
	return a, typ
}

func (g *gen) deferAccess(x spec.Expr) *access {
	g.addDeferred(x.Text())
	return &access{deferred: true}
}

// root resolves where a path starts: its access, the type of its root
// value, and the text naming it.
func (r *resolver) root(path *spec.KernelPath) (*access, btf.Type, string, bool) {
	switch path.Root {
	case spec.RootArg:
		return r.argRoot(path)
	case spec.RootTask:
		task, ok := r.structNamed("task_struct", prefixRange(r.x.Range(), len("task")))
		return &access{root: spec.RootTask}, &btf.Pointer{Target: task}, "task", ok
	}
	fn, user := "cast", path.Space == spec.SpaceUser
	if user {
		fn = "user_cast"
	}
	text := fmt.Sprintf("%s(%s, \"struct %s\")", fn, path.Base.Text(), path.Struct)
	a := &access{root: spec.RootCast, base: path.Base, user: user}
	switch ok, deferred := r.castBase(path.Base); {
	case !ok:
		return nil, nil, "", false
	case deferred:
		return &access{deferred: true}, nil, text, true
	}
	st, ok := r.structNamed(path.Struct, path.StructRange)
	return a, &btf.Pointer{Target: st}, text, ok
}

// castBase checks what a cast converts: kernel data must be a pointer;
// other integers (arg0, a saved value) are taken as addresses.
func (r *resolver) castBase(base spec.Expr) (ok, deferred bool) {
	switch t := r.g.typeOf(base); t.Kind {
	case 0:
		return false, false
	case spec.KindTarget:
		return true, true
	case spec.KindInt:
	default:
		return r.fail(base.Range(), "cast needs a pointer", "%s is a %s on the target, not a pointer.", base.Text(), typeName(t)), false
	}
	if what, notPtr := r.g.notPointer(base); notPtr {
		return r.fail(base.Range(), "cast needs a pointer",
			"%s is %s on the target, not a pointer: cast converts a pointer (arg0, a void *) to a struct pointer.", base.Text(), what), false
	}
	return true, false
}

// walk follows the fields from the root value of type t, and sets the
// leaf's read; it returns the leaf's type on the target.
func (r *resolver) walk(a *access, t btf.Type, text string, fields []spec.PathField) (spec.Type, bool) {
	inValue := true // R0 holds a value of type t; else t is at base + off
	var off, bitfield btf.Bits
	for _, f := range fields {
		comp, ok := r.fieldsOf(a, t, text, f, inValue, off)
		if !ok {
			return spec.Type{}, false
		}
		if inValue {
			inValue = false
		} else if _, ptr := btf.UnderlyingType(t).(*btf.Pointer); ptr {
			off = 0
		}
		m, moff, found := member(comp, f.Name)
		if !found {
			return spec.Type{}, r.noField(comp, t, text, f)
		}
		off += moff
		t, bitfield = m.Type, m.BitfieldSize
		text += "." + f.Name
	}
	a.typ = t
	if inValue {
		return r.rootLeaf(a, t, text)
	}
	if bitfield > 0 {
		return r.bitsLeaf(a, t, text, off, bitfield, nameRange(fields[len(fields)-1]))
	}
	a.leaf.off = int32(off / 8)
	return r.fieldLeaf(a, t, text, nameRange(fields[len(fields)-1]))
}

// fieldsOf is the struct or union whose field f is: what the pointer t
// points to (read from base + off when t is itself a field: a load), or
// the embedded struct t.
func (r *resolver) fieldsOf(a *access, t btf.Type, text string, f spec.PathField, inValue bool, off btf.Bits) (btf.Type, bool) {
	switch v := btf.UnderlyingType(t).(type) {
	case *btf.Pointer:
		target := r.complete(v.Target)
		if !isComposite(target) {
			return nil, r.fail(nameRange(f), "No fields here",
				"%s is %s on the target, a pointer to %s, which has no fields: remove .%s, or cast it to a struct pointer.", text, cName(t), cName(v.Target), f.Name)
		}
		if !inValue {
			a.loads = append(a.loads, int32(off/8))
		}
		return target, true
	case *btf.Struct, *btf.Union:
		if inValue {
			return nil, r.fail(nameRange(f), "Passed by value", "%s is %s passed by value, which probectl cannot read: only integers and pointers are.", text, cName(t))
		}
		return v, true
	}
	return nil, r.fail(nameRange(f), "No fields here", "%s is %s on the target, which has no fields: remove .%s.", text, cName(t), f.Name)
}

// rootLeaf is a root value read as it is: an argument, the task, a cast.
func (r *resolver) rootLeaf(a *access, t btf.Type, text string) (spec.Type, bool) {
	size, signed, ok := scalar(t)
	if !ok {
		return spec.Type{}, r.fail(r.x.Range(), "Cannot read this",
			"%s is %s on the target: probectl reads integers and pointers, and fields of structs through pointers.", text, cName(t))
	}
	a.leaf = leaf{kind: leafRoot, size: size, signed: signed}
	return spec.TypeInt, true
}

// fieldLeaf is a field read from kernel memory: an integer or a pointer,
// or an array read in place.
func (r *resolver) fieldLeaf(a *access, t btf.Type, text string, rng hcl.Range) (spec.Type, bool) {
	if size, signed, ok := scalar(t); ok {
		a.leaf.kind, a.leaf.size, a.leaf.signed = leafInt, size, signed
		return spec.TypeInt, true
	}
	switch v := btf.UnderlyingType(t).(type) {
	case *btf.Array:
		return r.arrayLeaf(a, v, text, rng)
	case *btf.Struct, *btf.Union:
		return spec.Type{}, r.fail(rng, "Pick a field",
			"%s is %s on the target: read one of its fields (%s).", text, cName(t), fieldList(v))
	}
	return spec.Type{}, r.fail(rng, "Cannot read this",
		"%s is %s on the target: probectl reads integers, pointers, bitfields and arrays.", text, cName(t))
}

// arrayLeaf is an array field: arrays of char (signed or unsigned, as C
// spells it) are strings, at most spec.MaxStrSize bytes of them read;
// others, __u8[16] included, are bytes.
func (r *resolver) arrayLeaf(a *access, arr *btf.Array, text string, rng hcl.Range) (spec.Type, bool) {
	size, err := btf.Sizeof(arr)
	a.leaf.kind, a.leaf.size = leafArray, size
	if isChar(arr.Type) && arr.Nelems > 0 {
		return spec.StringType(min(int(arr.Nelems), spec.MaxStrSize)), true
	}
	if err != nil || size == 0 || size > spec.MaxStrSize {
		return spec.Type{}, r.fail(rng, "Array cannot be read",
			"%s is %s on the target (%d bytes): probectl reads char arrays as strings, and other arrays of 1 to %d bytes.", text, cName(arr), size, spec.MaxStrSize)
	}
	return spec.BytesType(size), true
}

// bitsLeaf is a bitfield: the bytes it spans are read, and its bits
// shifted down and extended.
func (r *resolver) bitsLeaf(a *access, t btf.Type, text string, off, bits btf.Bits, rng hcl.Range) (spec.Type, bool) {
	_, signed, ok := scalar(t)
	shift := int(off % 8)
	span := (shift + int(bits) + 7) / 8
	if !ok || span > 8 {
		return spec.Type{}, r.fail(rng, "Bitfield cannot be read",
			"%s is a %d-bit field of %s at bit %d: probectl reads bitfields of integers that fit in 8 bytes.", text, bits, cName(t), off)
	}
	a.leaf = leaf{kind: leafBits, off: int32(off / 8), size: span, signed: signed, shift: shift, bits: int(bits)}
	return spec.TypeInt, true
}

// noField reports a field that comp, what text (of type t) is or points
// to, does not have, with the nearest names.
func (r *resolver) noField(comp, t btf.Type, text string, f spec.PathField) bool {
	hint := nearest(f.Name, memberNames(comp))
	if hint == "" {
		hint = " Its fields: " + fieldList(comp) + "."
	}
	return r.fail(nameRange(f), "Unknown struct field",
		"%s is %s, and %s has no field %q on the target.%s", text, cName(t), cName(comp), f.Name, hint)
}

// nameRange is a field's range without the dot before it.
func nameRange(f spec.PathField) hcl.Range {
	rng := f.Range
	if rng.End.Byte-rng.Start.Byte == len(f.Name)+1 {
		rng.Start.Byte++
		rng.Start.Column++
	}
	return rng
}

// complete resolves a forward declaration to the full struct or union.
func (r *resolver) complete(t btf.Type) btf.Type {
	t = btf.UnderlyingType(t)
	fwd, ok := t.(*btf.Fwd)
	if !ok {
		return t
	}
	if st, ok := r.lookupComposite(fwd.Name, fwd.Kind == btf.FwdUnion); ok {
		return st
	}
	return t
}

// structNamed finds struct name in the target's BTF.
func (r *resolver) structNamed(name string, rng hcl.Range) (btf.Type, bool) {
	if st, ok := r.lookupComposite(name, false); ok {
		return st, true
	}
	var names []string
	for t, err := range r.types.All() {
		if err != nil {
			break
		}
		if st, ok := t.(*btf.Struct); ok && st.Name != "" {
			names = append(names, st.Name)
		}
	}
	return nil, r.fail(rng, "Unknown struct", "The target's BTF has no struct %q.%s", name, nearest(name, names))
}

// lookupComposite finds the struct (or union) name: the first complete one.
func (r *resolver) lookupComposite(name string, union bool) (btf.Type, bool) {
	types, err := r.types.AnyTypesByName(name)
	if err != nil {
		return nil, false
	}
	for _, t := range types {
		switch t.(type) {
		case *btf.Struct:
			if !union {
				return t, true
			}
		case *btf.Union:
			if union {
				return t, true
			}
		}
	}
	return nil, false
}
