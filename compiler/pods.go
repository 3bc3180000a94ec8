package compiler

import (
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/spec"
)

// podMaps lays out a map per distinct pod predicate of the probe
// (namespace == "shop"; != is its negation), which the runtime fills
// with the cgroups that match.
func (g *gen) podMaps() {
	for _, x := range g.p.Exprs() {
		spec.Walk(x, func(e spec.Expr) {
			b, ok := e.(*spec.Binary)
			if !ok {
				return
			}
			value, name, ok := spec.PodMatch(b)
			if !ok {
				return
			}
			m := compiled.PodMatch{Value: value, Name: name}
			if _, ok := g.podRefs[m]; ok {
				return
			}
			if g.podRefs == nil {
				g.podRefs = map[compiled.PodMatch]string{}
			}
			ref := compiled.PodMapRef(len(g.podRefs))
			g.podRefs[m] = ref
			g.out.Maps = append(g.out.Maps, &Map{
				Ref: ref, Name: "probectl.pods", Type: ebpf.Hash, KeySize: 8, ValueSize: 1,
				MaxEntries: compiled.PodMaxCgroups, Match: &m,
				Purpose: "the cgroups where " + m.String() + ", matched against the node's pods",
			})
		})
		if g.hasPodMatch(x) {
			g.out.PodWhen = appendNew(g.out.PodWhen, x.Text())
		}
	}
}

// hasPodMatch reports whether x compares a pod value with a name.
func (g *gen) hasPodMatch(x spec.Expr) bool {
	if x == nil {
		return false
	}
	found := false
	spec.Walk(x, func(e spec.Expr) {
		if b, ok := e.(*spec.Binary); ok {
			_, _, ok := spec.PodMatch(b)
			found = found || ok
		}
	})
	return found
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// podMatch evaluates b, a pod value compared with a name, into R0: 1
// when the task's cgroup, or an ancestor, is in the predicate's map (0
// for !=). node's map is looked up at level 0 only: the root cgroup.
func (g *gen) podMatch(b *spec.Binary, value, name string) {
	ref := g.podRefs[compiled.PodMatch{Value: value, Name: name}]
	from, to := int32(1), int32(compiled.TenantLevels)
	if value == "node" {
		from, to = 0, 0
	}
	match, miss := int32(1), int32(0)
	if b.Op == spec.OpNe {
		match, miss = 0, 1
	}
	found, done := g.e.NewLabel("pod_match"), g.e.NewLabel("pod_done")
	g.cgroupLookup(ref, from, to, found, "")
	g.e.Emit(asm.Mov.Imm(asm.R0, miss), asm.Ja.Label(done))
	g.e.Mark(found)
	g.e.Emit(asm.Mov.Imm(asm.R0, match))
	g.e.Mark(done)
}

// cgroupLookup looks the current task's cgroup ancestors, from level
// from to level to, up in the map ref of cgroup ids, and jumps to found
// at the first that is there. bpf_get_current_ancestor_cgroup_id is 0
// past the task's own cgroup: it jumps to out then (falls through when
// out is ""), and after the last level. R0-R5 are clobbered.
func (g *gen) cgroupLookup(ref string, from, to int32, found, out string) {
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	slot := g.e.Alloc(8)
	end := out
	if end == "" {
		end = g.e.NewLabel("cgroup_end")
	}
	for level := from; level <= to; level++ {
		g.e.Emit(
			asm.Mov.Imm(asm.R1, level),
			asm.FnGetCurrentAncestorCgroupId.Call(),
			asm.JEq.Imm(asm.R0, 0, end),
			asm.StoreMem(asm.RFP, slot, asm.R0, asm.DWord),
			asm.LoadMapPtr(asm.R1, 0).WithReference(ref),
			asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(slot)),
			asm.FnMapLookupElem.Call(),
			asm.JNE.Imm(asm.R0, 0, found),
		)
	}
	if out == "" {
		g.e.Mark(end)
	}
}
