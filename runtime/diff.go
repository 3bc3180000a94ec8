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
		Skipped:       out.Skipped,
	}
	diffTables(s, out, plan, drift)
	diffEvents(s, out, plan, drift)
	bufferRemade := plan.Events != nil && plan.Events.Action == compiled.ActionReplace
	// A table made anew is a new map: the probes that use it are loaded
	// again with it.
	remade := map[string]bool{}
	for _, t := range plan.Tables {
		if t.Action == compiled.ActionReplace {
			remade[t.Address.Name] = true
		}
	}
	seen := map[bpf.Address]bool{}
	for _, p := range out.Probes {
		seen[p.Address] = true
		old := s.Probe(p.Address)
		action, why := compiled.ActionCreate, ""
		var uses []string
		for _, name := range p.Tables {
			if remade[name] {
				uses = append(uses, name)
			}
		}
		switch {
		case old == nil:
		case len(drift[p.Address]) > 0:
			action, why = compiled.ActionReplace, "drift: "+strings.Join(drift[p.Address], "; ")
		case len(uses) > 0:
			action, why = compiled.ActionReplace, "its tables are made anew: "+strings.Join(uses, ", ")
		case bufferRemade && p.Buffer != nil:
			action, why = compiled.ActionReplace, "its event buffer is made anew"
		case old.Digest == p.Digest:
			action = compiled.ActionNoOp
		default:
			action, why = compiled.ActionReplace, whyReplace(old, p)
		}
		c := p.Change(action, out.Facts)
		c.Why = why
		plan.Changes = append(plan.Changes, c)
	}
	for _, old := range s.Probes {
		if seen[old.Address] {
			continue
		}
		why := "no longer in the specs"
		for _, sk := range out.Skipped {
			if sk.Address == old.Address {
				why = "optional, and it cannot attach now"
			}
		}
		plan.Changes = append(plan.Changes, DeleteChange(old, why))
	}
	sort.Slice(plan.Changes, func(i, j int) bool { return plan.Changes[i].Address.Less(plan.Changes[j].Address) })
	plan.Count()
	return plan
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
	if len(why) == 0 {
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
