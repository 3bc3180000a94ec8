package bpf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// USDTArgKind is where a USDT argument's value is: a constant, a
// register, or memory at an address computed from registers.
type USDTArgKind int

// The USDT argument kinds.
const (
	USDTConst USDTArgKind = iota // the value is Value
	USDTReg                      // the value is in register Reg
	USDTMem                      // the value is at Reg + Index*Scale + Value, in user memory
)

// USDTArg is one argument specifier of a USDT probe (the "Arguments" of
// readelf -n): its size and sign, and where the value is, with the
// registers as offsets into struct pt_regs (Regs' layout) on the
// probe's architecture.
type USDTArg struct {
	// Text is the specifier as written: "-4@%edi", "8@[sp, 16]".
	Text string
	// Size is the value's size in bytes (1, 2, 4 or 8); Signed: the
	// specifier's size was negative, so the value is sign-extended.
	Size   int
	Signed bool
	Kind   USDTArgKind
	// Value is the constant, or the displacement of a memory operand.
	Value int64
	// Reg is the pt_regs offset of the register (the base, in memory),
	// RegName its name; Index and Scale the index register of a memory
	// operand (x86's 8(%rdi,%rsi,8); arm64's [x1, x2] has scale 1), Scale
	// 0 without one.
	Reg       int16
	RegName   string
	Index     int16
	IndexName string
	Scale     int
	// HasBase: a memory operand has a base register (x86's (,%rax,8)
	// has none).
	HasBase bool
}

// ParseUSDTArgs parses a USDT probe's argument specifiers, as sys/sdt.h
// writes them on arch: separated by spaces, each "SIZE@OPERAND" with
// SIZE 1, 2, 4 or 8 (negative: signed) and OPERAND in the assembler's
// syntax. On x86-64: %reg (any 64-, 32-, 16- or low 8-bit name), $imm,
// and disp(%base,%index,scale) with any part left out. On arm64: xN, wN,
// sp, an immediate, [reg], [reg, imm] and [reg, reg]. An operand the
// kernel's registers cannot give (rip-relative: a global variable, a high
// byte register such as %ah) is an error that says so.
func ParseUSDTArgs(arch Arch, s string) ([]USDTArg, error) {
	var out []USDTArg
	for i, text := range SplitUSDTArgs(s) {
		a, err := ParseUSDTArg(arch, text)
		if err != nil {
			return nil, fmt.Errorf("argument %d (%s): %w", i, text, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// SplitUSDTArgs splits a probe's argument specifiers at spaces outside
// brackets (arm64's "[sp, 16]" holds one).
func SplitUSDTArgs(s string) []string {
	var out []string
	depth, start := 0, -1
	for i := 0; i <= len(s); i++ {
		c := byte(' ')
		if i < len(s) {
			c = s[i]
		}
		switch {
		case c == '[':
			depth++
		case c == ']':
			depth--
		case c == ' ' && depth <= 0:
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 && start < len(s) { // an unclosed [: the rest is one
		out = append(out, s[start:])
	}
	return out
}

// ParseUSDTArg parses one argument specifier (ParseUSDTArgs).
func ParseUSDTArg(arch Arch, text string) (USDTArg, error) {
	a := USDTArg{Text: text}
	size, operand, ok := strings.Cut(text, "@")
	if !ok {
		return a, errors.New("no SIZE@ before the operand")
	}
	n, err := strconv.Atoi(size)
	if err != nil {
		return a, fmt.Errorf("size %q is not a number", size)
	}
	a.Signed, a.Size = n < 0, max(n, -n)
	if a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 {
		return a, fmt.Errorf("size %d is not 1, 2, 4 or 8 bytes", a.Size)
	}
	switch arch {
	case ArchX86_64:
		err = a.x86(operand)
	case ArchArm64:
		err = a.arm64(operand)
	default:
		err = fmt.Errorf("USDT arguments of arch %q are not known", arch)
	}
	return a, err
}

// x86Regs are x86-64's registers, by each name of their 64-bit, 32-bit,
// 16-bit and low 8-bit forms, as offsets into struct pt_regs.
var x86Regs = func() map[string]int16 {
	m := map[string]int16{}
	for _, r := range []struct {
		off   int16
		names string
	}{
		{80, "rax eax ax al"}, {40, "rbx ebx bx bl"}, {88, "rcx ecx cx cl"}, {96, "rdx edx dx dl"},
		{104, "rsi esi si sil"}, {112, "rdi edi di dil"}, {32, "rbp ebp bp bpl"}, {152, "rsp esp sp spl"},
		{72, "r8"}, {64, "r9"}, {56, "r10"}, {48, "r11"}, {24, "r12"}, {16, "r13"}, {8, "r14"}, {0, "r15"},
	} {
		names := strings.Fields(r.names)
		if len(names) == 1 { // r8..r15: r8d, r8w, r8b
			names = append(names, names[0]+"d", names[0]+"w", names[0]+"b")
		}
		for _, n := range names {
			m[n] = r.off
		}
	}
	return m
}()

// x86Reg names a register operand "%name".
func x86Reg(s string) (int16, error) {
	name, ok := strings.CutPrefix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q is not a register (%%name)", s)
	}
	if off, ok := x86Regs[name]; ok {
		return off, nil
	}
	switch name {
	case "rip", "eip":
		return 0, errors.New("a rip-relative operand (a global or static variable) needs the binary's load address in the process, which probes do not read")
	case "ah", "bh", "ch", "dh":
		return 0, fmt.Errorf("%%%s is a high byte register, which is not supported", name)
	}
	return 0, fmt.Errorf("%%%s is not an x86-64 register", name)
}

func (a *USDTArg) x86(op string) error {
	switch {
	case strings.HasPrefix(op, "$"):
		v, err := strconv.ParseInt(op[1:], 0, 64)
		if err != nil {
			return fmt.Errorf("constant %q is not a number", op)
		}
		a.Kind, a.Value = USDTConst, v
		return nil
	case strings.HasPrefix(op, "%"):
		off, err := x86Reg(op)
		a.Kind, a.Reg, a.RegName = USDTReg, off, op
		return err
	}
	// disp(%base,%index,scale), each part optional but the parentheses.
	disp, rest, ok := strings.Cut(op, "(")
	if !ok || !strings.HasSuffix(rest, ")") {
		if _, err := strconv.ParseInt(op, 0, 64); err == nil {
			return fmt.Errorf("%s is an absolute address, which is not supported", op)
		}
		return fmt.Errorf("%q is not a register, constant or memory operand", op)
	}
	a.Kind = USDTMem
	if disp != "" {
		v, err := strconv.ParseInt(disp, 0, 64)
		if err != nil {
			if strings.HasPrefix(rest, "%rip") {
				_, err := x86Reg("%rip")
				return err
			}
			return fmt.Errorf("displacement %q is not a number", disp)
		}
		a.Value = v
	}
	parts := strings.Split(strings.TrimSuffix(rest, ")"), ",")
	if len(parts) > 3 {
		return fmt.Errorf("%q has more than base, index and scale", op)
	}
	var err error
	if parts[0] != "" {
		if a.Reg, err = x86Reg(parts[0]); err != nil {
			return err
		}
		a.RegName, a.HasBase = parts[0], true
	}
	if len(parts) > 1 {
		if a.Index, err = x86Reg(parts[1]); err != nil {
			return err
		}
		a.IndexName, a.Scale = parts[1], 1
	}
	if len(parts) > 2 {
		s, err := strconv.Atoi(parts[2])
		if err != nil || s != 1 && s != 2 && s != 4 && s != 8 {
			return fmt.Errorf("scale %q is not 1, 2, 4 or 8", parts[2])
		}
		a.Scale = s
	}
	if !a.HasBase && a.Scale == 0 {
		return fmt.Errorf("%s is an absolute address, which is not supported", op)
	}
	return nil
}

// arm64Reg is the pt_regs offset of xN, wN or sp.
func arm64Reg(s string) (int16, error) {
	if s == "sp" || s == "wsp" {
		return 31 * 8, nil
	}
	if len(s) > 1 && (s[0] == 'x' || s[0] == 'w') {
		if n, err := strconv.Atoi(s[1:]); err == nil && n >= 0 && n <= 30 && strconv.Itoa(n) == s[1:] {
			return int16(n * 8), nil
		}
	}
	return 0, fmt.Errorf("%q is not an arm64 register (x0..x30, w0..w30, sp)", s)
}

func (a *USDTArg) arm64(op string) error {
	if v, err := strconv.ParseInt(op, 0, 64); err == nil {
		a.Kind, a.Value = USDTConst, v
		return nil
	}
	inner, ok := strings.CutPrefix(op, "[")
	if !ok {
		off, err := arm64Reg(op)
		a.Kind, a.Reg, a.RegName = USDTReg, off, op
		return err
	}
	inner, ok = strings.CutSuffix(inner, "]")
	if !ok {
		return fmt.Errorf("%q has no closing ]", op)
	}
	a.Kind = USDTMem
	base, rest, hasRest := strings.Cut(inner, ",")
	var err error
	if a.Reg, err = arm64Reg(strings.TrimSpace(base)); err != nil {
		return err
	}
	a.RegName, a.HasBase = strings.TrimSpace(base), true
	if !hasRest {
		return nil
	}
	rest = strings.TrimSpace(rest)
	if v, err := strconv.ParseInt(strings.TrimPrefix(rest, "#"), 0, 64); err == nil {
		a.Value = v
		return nil
	}
	if a.Index, err = arm64Reg(rest); err != nil {
		return fmt.Errorf("offset %q is neither a number nor a register", rest)
	}
	a.IndexName, a.Scale = rest, 1
	return nil
}
