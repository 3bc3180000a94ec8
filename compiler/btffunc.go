package compiler

import (
	"strings"

	"github.com/cilium/ebpf/btf"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/spec"
)

// Function prototypes: args.NAME is the parameter the BTF of every one of
// the probe's functions declares by that name, at one position with one
// type; ret is what they all return.

// proto finds a function's prototype in the target's BTF.
func (r *resolver) proto(fn string, rng hcl.Range) (*btf.FuncProto, bool) {
	found, ambiguous := btfProto(r.types, fn)
	if ambiguous {
		return nil, r.fail(rng, "Function is ambiguous",
			"The target's BTF declares several functions %s with different prototypes, so which one the probe attaches is not known: read arguments as arg0 to arg5.", fn)
	}
	if found == nil {
		return nil, r.fail(rng, "Function has no BTF",
			"The target's BTF does not declare %s (a module's function, or a copy the compiler specialised, such as a .isra or .constprop one), so %s cannot be typed. Read arguments as arg0 to arg5, or probe a function the BTF declares.", fn, r.x.Text())
	}
	return found, true
}

// btfProto is the prototype types declares for fn: nil when it declares
// none, ambiguous when it declares several that differ.
func btfProto(types *btf.Spec, fn string) (proto *btf.FuncProto, ambiguous bool) {
	found, _ := types.AnyTypesByName(fn)
	for _, t := range found {
		f, ok := t.(*btf.Func)
		if !ok {
			continue
		}
		p, ok := f.Type.(*btf.FuncProto)
		if !ok {
			continue
		}
		if proto != nil && !sameProto(proto, p) {
			return nil, true
		}
		proto = p
	}
	return proto, false
}

func sameProto(a, b *btf.FuncProto) bool {
	if len(a.Params) != len(b.Params) || !sameType(a.Return, b.Return) {
		return false
	}
	for i := range a.Params {
		if a.Params[i].Name != b.Params[i].Name || !sameType(a.Params[i].Type, b.Params[i].Type) {
			return false
		}
	}
	return true
}

// argRoot resolves args.NAME: the parameter's position, the same in every
// function, and its type.
func (r *resolver) argRoot(path *spec.KernelPath) (*access, btf.Type, string, bool) {
	text := "args." + path.Arg
	rng := prefixRange(r.x.Range(), len(text))
	fns, _ := r.g.knownFunctions()
	if fns == nil {
		return &access{deferred: true}, nil, text, true // a glob the target cannot resolve
	}
	index, firstFn := -1, ""
	var typ btf.Type
	for _, fn := range fns {
		proto, ok := r.proto(fn, rng)
		if !ok {
			return nil, nil, "", false
		}
		i := paramIndex(proto, path.Arg)
		switch {
		case i < 0:
			return nil, nil, "", r.noParam(fn, proto, path.Arg, rng)
		case index < 0:
			index, firstFn, typ = i, fn, proto.Params[i].Type
		case i != index || !sameType(typ, proto.Params[i].Type):
			return nil, nil, "", r.fail(rng, "Parameters differ",
				"%s is %s (parameter %d) in %s but %s (parameter %d) in %s: a probe over several functions reads an argument by name only when all declare it alike. Split the probe, or read it as argN.",
				text, cName(typ), index, firstFn, cName(proto.Params[i].Type), i, fn)
		}
		if !r.reachable(fn, proto, i, text, rng) {
			return nil, nil, "", false
		}
	}
	return &access{root: spec.RootArg, arg: index}, typ, text, true
}

func paramIndex(proto *btf.FuncProto, name string) int {
	for i, p := range proto.Params {
		if p.Name == name && name != "" {
			return i
		}
	}
	return -1
}

func (r *resolver) noParam(fn string, proto *btf.FuncProto, name string, rng hcl.Range) bool {
	var names []string
	for _, p := range proto.Params {
		if p.Name != "" {
			names = append(names, p.Name)
		}
	}
	list := "none"
	if len(names) > 0 {
		list = strings.Join(names, ", ")
	}
	return r.fail(rng, "Not a parameter",
		"%s has no parameter %q on the target; its parameters are: %s.%s", fn, name, list, nearest(name, names))
}

// reachable checks that the route reads parameter i where the BTF says it
// is: each earlier parameter takes one register (one trampoline slot),
// which a struct passed by value would not.
func (r *resolver) reachable(fn string, proto *btf.FuncProto, i int, text string, rng hcl.Range) bool {
	for j := 0; j <= i; j++ {
		if _, _, ok := scalar(proto.Params[j].Type); !ok && j < i {
			return r.fail(rng, "Argument out of reach",
				"%s follows parameter %s of %s, %s passed by value, which takes registers probectl does not count: %s cannot be located.",
				text, proto.Params[j].Name, fn, cName(proto.Params[j].Type), text)
		}
	}
	limit, how := maxRegArgs, "kprobe-family programs read the first 6 from the registers"
	if r.g.d.route == RouteTrampoline {
		limit, how = maxTracingArgs, "fentry reads the first 12"
	}
	if i >= limit {
		return r.fail(rng, "Argument out of reach", "%s is parameter %d of %s, and %s.", text, i, fn, how)
	}
	return true
}

// resolveRet types ret: the return type every function declares, which
// says how the register extends.
func (g *gen) resolveRet(x *spec.Var, types *btf.Spec) (*leaf, btf.Type, spec.Type) {
	r := &resolver{g: g, x: x, types: types}
	fns, _ := g.knownFunctions()
	if fns == nil {
		g.addDeferred(x.Text())
		return nil, nil, spec.TypeTarget
	}
	var first *leaf
	var firstFn string
	var firstType btf.Type
	for _, fn := range fns {
		proto, ok := r.proto(fn, x.Range())
		if !ok {
			return nil, nil, spec.Type{}
		}
		size, signed, ok := scalar(proto.Return)
		if !ok {
			return nil, nil, g.typeErrorf(x, x.Range(), "ret has no value",
				"%s returns %s on the target: ret reads integers and pointers.", fn, cName(proto.Return))
		}
		l := &leaf{kind: leafRoot, size: size, signed: signed}
		switch {
		case first == nil:
			first, firstFn, firstType = l, fn, proto.Return
		case *l != *first:
			return nil, nil, g.typeErrorf(x, x.Range(), "Return types differ",
				"%s returns %s and %s returns %s: ret is read one way for all of a probe's functions. Split the probe.",
				firstFn, cName(firstType), fn, cName(proto.Return))
		}
	}
	return first, firstType, spec.TypeInt
}
