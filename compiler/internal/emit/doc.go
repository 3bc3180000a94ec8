// Package emit is the compiler's instruction emitter ([Emitter]), on top
// of cilium/ebpf's asm package: it hands out labels and stack slots (at
// most [MaxStack] bytes), tags instructions with the source text and the
// origin of the construct that emitted them ([Origin], [OriginAt]: how a
// verifier rejection finds its way back to the spec), and checks every
// jump when a program is finished, making one too long for an ordinary
// jump a gotol (BPF ISA v4), or an error ([JumpError], [StackError]).
//
// An origin is any value the compiler gives: the emitter knows nothing of
// HCL or specs. Package emit imports nothing of probectl, and only the
// compiler imports it.
package emit
