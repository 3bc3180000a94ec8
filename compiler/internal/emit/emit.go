package emit

import (
	"fmt"
	"math"

	"github.com/cilium/ebpf/asm"
)

// MaxStack is the BPF stack size.
const MaxStack = 512

// originKey marks an instruction with the source construct that emitted it.
type originKey struct{}

// Origin returns the origin attached to ins by [Emitter.At] or
// [Emitter.Origin], or nil.
func Origin(ins *asm.Instruction) any { return ins.Metadata.Get(originKey{}) }

// SetOrigin replaces the origin of ins (a copy of an emitted instruction
// moved to another place in the spec); the instruction it was copied from
// keeps its own.
func SetOrigin(ins *asm.Instruction, origin any) { ins.Metadata.Set(originKey{}, origin) }

// OriginAt returns the origin of the construct that emitted the instruction
// at index i: that of the nearest tagged instruction at or before it.
func OriginAt(insns asm.Instructions, i int) any {
	for i = min(i, len(insns)-1); i >= 0; i-- {
		if o := Origin(&insns[i]); o != nil {
			return o
		}
	}
	return nil
}

// Emitter builds a program: it hands out labels and stack slots, and tags
// instructions with the source constructs that emit them.
//
// Labels are resolved by cilium/ebpf when the program is encoded; a label
// marked where another is already pending becomes an alias of it. Jumps
// are checked, and relaxed where they are too long, by [Emitter.Finish].
type Emitter struct {
	// LongJumps allows gotol (BPF ISA v4, Linux 6.6) for jumps beyond the
	// ±32767 instructions of an ordinary jump.
	LongJumps bool

	insns   asm.Instructions
	nlabels int
	pending string            // label for the next instruction
	aliases map[string]string // label → the label it shares an instruction with
	comment string            // source text for the next instruction
	origin  any               // origin for the next instruction
	last    any               // origin of the last tagged instruction
	stack   int               // bytes of stack in use
	max     int               // the most ever in use
	over    any               // origin of the construct that first took the stack past MaxStack
}

// Emit appends instructions.
func (e *Emitter) Emit(insns ...asm.Instruction) {
	for _, ins := range insns {
		if e.pending != "" {
			ins = ins.WithSymbol(e.pending)
			e.pending = ""
		}
		if e.comment != "" {
			ins = ins.WithSource(asm.Comment(e.comment))
			e.comment = ""
		}
		if e.origin != nil {
			ins.Metadata.Set(originKey{}, e.origin)
			e.last, e.origin = e.origin, nil
		}
		e.insns = append(e.insns, ins)
	}
}

// At tags the next emitted instruction with a source comment and an origin
// (any value the caller wants back when mapping verifier output). Comments
// given before an instruction is emitted are joined; the last origin, the
// most specific, wins.
func (e *Emitter) At(comment string, origin any) {
	if e.comment != "" {
		comment = e.comment + " | " + comment
	}
	e.comment = comment
	e.Origin(origin)
}

// Origin tags the next emitted instruction with an origin and no comment:
// code generators call it for the instructions a construct emits after its
// parts, so that every instruction belongs to the innermost construct that
// emitted it.
func (e *Emitter) Origin(origin any) { e.origin = origin }

// Len is the number of raw instructions emitted so far (a 64-bit immediate
// load takes two).
func (e *Emitter) Len() int { return int(e.insns.Size() / asm.InstructionSize) }

// NewLabel returns a fresh label with a readable prefix.
func (e *Emitter) NewLabel(prefix string) string {
	e.nlabels++
	return fmt.Sprintf("%s_%d", prefix, e.nlabels)
}

// Mark places label on the next emitted instruction.
func (e *Emitter) Mark(label string) {
	if e.pending != "" {
		if e.aliases == nil {
			e.aliases = map[string]string{}
		}
		e.aliases[label] = e.pending
		return
	}
	e.pending = label
}

// Alloc reserves size bytes (rounded up to 8) of stack and returns their
// offset from R10. Past [MaxStack] the offset is meaningless, and Finish
// fails with a [*StackError] naming the construct being emitted.
func (e *Emitter) Alloc(size int) int16 {
	e.stack += (size + 7) &^ 7
	if e.stack > e.max {
		e.max = e.stack
	}
	if e.stack > MaxStack && e.over == nil {
		e.over = e.origin
		if e.over == nil {
			e.over = e.last
		}
	}
	return int16(-min(e.stack, math.MaxInt16))
}

// StackMark returns the current stack use, for [Emitter.Release].
func (e *Emitter) StackMark() int { return e.stack }

// Release frees the stack allocated since mark.
func (e *Emitter) Release(mark int) { e.stack = mark }

// StackUsed is the most stack the program uses.
func (e *Emitter) StackUsed() int { return e.max }

// A StackError is a program that needs more stack than BPF allows.
type StackError struct {
	Used   int
	Origin any // the construct that took the stack past the limit
}

func (err *StackError) Error() string {
	return fmt.Sprintf("program needs %d bytes of stack, BPF allows %d", err.Used, MaxStack)
}

// A JumpError is a jump that does not reach its label: beyond ±32767
// instructions without [Emitter.LongJumps], or beyond ±2^31 with them.
type JumpError struct {
	Distance int // in raw instructions
	Origin   any // the construct that emitted the jump
}

func (err *JumpError) Error() string {
	return fmt.Sprintf("a jump over %d instructions, beyond the %d an ordinary BPF jump reaches", err.Distance, math.MaxInt16)
}

// Finish returns the instructions, with label aliases resolved and every
// jump checked. A jump beyond the reach of its 16-bit offset becomes a
// gotol with LongJumps (an unconditional one in place; a conditional one as
// the inverted condition over a gotol), or else a [*JumpError]. It also
// fails with a [*StackError], or when the program ends on a label.
func (e *Emitter) Finish() (asm.Instructions, error) {
	if e.pending != "" {
		return nil, fmt.Errorf("label %s marks no instruction", e.pending)
	}
	if e.max > MaxStack {
		return nil, &StackError{Used: e.max, Origin: e.over}
	}
	for i := range e.insns {
		ref := e.insns[i].Reference()
		for {
			target, ok := e.aliases[ref]
			if !ok {
				break
			}
			ref = target
		}
		if ref != e.insns[i].Reference() {
			e.insns[i] = e.insns[i].WithReference(ref)
		}
	}
	return e.relax()
}

// gotol is the opcode of a jump with a 32-bit offset (BPF_JMP32|BPF_JA).
var gotol = asm.LongJump("").OpCode

// inverse maps each conditional jump to the one taken exactly when it is not.
var inverse = map[asm.JumpOp]asm.JumpOp{
	asm.JEq: asm.JNE, asm.JNE: asm.JEq,
	asm.JGT: asm.JLE, asm.JLE: asm.JGT, asm.JGE: asm.JLT, asm.JLT: asm.JGE,
	asm.JSGT: asm.JSLE, asm.JSLE: asm.JSGT, asm.JSGE: asm.JSLT, asm.JSLT: asm.JSGE,
}

// labelJump reports whether ins jumps to a label (calls and exits do not).
func labelJump(ins *asm.Instruction) bool {
	if !ins.OpCode.Class().IsJump() || ins.Reference() == "" {
		return false
	}
	op := ins.OpCode.JumpOp()
	return op != asm.Call && op != asm.Exit
}

// relax rewrites the jumps that do not reach their labels, round after
// round: a rewrite only grows the program, moving other labels further, so
// the rounds end with the first that rewrites nothing.
func (e *Emitter) relax() (asm.Instructions, error) {
	insns := e.insns
	for {
		offsets := make([]int, len(insns)+1)
		labels := map[string]int{}
		for i := range insns {
			if sym := insns[i].Symbol(); sym != "" {
				labels[sym] = offsets[i]
			}
			offsets[i+1] = offsets[i] + int(insns[i].Size()/asm.InstructionSize)
		}
		out := make(asm.Instructions, 0, len(insns))
		rewrote := false
		for i, ins := range insns {
			if !labelJump(&ins) {
				out = append(out, ins)
				continue
			}
			target, ok := labels[ins.Reference()]
			if !ok {
				return nil, fmt.Errorf("jump to %s: no instruction has that label", ins.Reference())
			}
			dist := target - offsets[i] - 1
			short := dist >= math.MinInt16 && dist <= math.MaxInt16
			far := dist >= math.MinInt32 && dist <= math.MaxInt32
			switch {
			case ins.OpCode == gotol && far, ins.OpCode != gotol && short:
				out = append(out, ins)
			case far && e.LongJumps:
				out = append(out, long(ins)...)
				rewrote = true
			default:
				return nil, &JumpError{Distance: dist, Origin: OriginAt(insns, i)}
			}
		}
		if !rewrote {
			return out, nil
		}
		insns = out
	}
}

// long rewrites a jump that needs a 32-bit offset. The first instruction
// keeps ins's metadata (label, comment, origin).
func long(ins asm.Instruction) []asm.Instruction {
	far := asm.Instruction{OpCode: gotol, Constant: -1}.WithReference(ins.Reference())
	op := ins.OpCode.JumpOp()
	if op == asm.Ja {
		return []asm.Instruction{far.WithMetadata(ins.Metadata)}
	}
	// The short form skips over the gotol (offset 1), or, with no inverse,
	// jumps to it over a ja that skips it.
	short := ins
	short.Offset = 1
	short = short.WithReference("")
	if inv, ok := inverse[op]; ok {
		short.OpCode = ins.OpCode.SetJumpOp(inv)
		return []asm.Instruction{short, far}
	}
	return []asm.Instruction{short, asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource), Offset: 1}, far}
}

// StoreImm64 emits *(u64 *)(dst + off) = value, value sign-extended from 32
// bits. The kernel accepts BPF_ST|BPF_MEM|BPF_DW; asm.StoreImm does not build it.
func StoreImm64(dst asm.Register, off int16, value int32) asm.Instruction {
	return asm.Instruction{OpCode: asm.StoreImmOp(asm.DWord), Dst: dst, Offset: off, Constant: int64(value)}
}
