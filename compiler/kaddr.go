package compiler

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/compiler/internal/emit"
)

// kaddr leaves in R0 the address of kernel symbol sym (kaddr("avenrun")):
// a u64 of the probe's kaddr map (compiled.KaddrMapRef), which the runtime
// fills from /proc/kallsyms before it attaches. A missing value reads as 0.
func (g *gen) kaddr(sym string) {
	m := g.kaddrMap()
	idx := -1
	for i, s := range m.Symbols {
		if s == sym {
			idx = i
		}
	}
	if idx < 0 {
		idx = len(m.Symbols)
		m.Symbols = append(m.Symbols, sym)
		m.ValueSize = uint32(8 * len(m.Symbols))
	}
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	slot := g.e.Alloc(8)
	done := g.e.NewLabel("kaddr_done")
	g.e.Emit(
		emit.StoreImm64(asm.RFP, slot, 0),
		asm.LoadMapPtr(asm.R1, 0).WithReference(compiled.KaddrMapRef),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(slot)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, done),
		asm.LoadMem(asm.R0, asm.R0, int16(8*idx), asm.DWord),
	)
	g.e.Mark(done)
}

// kaddrMap lays out the probe's kaddr map once: one value, a u64 per
// symbol kaddr names.
func (g *gen) kaddrMap() *Map {
	for _, m := range g.out.Maps {
		if m.Ref == compiled.KaddrMapRef {
			return m
		}
	}
	m := &Map{
		Ref: compiled.KaddrMapRef, Name: "probectl.kaddr", Type: ebpf.Array, KeySize: 4, ValueSize: 8,
		MaxEntries: 1, Purpose: "the addresses of the kernel symbols kaddr names, read from /proc/kallsyms at load",
	}
	g.out.Maps = append(g.out.Maps, m)
	return m
}

// kernelU64 replaces the kernel address in R0 by the 8 bytes there
// (kernel_u64), read with bpf_probe_read_kernel: 0 where unreadable.
func (g *gen) kernelU64() {
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	slot := g.e.Alloc(8)
	g.e.Emit(
		emit.StoreImm64(asm.RFP, slot, 0),
		asm.Mov.Reg(asm.R3, asm.R0),
		asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, int32(slot)),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnProbeReadKernel.Call(),
		asm.LoadMem(asm.R0, asm.RFP, slot, asm.DWord),
	)
}
