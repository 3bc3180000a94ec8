package bpftrace

import (
	"sort"
	"strings"
	"time"
)

// Map is one of the program's maps that an aggregation fills, as
// bpftrace prints it at exit: probectl run prints it so from the spec
// aggregations that hold it.
type Map struct {
	Name string // bpftrace's, with its @ ("@" for the anonymous map)
	// Kind is the aggregation: count, sum, min, max, avg, stats, hist or
	// lhist.
	Kind           string
	Min, Max, Step int64 // an lhist's bounds
	Keyed          bool  // @m[k]; false: a scalar @m
	// Keys say how bpftrace prints each part of the key: "" as its
	// value, ksym and usym as the symbol's name alone, kstack and ustack
	// as a stack.
	Keys []string
	// Parts are the spec aggregations holding the map: one per spec
	// probe that updates it (bpftrace's map is their union), an avg's
	// and a stats' two each: their count (Role "count") and their sum
	// ("sum").
	Parts []MapPart
}

// MapPart is a spec aggregation holding (part of) a bpftrace map.
type MapPart struct {
	Probe       string // the spec probe's address, kind.name
	Aggregation string
	Role        string // an avg's or a stats': count or sum; else ""
}

// Step is one thing a BEGIN, END or interval probe does that prints or
// changes what prints, in the order the probe does them:
//   - printf: Format with constant Args (int64 or string);
//   - time: the local time in strftime's Format;
//   - print: Map (with its @), its Top largest (0: all), values divided
//     by Div (0: 1);
//   - clear, zero: Map's keys removed, values zeroed;
//   - exit.
type Step struct {
	Op       string
	Format   string
	Args     []any
	Map      string
	Top, Div int
}

// Interval is an interval probe: its period and its steps.
type Interval struct {
	Every time.Duration
	Steps []Step
}

// btAgg is the bpftrace map an aggregation of the spec holds.
type btAgg struct {
	name, kind, role string
	bounds           [3]int64 // lhist's min, max, step
	keyed            bool
	keys             []string // Map.Keys
}

// keyKind is how bpftrace prints a key part (Map.Keys).
func keyKind(k hx) string {
	switch {
	case k.kind == kDisplay && strings.HasPrefix(k.text, "ksym("):
		return "ksym"
	case k.kind == kDisplay && strings.HasPrefix(k.text, "usym("):
		return "usym"
	case k.kind == kStack && strings.HasPrefix(k.text, "ustack"):
		return "ustack"
	case k.kind == kStack:
		return "kstack"
	}
	return ""
}

// mapsOf is the program's aggregated maps, by name, from the
// aggregations of its spec probes.
func (t *translator) mapsOf() []Map {
	by := map[string]*Map{}
	for _, p := range t.probes {
		for _, h := range []*handler{p.entry, p.exit} {
			if h == nil {
				continue
			}
			for _, a := range h.actions {
				if a.bt == nil {
					continue
				}
				m := by[a.bt.name]
				if m == nil {
					m = &Map{Name: a.bt.name, Kind: a.bt.kind, Keyed: a.bt.keyed, Keys: a.bt.keys,
						Min: a.bt.bounds[0], Max: a.bt.bounds[1], Step: a.bt.bounds[2]}
					by[a.bt.name] = m
				}
				part := MapPart{Probe: p.kind + "." + p.name, Aggregation: a.name, Role: a.bt.role}
				dup := false
				for _, q := range m.Parts {
					dup = dup || q == part
				}
				if !dup {
					m.Parts = append(m.Parts, part)
				}
			}
		}
	}
	var out []Map
	for _, m := range by {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *ctx) step(s Step) {
	if c.steps != nil && c.t.pass == 2 {
		*c.steps = append(*c.steps, s)
	}
}

// mapStep records print(@m[, top[, div]]), clear(@m) and zero(@m).
func (c *ctx) mapStep(call *Call) {
	if len(call.Args) == 0 {
		return
	}
	ref, ok := call.Args[0].(*MapRef)
	if !ok {
		return
	}
	s := Step{Op: call.Name, Map: "@" + c.mapName(ref)}
	if call.Name == "print" {
		for i, a := range call.Args[1:] {
			n, ok := constInt(a)
			if !ok || i > 1 {
				break
			}
			if i == 0 {
				s.Top = int(n)
			} else {
				s.Div = int(n)
			}
		}
	}
	c.step(s)
}

// printfStep records a printf of constants in BEGIN, END or interval.
func (c *ctx) printfStep(format string, args []Expr) {
	s := Step{Op: "printf", Format: format}
	for _, a := range args {
		switch a := c.raw(a).(type) {
		case *Str:
			s.Args = append(s.Args, a.Val)
		default:
			n, ok := constInt(a)
			if !ok {
				return
			}
			s.Args = append(s.Args, n)
		}
	}
	c.step(s)
}

// timeStep records time() in BEGIN, END or interval: bpftrace's default
// format is "%H:%M:%S\n".
func (c *ctx) timeStep(call *Call) {
	s := Step{Op: "time", Format: "%H:%M:%S\n"}
	if len(call.Args) > 0 {
		f, ok := call.Args[0].(*Str)
		if !ok {
			return
		}
		s.Format = f.Val
	}
	c.step(s)
}

// raw is e, or the argument a macro's identifier parameter e stands for.
func (c *ctx) raw(e Expr) Expr {
	if id, ok := e.(*Ident); ok {
		if r, ok := c.raws[id.Name]; ok {
			return r
		}
	}
	return e
}

// attachPoints counts the program's attach points.
func (t *translator) attachPoints() int {
	n := 0
	for _, p := range t.prog.Probes {
		n += len(p.Attach)
	}
	return n
}
