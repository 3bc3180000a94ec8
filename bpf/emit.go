package bpf

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// MaxStack is the BPF stack size.
const MaxStack = 512

// originKey marks the first instruction generated for a source construct.
type originKey struct{}

// Origin returns the origin attached to ins by [Emitter.At], or nil.
func Origin(ins *asm.Instruction) any { return ins.Metadata.Get(originKey{}) }

// Emitter builds a program: it hands out labels and stack slots, and tags the
// first instruction of each source construct with its text and origin.
//
// Labels are resolved by cilium/ebpf when the program is encoded; a label
// marked where another is already pending becomes an alias of it.
type Emitter struct {
	insns   asm.Instructions
	nlabels int
	pending string            // label for the next instruction
	aliases map[string]string // label → the label it shares an instruction with
	comment string            // source text for the next instruction
	origin  any               // origin for the next instruction
	stack   int               // bytes of stack in use
	max     int               // the most ever in use
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
			e.origin = nil
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
	e.comment, e.origin = comment, origin
}

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
// offset from R10.
func (e *Emitter) Alloc(size int) int16 {
	e.stack += (size + 7) &^ 7
	if e.stack > e.max {
		e.max = e.stack
	}
	return int16(-e.stack)
}

// StackMark returns the current stack use, for [Emitter.Release].
func (e *Emitter) StackMark() int { return e.stack }

// Release frees the stack allocated since mark.
func (e *Emitter) Release(mark int) { e.stack = mark }

// Finish returns the instructions, with label aliases resolved. It fails
// when the program uses more stack than BPF allows or ends on a label.
func (e *Emitter) Finish() (asm.Instructions, error) {
	if e.pending != "" {
		return nil, fmt.Errorf("label %s marks no instruction", e.pending)
	}
	if e.max > MaxStack {
		return nil, fmt.Errorf("program needs %d bytes of stack, BPF allows %d", e.max, MaxStack)
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
	return e.insns, nil
}

// StackUsed is the most stack the program uses.
func (e *Emitter) StackUsed() int { return e.max }

// StoreImm64 emits *(u64 *)(dst + off) = value, value sign-extended from 32
// bits. The kernel accepts BPF_ST|BPF_MEM|BPF_DW; asm.StoreImm does not build it.
func StoreImm64(dst asm.Register, off int16, value int32) asm.Instruction {
	return asm.Instruction{OpCode: asm.StoreImmOp(asm.DWord), Dst: dst, Offset: off, Constant: int64(value)}
}
