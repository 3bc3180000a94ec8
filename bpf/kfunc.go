package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// kfuncRef is the metadata key that marks a kfunc call to be resolved.
type kfuncRef struct{}

// KfuncCall returns a call of the vmlinux kfunc name. Its BTF id depends on
// the kernel, so it stays unresolved (Constant -1) until [ResolveKfuncs]
// runs at load time: a compiled program is the same for every kernel.
func KfuncCall(name string) asm.Instruction {
	ins := asm.Instruction{
		OpCode:   asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call),
		Src:      asm.PseudoKfuncCall,
		Constant: -1,
	}
	ins.Metadata.Set(kfuncRef{}, name)
	return ins
}

// KfuncName returns the kfunc an instruction built by [KfuncCall] calls.
func KfuncName(ins *asm.Instruction) (string, bool) {
	name, ok := ins.Metadata.Get(kfuncRef{}).(string)
	return name, ok
}

// ErrKfuncMissing wraps the error for a kfunc the kernel does not have.
var ErrKfuncMissing = errors.New("kfunc not in kernel BTF")

// ResolveKfuncs fills in the BTF ids of every kfunc call in insns from the
// kernel's BTF. It returns a copy; insns is not changed.
func ResolveKfuncs(insns asm.Instructions, kernel *btf.Spec) (asm.Instructions, error) {
	out := make(asm.Instructions, len(insns))
	copy(out, insns)
	for i := range out {
		name, ok := KfuncName(&out[i])
		if !ok {
			continue
		}
		if kernel == nil {
			return nil, fmt.Errorf("call %s: no kernel BTF: %w", name, ErrKfuncMissing)
		}
		var fn *btf.Func
		if err := kernel.TypeByName(name, &fn); err != nil {
			return nil, fmt.Errorf("call %s: %w", name, ErrKfuncMissing)
		}
		id, err := kernel.TypeID(fn)
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", name, err)
		}
		out[i].Constant = int64(id)
	}
	return out, nil
}
