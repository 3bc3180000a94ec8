package compiler

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/spec"
)

// sourceAttributes lists the attributes of p as the user wrote them, for
// the plan's attribute diff: what it attaches to, then each handler's
// when, saves and actions, an action's attributes named after it
// (`on_exit.hist "lat".value`).
func sourceAttributes(p *spec.Probe) []compiled.Attribute {
	var out []compiled.Attribute
	add := func(name, text string) {
		if text != "" {
			out = append(out, compiled.Attribute{Name: name, Text: text})
		}
	}
	add("binary", p.Binary)
	if p.PID != 0 {
		add("pid", strconv.Itoa(p.PID))
	}
	add("functions", patternsText(p.Functions))
	add("usdt", p.USDT)
	add("exclude", patternsText(p.Exclude))
	add("events", patternsText(p.Events))
	if p.Attach != "auto" {
		add("attach", p.Attach)
	}
	if p.EntryDataSize > 0 {
		add("entry_data_size", strconv.Itoa(p.EntryDataSize))
	}
	for _, h := range []*spec.Handler{p.Entry, p.Exit} {
		if h != nil {
			out = append(out, handlerAttributes(h)...)
		}
	}
	return out
}

// handlerAttributes lists a handler's when, saves and actions.
func handlerAttributes(h *spec.Handler) []compiled.Attribute {
	block := "on_entry"
	if h.Exit {
		block = "on_exit"
	}
	var out []compiled.Attribute
	add := func(name string, e spec.Expr) {
		if e != nil {
			out = append(out, compiled.Attribute{Name: name, Text: e.Text()})
		}
	}
	add(block+".when", h.When)
	for _, f := range h.Save {
		add(block+".save."+f.Name, f.Value)
	}
	for _, a := range h.Actions {
		name := fmt.Sprintf("%s.%s %q", block, a.Kind, a.Name)
		out = append(out, compiled.Attribute{Name: name, Text: "{...}"})
		add(name+".when", a.When)
		add(name+".value", a.Value)
		if len(a.By) > 0 {
			out = append(out, compiled.Attribute{Name: name + ".by", Text: exprsText(a.By, a.ByNames)})
		}
		if len(a.Key) > 0 {
			out = append(out, compiled.Attribute{Name: name + ".key", Text: exprsText(a.Key, nil)})
		}
		for _, f := range a.Fields {
			add(name+".fields."+f.Name, f.Value)
		}
		if a.MaxKeys != 0 && a.MaxKeys != spec.DefaultMaxKeys {
			out = append(out, compiled.Attribute{Name: name + ".max_keys", Text: strconv.Itoa(a.MaxKeys)})
		}
		if a.Kind == spec.LHist {
			out = append(out, compiled.Attribute{Name: name + ".range", Text: fmt.Sprintf("min = %d, max = %d, step = %d", a.Min, a.Max, a.Step)})
		}
	}
	return out
}

// patternsText writes patterns as a list, as written.
func patternsText(pats []spec.Pattern) string {
	if len(pats) == 0 {
		return ""
	}
	q := make([]string, len(pats))
	for i, p := range pats {
		q[i] = strconv.Quote(p.Text)
		if p.Optional {
			q[i] = "optional(" + q[i] + ")"
		}
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// exprsText writes a by or key list (an object when its columns are
// named).
func exprsText(exprs []spec.Expr, names []string) string {
	q := make([]string, len(exprs))
	for i, e := range exprs {
		q[i] = e.Text()
		if names != nil {
			q[i] = names[i] + " = " + q[i]
		}
	}
	if names != nil {
		return "{ " + strings.Join(q, ", ") + " }"
	}
	return "[" + strings.Join(q, ", ") + "]"
}
