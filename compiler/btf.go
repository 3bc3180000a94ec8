package compiler

import (
	"github.com/probectl/probectl/spec"
)

// Kernel data through BTF: arguments by name, the current task, casts, and
// struct fields through pointers (spec.KernelPath), typed returns and ppid.

// kernelType resolves a kernel path against the target's BTF.
func (g *gen) kernelType(x *spec.KernelPath) spec.Type {
	return g.typeErrorf(x, x.Range(), "Kernel data not available", "Reading kernel data through BTF is not implemented yet.")
}

// retType is the type of ret in a kernel probe: what the function's BTF
// says it returns.
func (g *gen) retType(x *spec.Var) spec.Type { return spec.TypeInt }

// kernelValue emits the code that leaves the value of an integer or pointer
// kernel path in R0, sign- or zero-extended to 64 bits.
func (g *gen) kernelValue(x *spec.KernelPath) {}

// kernelAddr emits the code that leaves in R0 the address of a kernel path
// whose value is an array (a char array read as a string).
func (g *gen) kernelAddr(x *spec.KernelPath) {}

// ppid emits the code that leaves the parent's pid (tgid) in R0.
func (g *gen) ppid() {}

// extendRet sign- or zero-extends ret, in R0, as the function's BTF return
// type says (an int is sign-correct without masking).
func (g *gen) extendRet() {}
