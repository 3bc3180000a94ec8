package bpf

import "fmt"

// Regs is the layout of struct pt_regs as a kprobe-type program's context
// sees it on one architecture.
type Regs struct {
	Arch Arch
	// Args are the offsets of the first six function arguments.
	Args [6]int16
	// Ret is the offset of the return value register.
	Ret int16
	// IP is the offset of the instruction pointer.
	IP int16
}

// RegsFor returns the pt_regs layout of arch.
func RegsFor(arch Arch) (Regs, error) {
	switch arch {
	case ArchX86_64:
		// struct pt_regs: r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags sp ss.
		// Args: di, si, dx, cx, r8, r9; return value: ax.
		return Regs{Arch: arch, Args: [6]int16{112, 104, 96, 88, 72, 64}, Ret: 80, IP: 128}, nil
	case ArchArm64:
		// struct user_pt_regs {u64 regs[31]; u64 sp; u64 pc; u64 pstate;} opens struct pt_regs.
		// Args: x0..x5; return value: x0.
		return Regs{Arch: arch, Args: [6]int16{0, 8, 16, 24, 32, 40}, Ret: 0, IP: 256}, nil
	}
	return Regs{}, fmt.Errorf("no pt_regs layout for arch %q", arch)
}
