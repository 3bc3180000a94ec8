package runtime

import (
	"fmt"
	"sort"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
)

// Diff plans the change from the state s to the compiled probes out:
// probes only in out are created, probes only in s deleted, probes in both
// replaced when their compiled digest differs or drift damaged them, and
// otherwise left alone.
func Diff(s *State, out *compiled.Output, drift map[bpf.Address][]string) *compiled.Plan {
	plan := &compiled.Plan{
		FormatVersion: compiled.PlanFormatVersion,
		Target:        compiled.PlanTarget{Facts: out.Facts, FunctionCount: len(out.Facts.Functions)},
		Scope:         out.Scope,
		Skipped:       out.Skipped,
	}
	diffTables(s, out, plan, drift)
	diffEvents(s, out, plan, drift)
	remade := remadeMaps(plan)
	seen := map[bpf.Address]bool{}
	for _, p := range out.Probes {
		seen[p.Address] = true
		action, why := remade.probeAction(s.Probe(p.Address), p, drift[p.Address])
		c := p.Change(action, out.Facts)
		c.Why = why
		if old := s.Probe(p.Address); action == compiled.ActionReplace && old.Source != nil {
			c.Changes = compiled.DiffAttributes(old.Source, p.Source)
		}
		plan.Changes = append(plan.Changes, c)
	}
	for _, old := range s.Probes {
		if !seen[old.Address] {
			plan.Changes = append(plan.Changes, DeleteChange(old, deleteWhy(old, out.Skipped)))
		}
	}
	sort.Slice(plan.Changes, func(i, j int) bool { return plan.Changes[i].Address.Less(plan.Changes[j].Address) })
	plan.Count()
	return plan
}

// remade is what a plan makes anew that its probes use: a table made
// anew is a new map, and so is an event buffer; the probes that use
// one are loaded again with it.
type remade struct {
	tables map[string]bool
	buffer bool
}

// remadeMaps returns the tables and the event buffer plan makes anew.
func remadeMaps(plan *compiled.Plan) remade {
	r := remade{tables: map[string]bool{}, buffer: plan.Events != nil && plan.Events.Action == compiled.ActionReplace}
	for _, t := range plan.Tables {
		if t.Action == compiled.ActionReplace {
			r.tables[t.Address.Name] = true
		}
	}
	return r
}

// probeAction decides what becomes of probe p, applied as old (nil: not
// applied) and damaged by drift, and says why.
func (r remade) probeAction(old *ProbeState, p *compiled.Probe, drift []string) (compiled.Action, string) {
	var uses []string
	for _, name := range p.Tables {
		if r.tables[name] {
			uses = append(uses, name)
		}
	}
	switch {
	case old == nil:
		return compiled.ActionCreate, ""
	case len(drift) > 0:
		return compiled.ActionReplace, "drift: " + strings.Join(drift, "; ")
	case len(uses) > 0:
		return compiled.ActionReplace, "its tables are made anew: " + strings.Join(uses, ", ")
	case r.buffer && p.Buffer != nil:
		return compiled.ActionReplace, "its event buffer is made anew"
	case old.Digest == p.Digest:
		return compiled.ActionNoOp, ""
	}
	return compiled.ActionReplace, whyReplace(old, p)
}

// deleteWhy says why the applied probe old, no longer compiled, is
// deleted.
func deleteWhy(old *ProbeState, skipped []compiled.Skipped) string {
	why := "no longer in the specs"
	for _, sk := range skipped {
		if sk.Address == old.Address {
			why = "optional, and it cannot attach now"
		}
	}
	return why
}

// DeleteChange is the plan entry that removes an applied probe: its
// description as applied, whole.
func DeleteChange(old *ProbeState, why string) *compiled.Change {
	return &compiled.Change{Description: old.Description, Action: compiled.ActionDelete, Why: why}
}

// whyReplace names what changed between an applied probe and its new compilation.
func whyReplace(old *ProbeState, p *compiled.Probe) string {
	var why []string
	if old.Route != p.Route {
		why = append(why, fmt.Sprintf("route %s → %s", old.Route, p.Route))
	}
	if a, b := compiled.JoinFamilies(old.Attach), compiled.JoinFamilies(p.Attach); a != b {
		why = append(why, fmt.Sprintf("attach %s → %s", a, b))
	}
	added, removed := setDiff(p.Functions, old.Functions), setDiff(old.Functions, p.Functions)
	if len(added) > 0 {
		why = append(why, "functions added: "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		why = append(why, "functions removed: "+strings.Join(removed, ", "))
	}
	if old.Binary != p.Binary || old.PID != p.PID || old.Event != p.Event {
		why = append(why, "target changed")
	}
	if len(why) == 0 && old.Source != nil {
		for _, c := range compiled.DiffAttributes(old.Source, p.Source) {
			why = append(why, c.Attribute)
		}
		if len(why) > 0 {
			why = []string{"changed: " + strings.Join(why, ", ")}
		}
	}
	if len(why) == 0 {
		// Nothing finer is known: a state written before the source was
		// recorded, or a change no attribute shows (the compiler's own).
		why = append(why, "handlers changed")
	}
	return strings.Join(why, "; ")
}

func setDiff(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

// ReplaceRequested is the why of a probe replaced because -replace asked.
const ReplaceRequested = "replace requested"

// RequestReplace makes plan replace the probes at addrs even when they
// are unchanged (apply -replace): each is detached and attached anew. An
// address the plan does not keep (not applied, or being deleted) is an
// error naming the ones it could be.
func RequestReplace(plan *compiled.Plan, addrs []bpf.Address) error {
	for _, a := range addrs {
		var found *compiled.Change
		var known []string
		for _, c := range plan.Changes {
			if c.Action == compiled.ActionNoOp || c.Action == compiled.ActionReplace {
				known = append(known, c.Address.String())
				if c.Address == a {
					found = c
				}
			}
		}
		switch {
		case found == nil && len(known) == 0:
			return fmt.Errorf("-replace %s: no applied probe stays in the specs, so none can be replaced", a)
		case found == nil:
			return fmt.Errorf("-replace %s: not an applied probe that stays in the specs; these are: %s", a, strings.Join(known, ", "))
		case found.Action == compiled.ActionNoOp:
			found.Action, found.Why = compiled.ActionReplace, ReplaceRequested
		default:
			found.Why += "; " + ReplaceRequested
		}
	}
	plan.Count()
	return nil
}
