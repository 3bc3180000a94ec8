package compiler

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/compiler/compiled"
)

// ScopeOf is the scope of a spec set kept to namespace ("" for none).
var ScopeOf = compiled.ScopeOf

// tenantMap lays out a tenant probe's map of allowed cgroups
// (compiled.TenantMapRef), which the node agent fills.
func (g *gen) tenantMap() {
	if g.u.policy.Tenant() == "" {
		return
	}
	g.out.Maps = append(g.out.Maps, &Map{
		Ref: compiled.TenantMapRef, Name: "probectl.tenant", Type: ebpf.Hash, KeySize: 8, ValueSize: 1,
		MaxEntries: compiled.TenantMaxCgroups,
		Purpose:    "the cgroups of namespace " + g.u.policy.Tenant() + "'s pods on the node: the tenant filter",
	})
}

// tenantFilter emits the tenant filter, the first thing a tenant
// program does: the current task's cgroup ancestors, from level 1 down
// to its own cgroup (bpf_get_current_ancestor_cgroup_id is 0 past it) or
// level compiled.TenantLevels, are looked up in the tenant map; the
// program returns unless one is there, before it counts anything. A
// session program returns 1 (its exit half is then skipped).
func (g *gen) tenantFilter(role Role) {
	g.e.At("tenant filter: the task's cgroup is one of namespace "+g.u.policy.Tenant()+"'s pods'", g.p.DeclRange)
	mark := g.e.StackMark()
	slot := g.e.Alloc(8)
	pass, out := g.e.NewLabel("tenant_pass"), g.e.NewLabel("tenant_out")
	for level := int32(1); level <= compiled.TenantLevels; level++ {
		g.e.Emit(
			asm.Mov.Imm(asm.R1, level),
			asm.FnGetCurrentAncestorCgroupId.Call(),
			asm.JEq.Imm(asm.R0, 0, out),
			asm.StoreMem(asm.RFP, slot, asm.R0, asm.DWord),
			asm.LoadMapPtr(asm.R1, 0).WithReference(compiled.TenantMapRef),
			asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(slot)),
			asm.FnMapLookupElem.Call(),
			asm.JNE.Imm(asm.R0, 0, pass),
		)
	}
	g.e.Mark(out)
	ret := int32(0)
	if role == RoleSession {
		ret = 1
	}
	g.ret(ret)
	g.e.Mark(pass)
	g.e.Release(mark)
}
