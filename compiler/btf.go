package compiler

import (
	"errors"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// Kernel data through BTF: arguments by name, the current task, casts, and
// struct fields through pointers (spec.KernelPath), typed returns and the
// built-in values read along a path (ppid).
// Offsets, sizes and signedness come from the target's BTF only. A target
// that carries no BTF (a built-in profile) defers them: the probe is
// compiled with placeholders, its plan lists the accesses "resolved at
// apply", and it is never loaded.

// access is kernel data resolved against the target's BTF: where its root
// value comes from, the pointer fields followed from it, and how its leaf
// is read.
type access struct {
	root  spec.PathRoot
	arg   int       // RootArg: the argument's slot
	base  spec.Expr // RootCast: the pointer
	user  bool      // user_cast: every read is of user memory
	loads []int32   // pointer fields followed: R0 = *(u64 *)(R0 + off)
	leaf  leaf
	typ   btf.Type // the leaf's type as declared
	// deferred: the target has no BTF; resolved at apply.
	deferred bool
}

// leafKind is how the end of a kernel path is read.
type leafKind int

const (
	leafRoot  leafKind = iota // the root's value itself: no field
	leafInt                   // an integer, enum or pointer field
	leafBits                  // a bitfield
	leafArray                 // an array: its address, read as a string or bytes
)

// leaf is the read at the end of a path, at off bytes from the last base:
// size bytes (an integer's width, the bytes a bitfield spans, an array's
// size), signed or not; a bitfield is bits wide from bit shift of them.
type leaf struct {
	kind        leafKind
	off         int32
	size        int
	signed      bool
	shift, bits int
}

// integer reports whether the leaf reads a whole integer (or pointer):
// the root's value, or an integer field.
func (l leaf) integer() bool { return l.kind == leafInt || l.kind == leafRoot }

// kernelType resolves a kernel path against the target's BTF.
func (g *gen) kernelType(x *spec.KernelPath) spec.Type {
	a, t := g.resolveIn(x, x)
	if a != nil {
		g.setAccess(x, a)
	}
	return t
}

// retType is the type of ret in a kernel probe: what the function's BTF
// says it returns.
func (g *gen) retType(x *spec.Var) spec.Type {
	types, deferred := g.kernelTypes(x)
	switch {
	case deferred:
		g.addDeferred(x.Text())
		return spec.TypeTarget
	case types == nil:
		return spec.Type{}
	}
	r, decl, t := g.resolveRet(x, types)
	g.retRead, g.retDecl = r, decl
	return t
}

func (g *gen) addDeferred(what string) {
	for _, d := range g.out.Deferred {
		if d == what {
			return
		}
	}
	g.out.Deferred = append(g.out.Deferred, what)
}

func (g *gen) setAccess(x spec.Expr, a *access) {
	if g.access == nil {
		g.access = map[spec.Expr]*access{}
	}
	g.access[x] = a
}

// kernelTypes returns the target's BTF; or deferred, when the target
// carries none and the access is resolved at apply; or nil, having
// reported at x why the target's BTF cannot be read.
func (g *gen) kernelTypes(x spec.Expr) (types *btf.Spec, deferred bool) {
	types, err := g.facts.Types()
	switch {
	case err == nil:
		return types, false
	case errors.Is(err, bpf.ErrTypesDeferred):
		return nil, true
	case errors.Is(err, bpf.ErrNoBTF):
		g.typeErrorf(x, x.Range(), "Kernel has no BTF",
			"%s reads kernel data through BTF, and the target (%s) was built without it (CONFIG_DEBUG_INFO_BTF): read arguments as arg0 to arg5.", x.Text(), g.facts.Label())
		return nil, false
	}
	g.typeErrorf(x, x.Range(), "Kernel types unavailable",
		"%s reads kernel data through BTF, and the target's cannot be read: %v. Plan against the live kernel, or a facts file from probectl target -o FILE.", x.Text(), err)
	return nil, false
}

// kernelDecl is the type the target's BTF declares for kernel data x
// (a kernel path, ret of a kernel probe, a built-in value's path such as
// ppid's), once resolved; false for
// other expressions and for data resolved at apply.
func (g *gen) kernelDecl(x spec.Expr) (btf.Type, bool) {
	if v, ok := x.(*spec.Var); ok && v.Name == "ret" {
		return g.retDecl, g.retDecl != nil
	}
	if a := g.access[x]; a != nil && !a.deferred {
		return a.typ, true
	}
	if v, ok := x.(*spec.Var); ok && g.paths[v.Name] != nil && !g.paths[v.Name].deferred {
		return g.paths[v.Name].typ, true
	}
	return nil, false
}

// notPointer says whether x is kernel data that the target declares as
// something other than a pointer, and what.
func (g *gen) notPointer(x spec.Expr) (string, bool) {
	t, ok := g.kernelDecl(x)
	if !ok {
		return "", false
	}
	if _, ptr := btf.UnderlyingType(t).(*btf.Pointer); ptr {
		return "", false
	}
	return cName(t), true
}

// kernelValue emits the code that leaves the value of an integer or pointer
// kernel path in R0, sign- or zero-extended to 64 bits.
func (g *gen) kernelValue(x *spec.KernelPath) { g.readAccess(g.access[x]) }

// kernelAddr emits the code that leaves in R0 the address of a kernel path
// whose value is an array (a char array read as a string).
func (g *gen) kernelAddr(x *spec.KernelPath) {
	a := g.access[x]
	if a == nil || a.deferred {
		g.e.Emit(asm.Mov.Imm(asm.R0, 0))
		return
	}
	g.follow(a)
	if a.leaf.off != 0 {
		g.e.Emit(asm.Add.Imm(asm.R0, a.leaf.off))
	}
}

// extendRet sign- or zero-extends ret, in R0, as the function's BTF return
// type says (an int is sign-correct without masking).
func (g *gen) extendRet() {
	if g.retRead != nil {
		g.extend(g.retRead.size, g.retRead.signed)
	}
}

// readAccess leaves the value of resolved kernel data in R0.
func (g *gen) readAccess(a *access) {
	if a == nil || a.deferred {
		g.e.Emit(asm.Mov.Imm(asm.R0, 0)) // a placeholder: never loaded
		return
	}
	g.follow(a)
	l := a.leaf
	switch l.kind {
	case leafRoot:
		g.extend(l.size, l.signed)
	case leafInt:
		g.readMem(a, l.off, l.size)
		g.extend(l.size, l.signed)
	case leafBits:
		g.readMem(a, l.off, l.size)
		// The field's bits to the top, then back down to bit 0.
		if up := int32(64 - l.shift - l.bits); up > 0 {
			g.e.Emit(asm.LSh.Imm(asm.R0, up))
		}
		if l.signed {
			g.e.Emit(asm.ArSh.Imm(asm.R0, int32(64-l.bits)))
		} else {
			g.e.Emit(asm.RSh.Imm(asm.R0, int32(64-l.bits)))
		}
	default:
		panic("compiler: an array read as an integer")
	}
}

// follow leaves in R0 the base the leaf is read from: the root's value,
// then each pointer field read from kernel memory.
func (g *gen) follow(a *access) {
	switch a.root {
	case spec.RootArg:
		if g.ctx == ctxTracing {
			g.tracingValue(asm.FnGetFuncArg, a.arg)
		} else {
			g.e.Emit(asm.LoadMem(asm.R0, regCtx, g.regs.Args[a.arg], asm.DWord))
		}
	case spec.RootTask:
		g.e.Emit(asm.FnGetCurrentTask.Call())
	case spec.RootCast:
		g.expr(a.base)
	}
	for _, off := range a.loads {
		g.readMem(a, off, 8)
	}
}

// readMem reads size bytes at R0 + off into R0 as readKernel does, from
// user memory when a is a user_cast.
func (g *gen) readMem(a *access, off int32, size int) {
	if a.user {
		g.readWith(asm.FnProbeReadUser, off, size)
		return
	}
	g.readKernel(off, size)
}

// readKernel reads size bytes of kernel memory at R0 + off into R0, zero
// above them; an address that cannot be read (a NULL pointer on the way)
// reads as 0.
func (g *gen) readKernel(off int32, size int) {
	g.readWith(asm.FnProbeReadKernel, off, size)
}

// readWith reads size bytes at R0 + off into R0 with helper fn
// (bpf_probe_read_kernel or _user), zero above them and 0 if unreadable.
func (g *gen) readWith(fn asm.BuiltinFunc, off int32, size int) {
	slot := g.e.Alloc(8)
	g.e.Emit(emit.StoreImm64(asm.RFP, slot, 0), asm.Mov.Reg(asm.R3, asm.R0))
	if off != 0 {
		g.e.Emit(asm.Add.Imm(asm.R3, off))
	}
	g.e.Emit(
		asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, int32(slot)),
		asm.Mov.Imm(asm.R2, int32(size)),
		fn.Call(),
		asm.LoadMem(asm.R0, asm.RFP, slot, asm.DWord),
	)
}

// extend sign- or zero-extends the low size bytes of R0 to 64 bits.
func (g *gen) extend(size int, signed bool) {
	switch {
	case size >= 8:
	case signed:
		shift := int32(64 - 8*size)
		g.e.Emit(asm.LSh.Imm(asm.R0, shift), asm.ArSh.Imm(asm.R0, shift))
	case size == 4:
		g.e.Emit(asm.Mov.Reg32(asm.R0, asm.R0))
	default:
		g.e.Emit(asm.And.Imm(asm.R0, int32(1)<<(8*size)-1))
	}
}
