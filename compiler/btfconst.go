package compiler

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/spec"
)

// kernelConst resolves enum_value("NAME") and offsetof("struct S", "f")
// against the target's BTF: the constant is code, not a read. A target
// without BTF of its own (a profile) leaves it resolved at apply.
func (g *gen) kernelConst(x *spec.KernelConst) spec.Type {
	types, deferred := g.kernelTypes(x)
	switch {
	case deferred:
		g.addDeferred(x.Text())
		return spec.TypeInt
	case types == nil:
		return spec.Type{}
	}
	var v int64
	var ok bool
	if x.Enum != "" {
		v, ok = g.enumValue(x, types)
	} else {
		v, ok = g.offsetOf(x, types)
	}
	if !ok {
		return spec.Type{}
	}
	if g.consts == nil {
		g.consts = map[spec.Expr]int64{}
	}
	g.consts[x] = v
	return spec.TypeInt
}

// enumValue is the enumerator's value: every enum of the target that
// has an enumerator of that name must give it the same value.
func (g *gen) enumValue(x *spec.KernelConst, types *btf.Spec) (int64, bool) {
	var found []string
	var value int64
	for t, err := range types.All() {
		if err != nil {
			break
		}
		e, isEnum := t.(*btf.Enum)
		if !isEnum {
			continue
		}
		for _, ev := range e.Values {
			if ev.Name != x.Enum {
				continue
			}
			v := int64(ev.Value)
			if !e.Signed && e.Size < 8 {
				v = int64(ev.Value & (1<<(8*e.Size) - 1))
			}
			if len(found) > 0 && v != value {
				g.typeErrorf(x, x.Range(), "Ambiguous enum constant",
					"%s is %d in enum %s and %d in enum %s of the target's BTF: write the number.", x.Enum, value, found[0], v, orAnonymous(e.Name))
				return 0, false
			}
			value = v
			found = append(found, orAnonymous(e.Name))
		}
	}
	if len(found) == 0 {
		g.typeErrorf(x, x.Range(), "Unknown enum constant",
			"No enum of the target's BTF (%s) has a constant %s: check its name (enum skb_drop_reason's are SKB_DROP_REASON_*), or write the number.", g.facts.Label(), x.Enum)
		return 0, false
	}
	return value, true
}

// offsetOf is the byte offset of the member path in the struct.
func (g *gen) offsetOf(x *spec.KernelConst, types *btf.Spec) (int64, bool) {
	r := &resolver{g: g, x: x, types: types}
	t, ok := r.structNamed(x.Struct, x.Range())
	if !ok {
		return 0, false
	}
	var off btf.Bits
	text := "struct " + x.Struct
	for _, name := range strings.Split(x.Field, ".") {
		comp := btf.UnderlyingType(t)
		if !isComposite(comp) {
			r.fail(x.Range(), "Not a struct", "%s is a %s, which has no member %s.", text, cName(t), name)
			return 0, false
		}
		m, at, found := member(comp, name)
		if !found {
			r.fail(x.Range(), "Unknown member", "%s has no member %s. Its members: %s.", text, name, fieldList(comp))
			return 0, false
		}
		if m.BitfieldSize != 0 {
			r.fail(x.Range(), "Bitfield member", "%s.%s is a bitfield: it has no byte offset.", text, name)
			return 0, false
		}
		off += at
		t = m.Type
		text = fmt.Sprintf("%s.%s", text, name)
	}
	return int64(off / 8), true
}
