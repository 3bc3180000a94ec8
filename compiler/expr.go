package compiler

import (
	"fmt"
	"math"

	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

func (g *gen) imm(v int64) {
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		g.e.Emit(asm.Mov.Imm(asm.R0, int32(v)))
		return
	}
	g.e.Emit(asm.LoadImm(asm.R0, v, asm.DWord))
}

// expr evaluates x into R0 (bools as 0 or 1). It may call helpers, so R1-R5
// are clobbered; intermediate values live on the stack. Every instruction
// is tagged with the expression that emits it: its first, and those it
// emits after its operands'.
func (g *gen) expr(x spec.Expr) {
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	g.e.Origin(x.Range())
	switch x := x.(type) {
	case *spec.Has:
		g.has(x)
	case *spec.StartsWith:
		g.startsWith(x)
	case *spec.ByteSwap:
		g.expr(x.X)
		g.e.Origin(x.Range())
		g.e.Emit(asm.HostTo(asm.BE, asm.R0, map[int]asm.Size{16: asm.Half, 32: asm.Word}[x.Bits]))
	case *spec.KernelRead:
		g.expr(x.X)
		g.e.Origin(x.Range())
		g.kernelU64()
	case *spec.Unary:
		g.unary(x)
	case *spec.Binary:
		g.binary(x)
	case *spec.IntCast:
		g.expr(x.X)
		g.e.Origin(x.Range())
		g.extend(x.Bits/8, x.Signed)
	case *spec.Display:
		g.expr(x.X) // the decoder is applied when the key is shown
	case *spec.Cond:
		g.choose(x)
	default:
		g.value(x)
	}
}

// value evaluates a literal or a read of a named value (a variable, an
// entry field, a tracepoint field, a kernel path, a table) into R0.
func (g *gen) value(x spec.Expr) {
	switch x := x.(type) {
	case *spec.IntLit:
		g.imm(x.Value)
	case *spec.KernelConst:
		g.imm(g.consts[x]) // 0, a placeholder, when resolved at apply
	case *spec.KernelAddr:
		g.kaddr(x.Symbol)
	case *spec.BoolLit:
		v := int64(0)
		if x.Value {
			v = 1
		}
		g.imm(v)
	case *spec.Var:
		g.variable(x)
	case *spec.EntryRef:
		g.e.Emit(asm.LoadMem(asm.R0, asm.RFP, g.entryArea+int16(g.entryFields[x.Name]), asm.DWord))
	case *spec.ArgsField:
		g.tracepointField(x)
	case *spec.KernelPath:
		g.kernelValue(x)
	case *spec.TableRead:
		g.tableValue(x)
	default:
		panic(fmt.Sprintf("compiler: unchecked expression %T", x))
	}
}

// unary evaluates !X, -X or bnot(X) into R0.
func (g *gen) unary(x *spec.Unary) {
	g.expr(x.X)
	g.e.Origin(x.Range())
	switch x.Op {
	case spec.OpNot:
		g.e.Emit(asm.Xor.Imm(asm.R0, 1))
	case spec.OpNeg:
		g.e.Emit(asm.Neg.Imm(asm.R0, 0))
	case spec.OpBNot:
		g.e.Emit(asm.Xor.Imm(asm.R0, -1))
	}
}

// choose evaluates If ? Then : Else into R0.
func (g *gen) choose(x *spec.Cond) {
	elseL, done := g.e.NewLabel("else"), g.e.NewLabel("endif")
	g.expr(x.If)
	g.e.Origin(x.Range())
	g.e.Emit(asm.JEq.Imm(asm.R0, 0, elseL))
	g.expr(x.Then)
	g.e.Origin(x.Range())
	g.e.Emit(asm.Ja.Label(done))
	g.e.Mark(elseL)
	g.expr(x.Else)
	g.e.Mark(done)
}

// tracingValue reads an argument (n >= 0) or the return value (n < 0) of a
// fentry/fexit program through bpf_get_func_arg/ret, which know the
// function's prototype; a missing argument reads as 0.
func (g *gen) tracingValue(fn asm.BuiltinFunc, n int) {
	slot := g.e.Alloc(8)
	g.e.Emit(
		emit.StoreImm64(asm.RFP, slot, 0),
		asm.Mov.Reg(asm.R1, regCtx),
	)
	if n >= 0 {
		g.e.Emit(asm.Mov.Imm(asm.R2, int32(n)), asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, int32(slot)))
	} else {
		g.e.Emit(asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(slot)))
	}
	g.e.Emit(fn.Call(), asm.LoadMem(asm.R0, asm.RFP, slot, asm.DWord))
}

// tracepointField loads an integer field of the record, sign-extending
// signed narrow ones. A probe over several events whose field sits at
// different offsets picks the offset by its attach cookie (the event).
func (g *gen) tracepointField(x *spec.ArgsField) {
	if g.ctx == ctxTracing {
		g.btfParam(x)
		return
	}
	g.perEvent(x.Name, func(f *bpf.TracepointField) {
		g.ctxLoad(f.Offset, f.Size)
		if f.Signed && f.Size < 8 {
			shift := int32(64 - 8*f.Size)
			g.e.Emit(asm.LSh.Imm(asm.R0, shift), asm.ArSh.Imm(asm.R0, shift))
		}
	})
}

// btfParam loads a tp_btf program's TP_PROTO parameter that stands for
// field x (the route checked they share the name, size and sign): a u64
// of the context, cut to the field's size and extended as the field is.
func (g *gen) btfParam(x *spec.ArgsField) {
	f := g.tps[0].Field(x.Name)
	g.e.Emit(asm.LoadMem(asm.R0, regCtx, int16(8*g.d.btfParams[x.Name]), asm.DWord))
	if f.Size < 8 {
		shift := int32(64 - 8*f.Size)
		g.e.Emit(asm.LSh.Imm(asm.R0, shift))
		if f.Signed {
			g.e.Emit(asm.ArSh.Imm(asm.R0, shift))
		} else {
			g.e.Emit(asm.RSh.Imm(asm.R0, shift))
		}
	}
}

// ctxLoad loads size bytes (1, 2, 4 or 8) at off in the tracepoint's
// record into R0, zero-extended. The kernel attaches a tracepoint program
// only if its loads from the record end within that event's record, and
// one program serves every event of the probe: a load past the end of the
// shortest record (a field that sits further along in another event, such
// as tgkill's sig after kill's) reads through bpf_probe_read_kernel, which
// the kernel does not count as a load from the record.
func (g *gen) ctxLoad(off, size int) {
	width := map[int]asm.Size{1: asm.Byte, 2: asm.Half, 4: asm.Word, 8: asm.DWord}[size]
	if off+size <= g.shortestRecord() {
		g.e.Emit(asm.LoadMem(asm.R0, regCtx, int16(off), width))
		return
	}
	slot := g.e.Alloc(8)
	g.e.Emit(
		emit.StoreImm64(asm.RFP, slot, 0),
		asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, int32(slot)),
		asm.Mov.Imm(asm.R2, int32(size)),
		asm.Mov.Reg(asm.R3, regCtx), asm.Add.Imm(asm.R3, int32(off)),
		asm.FnProbeReadKernel.Call(),
		asm.LoadMem(asm.R0, asm.RFP, slot, width),
	)
}

// shortestRecord is the size of the shortest record among the probe's
// events: the end of its last field, as the kernel measures it when it
// attaches a program.
func (g *gen) shortestRecord() int {
	shortest := math.MaxInt
	for _, tp := range g.tps {
		end := 0
		for _, f := range tp.Fields {
			end = max(end, f.Offset+f.Size)
		}
		shortest = min(shortest, end)
	}
	return shortest
}

// perEvent emits emit for the field as each event lays it out: once when
// all agree on its offset, else in a switch on the attach cookie.
func (g *gen) perEvent(name string, emit func(f *bpf.TracepointField)) {
	first := g.tps[0].Field(name)
	same := true
	for _, tp := range g.tps[1:] {
		same = same && tp.Field(name).Offset == first.Offset
	}
	if same {
		emit(first)
		return
	}
	done := g.e.NewLabel("field")
	slot := g.e.Alloc(8)
	g.funcCookie()
	g.e.Emit(asm.StoreMem(asm.RFP, slot, asm.R0, asm.DWord))
	for i, tp := range g.tps {
		next := g.e.NewLabel("event")
		g.e.Emit(asm.LoadMem(asm.R1, asm.RFP, slot, asm.DWord), asm.JNE.Imm(asm.R1, int32(i), next))
		emit(tp.Field(name))
		g.e.Emit(asm.Ja.Label(done))
		g.e.Mark(next)
	}
	g.e.Emit(asm.Mov.Imm(asm.R0, 0))
	g.e.Mark(done)
}

var jumps = map[spec.Op]asm.JumpOp{
	spec.OpEq: asm.JEq, spec.OpNe: asm.JNE,
	spec.OpLt: asm.JSLT, spec.OpLe: asm.JSLE, spec.OpGt: asm.JSGT, spec.OpGe: asm.JSGE,
}

var alus = map[spec.Op]asm.ALUOp{
	spec.OpAdd: asm.Add, spec.OpSub: asm.Sub, spec.OpMul: asm.Mul,
	spec.OpBAnd: asm.And, spec.OpBOr: asm.Or, spec.OpBXor: asm.Xor,
	spec.OpShl: asm.LSh, spec.OpShr: asm.RSh,
}

// binary evaluates a binary operation. HCL makes a left-deep tree of a
// chain such as a + b + c: binary walks its left spine in a loop, so that a
// long chain costs no deep recursion, and emits the code the recursion
// would (labels of && and || are taken before their left operand's).
func (g *gen) binary(x *spec.Binary) {
	if name, ok := spec.FuncName(x); ok {
		// func == NAME: the attach cookie against the function's index.
		done := g.e.NewLabel("func")
		match, miss := int32(1), int32(0)
		if x.Op == spec.OpNe {
			match, miss = 0, 1
		}
		g.funcCookie()
		g.e.Emit(
			asm.Mov.Reg(asm.R1, asm.R0),
			asm.Mov.Imm(asm.R0, match),
			asm.JEq.Imm(asm.R1, int32(g.funcIndex[name]), done),
			asm.Mov.Imm(asm.R0, miss),
		)
		g.e.Mark(done)
		return
	}
	if name, ok := spec.EventName(x); ok {
		// event == NAME: the attach cookie against the event's index.
		done := g.e.NewLabel("event")
		match, miss := int32(1), int32(0)
		if x.Op == spec.OpNe {
			match, miss = 0, 1
		}
		g.expr(x.L)
		g.e.Emit(
			asm.Mov.Reg(asm.R1, asm.R0),
			asm.Mov.Imm(asm.R0, match),
			asm.JEq.Imm(asm.R1, int32(g.eventIndex[name]), done),
			asm.Mov.Imm(asm.R0, miss),
		)
		g.e.Mark(done)
		return
	}
	if value, name, ok := spec.PodMatch(x); ok {
		g.podMatch(x, value, name)
		return
	}
	if lit, ok := x.R.(*spec.StringLit); ok {
		// The checker allows a string only against a literal.
		g.stringEquals(x.L, lit.Value, x.Op == spec.OpEq)
		return
	}
	spine := []*spec.Binary{x}
	for {
		l, ok := spine[len(spine)-1].L.(*spec.Binary)
		if !ok {
			break
		}
		if _, lit := l.R.(*spec.StringLit); lit {
			break
		}
		spine = append(spine, l)
	}
	labels := make([]string, len(spine))
	for i, b := range spine {
		if b.Op == spec.OpAnd || b.Op == spec.OpOr {
			labels[i] = g.e.NewLabel("logic")
		}
	}
	g.expr(spine[len(spine)-1].L)
	for i := len(spine) - 1; i >= 0; i-- {
		g.operate(spine[i], labels[i])
	}
}

// operate applies x to its left operand, in R0: it evaluates the right
// operand and combines the two into R0. done is the label && and || skip to.
func (g *gen) operate(x *spec.Binary, done string) {
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	g.e.Origin(x.Range())
	switch x.Op {
	case spec.OpAnd, spec.OpOr:
		// Short-circuit: && stops at the first false, || at the first true.
		if x.Op == spec.OpAnd {
			g.e.Emit(asm.JEq.Imm(asm.R0, 0, done))
		} else {
			g.e.Emit(asm.JNE.Imm(asm.R0, 0, done))
		}
		g.expr(x.R)
		g.e.Mark(done)
		return
	}
	if !g.operandInR1(x.R) {
		left := g.e.Alloc(8)
		g.e.Emit(asm.StoreMem(asm.RFP, left, asm.R0, asm.DWord))
		g.expr(x.R)
		g.e.Origin(x.Range())
		g.e.Emit(asm.Mov.Reg(asm.R1, asm.R0), asm.LoadMem(asm.R0, asm.RFP, left, asm.DWord))
	}
	g.e.Origin(x.Range())
	// R0 = left, R1 = right.
	if op, ok := alus[x.Op]; ok {
		g.e.Emit(op.Reg(asm.R0, asm.R1))
		return
	}
	if j, ok := jumps[x.Op]; ok {
		done := g.e.NewLabel("cmp")
		g.e.Emit(
			asm.Mov.Reg(asm.R2, asm.R0),
			asm.Mov.Imm(asm.R0, 1),
			j.Reg(asm.R2, asm.R1, done),
			asm.Mov.Imm(asm.R0, 0),
		)
		g.e.Mark(done)
		return
	}
	g.signedDivMod(x.Op == spec.OpMod)
}

// operandInR1 loads a right operand that needs no helper and no scratch
// register (a literal, an entry field) straight into R1, leaving the left
// operand in R0 where it is, and reports whether it did: the others are
// evaluated into R0 while the left one waits on the stack.
func (g *gen) operandInR1(r spec.Expr) bool {
	var v int64
	switch r := r.(type) {
	case *spec.IntLit:
		v = r.Value
	case *spec.BoolLit:
		if r.Value {
			v = 1
		}
	case *spec.EntryRef:
		g.e.Origin(r.Range())
		g.e.Emit(asm.LoadMem(asm.R1, asm.RFP, g.entryArea+int16(g.entryFields[r.Name]), asm.DWord))
		return true
	default:
		return false
	}
	g.e.Origin(r.Range())
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		g.e.Emit(asm.Mov.Imm(asm.R1, int32(v)))
	} else {
		g.e.Emit(asm.LoadImm(asm.R1, v, asm.DWord))
	}
	return true
}

// signedDivMod computes R0 / R1 or R0 % R1 with C's signed semantics (the
// quotient truncates toward zero, the remainder takes the dividend's sign),
// on the unsigned divide every BPF ISA has. As in BPF, x / 0 = 0 and x % 0 = x.
func (g *gen) signedDivMod(mod bool) {
	lhsPos, rhsPos, done := g.e.NewLabel("lpos"), g.e.NewLabel("rpos"), g.e.NewLabel("divdone")
	g.e.Emit(
		asm.Mov.Imm(asm.R2, 0), // result sign
		asm.JSGE.Imm(asm.R0, 0, lhsPos),
		asm.Neg.Imm(asm.R0, 0),
		asm.Mov.Imm(asm.R2, 1),
	)
	g.e.Mark(lhsPos)
	g.e.Emit(asm.JSGE.Imm(asm.R1, 0, rhsPos), asm.Neg.Imm(asm.R1, 0))
	if !mod {
		g.e.Emit(asm.Xor.Imm(asm.R2, 1))
	}
	g.e.Mark(rhsPos)
	if mod {
		g.e.Emit(asm.Mod.Reg(asm.R0, asm.R1))
	} else {
		g.e.Emit(asm.Div.Reg(asm.R0, asm.R1))
	}
	g.e.Emit(asm.JEq.Imm(asm.R2, 0, done), asm.Neg.Imm(asm.R0, 0))
	g.e.Mark(done)
}
