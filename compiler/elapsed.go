package compiler

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// elapsed reads built-in value elapsed, the nanoseconds since the probe
// was loaded: ktime less the load's ktime, which the runtime writes into
// the probe's start map (compiled.StartMapRef) before it attaches. A
// missing start reads as 0 (elapsed is then ktime).
func (g *gen) elapsed(_ *spec.Var) {
	g.startMap()
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	slot := g.e.Alloc(8)
	got := g.e.NewLabel("elapsed_start")
	g.e.Emit(emit.StoreImm64(asm.RFP, slot, 0))
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(compiled.StartMapRef),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(slot)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, got),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.StoreMem(asm.RFP, slot, asm.R1, asm.DWord),
	)
	g.e.Mark(got)
	g.e.Emit(
		asm.FnKtimeGetNs.Call(),
		asm.LoadMem(asm.R1, asm.RFP, slot, asm.DWord),
		asm.Sub.Reg(asm.R0, asm.R1),
	)
}

// startMap lays out the probe's start map once: one u64, the ktime of
// its load.
func (g *gen) startMap() {
	for _, m := range g.out.Maps {
		if m.Ref == compiled.StartMapRef {
			return
		}
	}
	g.out.Maps = append(g.out.Maps, &Map{
		Ref: compiled.StartMapRef, Name: "probectl.start", Type: ebpf.Array, KeySize: 4, ValueSize: 8,
		MaxEntries: 1, Start: true,
		Purpose: "the ktime of the probe's load, which elapsed counts from",
	})
}
