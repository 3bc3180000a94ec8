package compiler

import (
	"fmt"
	"slices"

	"golang.org/x/arch/x86/x86asm"
)

// maxX86Instruction is the longest x86 instruction, in bytes.
const maxX86Instruction = 15

// A uprobe replaces an instruction with int3 and single-steps a copy of it
// out of line, which the kernel refuses for some instructions: on x86-64,
// arch_uprobe_analyze_insn in arch/x86/kernel/uprobes.c. These are its
// rules, as checked against Linux 6.18 (with uprobes on functions starting
// with each kind of instruction).

// refusedOpcodes are the one-byte opcodes good_insns_64 leaves out: opcodes
// invalid in 64-bit mode, ins/outs, in/out, int3, int N, into, iret, int1,
// hlt, cli and sti. (0f is allowed, so two-byte opcodes all are.) With a
// VEX or EVEX prefix, the byte after it is looked up here too.
var refusedOpcodes = func() (set [256]bool) {
	for _, op := range []byte{
		0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f,
		0x60, 0x61, 0x62, 0x6c, 0x6d, 0x6e, 0x6f, 0x82, 0x9a,
		0xcc, 0xcd, 0xce, 0xcf, 0xd4, 0xd5, 0xd6,
		0xe4, 0xe5, 0xe6, 0xe7, 0xea, 0xec, 0xed, 0xee, 0xef,
		0xf1, 0xf4, 0xfa, 0xfb,
	} {
		set[op] = true
	}
	return set
}()

// legacyPrefixes are the x86 legacy prefixes; those with a name are the
// ones the kernel refuses (is_prefix_bad).
var legacyPrefixes = map[byte]string{
	0x26: "an es segment prefix", 0x2e: "a cs segment prefix", 0x36: "an ss segment prefix", 0x3e: "a ds segment prefix",
	0xf0: "a lock prefix",
	0x64: "", 0x65: "", 0x66: "", 0x67: "", 0xf2: "", 0xf3: "",
}

// x86UprobeRefusal says why the kernel refuses a uprobe on the 64-bit
// instruction code starts with, or returns "".
func x86UprobeRefusal(code []byte) string {
	prefixes, why := x86Prefixes(code)
	if why != "" {
		return why
	}
	i := x86OpcodeIndex(code, len(prefixes))
	if i >= len(code) {
		return ""
	}
	op, modrm := code[i], byte(0)
	if i+1 < len(code) {
		modrm = code[i+1]
	}
	switch {
	case refusedOpcodes[op]:
		return "is one uprobes cannot single-step"
	case op == 0x8e && modrm>>3&7 == 2: // mov to ss
		return "loads ss, which holds off exceptions for one instruction"
	}
	branch := op == 0xe8 || op == 0xe9 || op == 0xeb || op&0xf0 == 0x70 || op == 0x0f && modrm&0xf0 == 0x80
	if branch && slices.Contains(prefixes, 0x66) {
		return "is a branch with an operand-size prefix (66)"
	}
	return ""
}

// x86Prefixes returns the legacy prefixes code starts with, or why the
// kernel refuses the first it refuses.
func x86Prefixes(code []byte) ([]byte, string) {
	i := 0
	for i < len(code) {
		why, ok := legacyPrefixes[code[i]]
		if !ok {
			break
		}
		if why != "" {
			return nil, "has " + why
		}
		i++
	}
	return code[:i], ""
}

// x86OpcodeIndex returns the index of the opcode byte of the instruction
// code starts with, after its n legacy prefixes, a REX prefix and a VEX
// or EVEX payload; len(code) or more when code ends before it.
func x86OpcodeIndex(code []byte, n int) int {
	i := n
	if i < len(code) && code[i]&0xf0 == 0x40 { // REX
		i++
	}
	if i < len(code) {
		// VEX2, VEX3, EVEX: the opcode byte follows their payload.
		i += map[byte]int{0xc5: 2, 0xc4: 3, 0x62: 4}[code[i]]
	}
	return i
}

// x86Instruction names the instruction code starts with, in the syntax of
// objdump, with its bytes.
func x86Instruction(code []byte) string {
	inst, err := x86asm.Decode(code, 64)
	if err != nil {
		return fmt.Sprintf("% x", code[:min(len(code), 8)])
	}
	return fmt.Sprintf("%s (% x)", x86asm.GNUSyntax(inst, 0, nil), code[:inst.Len])
}
