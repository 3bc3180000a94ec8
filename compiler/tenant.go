package compiler

import (
	"github.com/cilium/ebpf"
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
	pass, out := g.e.NewLabel("tenant_pass"), g.e.NewLabel("tenant_out")
	g.cgroupLookup(compiled.TenantMapRef, 1, compiled.TenantLevels, pass, out)
	g.e.Mark(out)
	ret := int32(0)
	if role == RoleSession {
		ret = 1
	}
	g.ret(ret)
	g.e.Mark(pass)
}
