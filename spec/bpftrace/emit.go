package bpftrace

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/probectl/probectl/internal/bttext"
	"github.com/probectl/probectl/spec"
)

// conversion is one %-conversion of a printf format, with the text before it.
type conversion struct {
	before string
	verb   byte
}

func conversions(format string) []conversion {
	var out []conversion
	var text strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			text.WriteByte(format[i])
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			text.WriteByte('%')
			i++
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("-+ #0123456789.lhzj", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			break
		}
		out = append(out, conversion{before: text.String(), verb: format[j]})
		text.Reset()
		i = j
	}
	return out
}

// beginText is what a printf in BEGIN of string literals prints: the
// format filled with them as bpftrace's printf fills it (bttext.Printf,
// the one that prints run's printf lines too: %% before the last
// conversion prints %, after it as written).
func beginText(format string, args []Expr) string {
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a.(*Str).Val
	}
	return bttext.Printf(format, vals...)
}

func (c *ctx) printf(call *Call) {
	if len(call.Args) == 0 {
		c.t.fail(call.Pos, "Invalid printf", "printf takes a format.")
	}
	f, ok := c.raw(call.Args[0]).(*Str)
	if !ok {
		if c.family == "END" {
			return
		}
		c.t.fail(call.Args[0].At(), "Unsupported printf format", "printf's format is a string literal.")
	}
	convs := conversions(f.Val)
	if len(convs) != len(call.Args)-1 {
		c.t.fail(call.Pos, "Invalid printf", fmt.Sprintf("The format has %d conversion(s) for %d value(s).", len(convs), len(call.Args)-1))
	}
	if c.special() {
		if c.family == "BEGIN" {
			literal := true
			for _, a := range call.Args[1:] {
				if _, ok := a.(*Str); !ok {
					literal = false
				}
			}
			if literal {
				c.t.beginText.WriteString(beginText(f.Val, call.Args[1:]))
				// The header row as printed: the format's words and its values'.
				var row strings.Builder
				for i, cv := range convs {
					row.WriteString(cv.before + " " + call.Args[i+1].(*Str).Val + " ")
				}
				if len(convs) > 0 || !strings.Contains(f.Val, "...") {
					row.WriteString(tailText(f.Val))
					c.t.columns = append(c.t.columns, strings.Fields(row.String())...)
				}
			}
		}
		c.printfStep(f.Val, call.Args[1:])
		for _, a := range call.Args[1:] {
			_, str := c.raw(a).(*Str)
			_, num := constInt(c.raw(a))
			if !str && !num && c.family == "interval" {
				c.t.fail(a.At(), "Unsupported printf in interval", "printf of a value in an interval probe has no equivalent: probectl run prints an interval probe's printf of constants and its print(@map); -interval prints the aggregations each interval.")
			}
		}
		return
	}
	line := Print{Format: f.Val}
	if len(call.Args) == 1 && c.event != nil {
		// Text alone, on the line the event prints (printcwd's "/").
		c.linePrint(call.Pos, &line, nil)
		return
	}
	var ev *action
	defer func() {
		if ev != nil {
			c.printed(ev, line)
		}
	}()
	for i, a := range call.Args[1:] {
		x := c.expr(a)
		if x.kind == kTuple {
			c.t.fail(a.At(), "Unsupported tuple", "Printing a tuple has no equivalent: print its elements.")
		}
		if x.kind == kTime {
			c.hadTime = true
			line.Time = x.text
			line.Fields = append(line.Fields, -1)
			continue
		}
		switch convs[i].verb {
		case 'x', 'X', 'p':
			x = hx{text: "hex(" + x.integer().text + ")", prec: precAtom, kind: kDisplay, reads: x.reads, name: x.name}
		case 'r':
			if !strings.HasPrefix(x.text, "buf(") {
				c.t.fail(a.At(), "Unsupported %r", "%r of anything but buf() has no equivalent: it prints a buffer.")
			}
		}
		name := trailingWord(convs[i].before)
		if name == "" {
			name = x.name
		}
		if strings.HasPrefix(x.text, "usym(") || strings.HasPrefix(x.text, "ksym(") {
			line.Symbols = append(line.Symbols, i)
		}
		if x.prefix != "" {
			if line.Prefixes == nil {
				line.Prefixes = map[int]string{}
			}
			line.Prefixes[i] = x.prefix
		}
		c.field(a.At(), name, x)
		ev = c.event
		line.Fields = append(line.Fields, len(ev.fields)-1)
	}
}

// Print is one printf of the program as an event carries it: its format,
// and for each of its conversions the index of the event's field it
// prints (-1: the time, which the record's timestamp gives, as Time
// formats it: strftime's format). A time() statement is a Print of Time
// alone (no Format): the time printed as Time says; a join() statement
// one of "%s\n" and the arguments' field. Symbols are the conversions
// that print a usym or ksym: bpftrace prints the function's name alone.
// Prefixes are, by conversion, what bpftrace prints before the field's
// value: probe is the family and the event ("tracepoint:" and
// "syscalls:sys_enter_fsync"; not of a user probe, whose probe names the
// binary too). Cat, alone, is a cat(PATH) statement: the file printed as
// it is when the event prints (bttext.Cat). Exit, alone, is exit() after
// the event's printfs: the run stops once the event printed, and prints
// nothing after it.
type Print struct {
	Format string
	Cat    string
	Exit   bool
	// When is 1 + the index of the event's field that says whether the
	// printf's conditions held (an if inside the probe, after the line
	// began: bpftrace prints on the same line); 0: it always prints.
	When int
	// Dirs are the conversions that print a working directory as
	// opensnoop's printcwd does: nothing for the root, else the path.
	Dirs     []int
	Fields   []int
	Time     string
	Symbols  []int
	Prefixes map[int]string
}

// Prints are the printfs of an imported program, by the spec probe (its
// address, kind.name) and
// the event action that carry them, in the order the event's printfs
// print (ImportPrints).
type Prints map[[2]string][]Print

// ImportPrints imports as Import does, and says which printfs each event
// of the spec prints: probectl run prints an event's record through them
// as bpftrace prints its lines.
func ImportPrints(filename string, src []byte) ([]byte, Prints, hcl.Diagnostics) {
	r, diags := importProgram(filename, src, Options{})
	return r.Spec, r.Prints, diags
}

// printsOf is which printfs each event of t's spec prints.
func (t *translator) printsOf() Prints {
	out := Prints{}
	for _, p := range t.probes {
		for _, h := range []*handler{p.entry, p.exit} {
			if h == nil {
				continue
			}
			for _, a := range h.actions {
				if a.kind == "event" && len(a.prints) > 0 {
					out[[2]string{p.kind + "." + p.name, a.name}] = a.prints
				}
			}
		}
	}
	return out
}

// tailText is the format's text after its last conversion.
func tailText(format string) string {
	i := strings.LastIndexAny(format, "sdux")
	if j := strings.LastIndex(format, "%"); j >= 0 && i > j {
		return format[i+1:]
	}
	if strings.Contains(format, "%") {
		return ""
	}
	return format
}

func trailingWord(s string) string {
	s = strings.TrimRight(s, "=: ")
	i := len(s)
	for i > 0 && isIdent(s[i-1]) {
		i--
	}
	if i == len(s) || (i > 0 && s[i-1] != ' ' && s[i-1] != '(' && s[i-1] != ',') {
		return ""
	}
	return identName(s[i:])
}

// printed adds a line to what ev prints, after the time of a time()
// before it.
func (c *ctx) printed(ev *action, line Print) {
	if c.timeLine != "" {
		ev.prints = append(ev.prints, Print{Time: c.timeLine})
		c.timeLine = ""
	}
	ev.prints = append(ev.prints, line)
}

// field adds a value to the event the printfs of this place print.
func (c *ctx) field(p Pos, name string, x hx) {
	if x.kind == kBool {
		x = x.integer()
	}
	c.checkConds(p, c.conds)
	w, _ := c.when()
	if c.event == nil || c.event.attrs[0].v != w {
		ev := &action{kind: "event", name: c.eventName(), pos: p, hadTime: c.hadTime}
		ev.attrs = []kv{{"when", w}}
		c.event = nil
		c.addEvent(ev)
		c.event = ev
	}
	name = identName(name)
	if name == "" {
		name = "value"
	}
	base := name
	for i := 2; c.event.hasField(name); i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	c.event.fields = append(c.event.fields, kv{name, x.text})
	c.event.reads = append(c.event.reads, x.reads...)
	for _, r := range x.reads {
		if c.deleted[r] && c.t.pass == 2 {
			c.t.fail(p, "Read after delete", "This reads a map a delete before it in the block removed the key from; here deletes take effect at the end of the probe.")
		}
	}
}

// addEvent adds an event, its condition already in attrs[0].
func (c *ctx) addEvent(ev *action) {
	c.h.actions = append(c.h.actions, ev)
}

func (a *action) hasField(n string) bool {
	for _, f := range a.fields {
		if f.k == n {
			return true
		}
	}
	return false
}

func (c *ctx) eventName() string {
	n := c.op.name
	name := n
	for i := 2; c.op.hasAction(name); i++ {
		name = fmt.Sprintf("%s_%d", n, i)
	}
	return name
}

func (o *outProbe) hasAction(n string) bool {
	for _, h := range []*handler{o.entry, o.exit} {
		if h == nil {
			continue
		}
		for _, a := range h.actions {
			if a.name == n {
				return true
			}
		}
	}
	return false
}

// Import translates a bpftrace program into a spec: HCL in the canonical
// format. The diagnostics are at the .bt file's lines and columns.
func Import(filename string, src []byte) ([]byte, hcl.Diagnostics) {
	r, diags := importProgram(filename, src, Options{})
	return r.Spec, diags
}

func importProgram(filename string, src []byte, o Options) (Run, hcl.Diagnostics) {
	prog, err := Parse(src)
	if err != nil {
		e, ok := err.(*Error)
		if !ok {
			e = &Error{Pos: Pos{Line: 1, Col: 1}, Summary: "Invalid program", Detail: err.Error()}
		}
		return Run{}, diag(filename, e)
	}
	t := &translator{prog: prog, maps: map[string]*mapInfo{}, opts: o, forRun: o.run}
	t.pass = 1
	if e := t.run(); e != nil {
		return Run{}, diag(filename, e)
	}
	t.classify()
	t.pass = 2
	if e := t.run(); e != nil {
		return Run{}, diag(filename, e)
	}
	t.limitTo(o.PID)
	if len(t.probes) == 0 {
		// probectl run of BEGIN alone: it prints, and attaches nothing.
		return Run{BeginText: t.beginText.String(), BeginExit: t.beginExit}, nil
	}
	out, lines := t.write(filepath.Base(filename))
	formatted := hclwrite.Format(out)
	hclName := strings.TrimSuffix(filename, filepath.Ext(filename)) + ".hcl"
	if _, diags := spec.Parse(map[string][]byte{hclName: formatted}); diags.HasErrors() {
		// The spec the import wrote does not check: say so at the probe
		// of the .bt file it came from.
		var out hcl.Diagnostics
		for _, d := range diags {
			at := Pos{Line: 1, Col: 1}
			text := ""
			if d.Subject != nil {
				for _, l := range lines {
					if d.Subject.Start.Line >= l.line {
						at = l.pos
					}
				}
				ls := strings.Split(string(formatted), "\n")
				if d.Subject.Start.Line-1 < len(ls) {
					text = strings.TrimSpace(ls[d.Subject.Start.Line-1])
				}
			}
			out = append(out, diag(filename, &Error{Pos: at, Summary: "No equivalent: " + d.Summary,
				Detail: fmt.Sprintf("The spec this probe becomes does not check: %s (in `%s`).", strings.TrimSpace(d.Detail), text)})...)
		}
		return Run{}, out[:1]
	}
	return Run{Spec: formatted, StopAfter: t.stopAfter, Prints: t.printsOf(),
		Maps: t.mapsOf(), Begin: t.begin, End: t.end, Intervals: t.intervals, Probes: t.attachPoints(),
		BeginText: t.beginText.String(), BeginExit: t.beginExit}, nil
}

func diag(filename string, e *Error) hcl.Diagnostics {
	p := hcl.Pos{Line: e.Pos.Line, Column: e.Pos.Col, Byte: e.Pos.Off}
	end := p
	end.Column++
	end.Byte++
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: e.Summary, Detail: e.Detail, Subject: &hcl.Range{Filename: filename, Start: p, End: end}}}
}

type lineMark struct {
	line int
	pos  Pos
}

func comments(b *strings.Builder, lines []string, indent string) {
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if strings.TrimSpace(l) == "" {
			b.WriteString(indent + "#\n")
			continue
		}
		if !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t") {
			l = " " + l
		}
		b.WriteString(indent + "#" + l + "\n")
	}
}

// write renders the spec; lines say where each probe of the .bt file starts.
func (t *translator) write(source string) ([]byte, []lineMark) {
	var b strings.Builder
	comments(&b, t.prog.Header, "")
	if len(t.prog.Header) > 0 {
		b.WriteString("#\n")
	}
	b.WriteString("# Imported from " + source + " by probectl import.\n")
	for _, n := range t.notes {
		comments(&b, []string{"- " + n}, "")
	}
	var marks []lineMark
	for _, name := range sortedKeys(t.maps) {
		m := t.maps[name]
		switch m.kind {
		case mLabels:
			fmt.Fprintf(&b, "\nlabels %q {\n  values = {\n", m.hcl)
			for _, a := range m.begin {
				k, _ := constInt(a.LHS.(*MapRef).Keys[0])
				fmt.Fprintf(&b, "    %s = %s\n", strconv.Quote(strconv.FormatInt(k, 10)), quote(a.RHS.(*Str).Val))
			}
			b.WriteString("  }\n}\n")
		case mTable:
			fmt.Fprintf(&b, "\ntable %q {\n", m.hcl)
			if m.decl != nil {
				fmt.Fprintf(&b, "  max_keys = %d\n", m.decl.Size)
			}
			b.WriteString("}\n")
		}
	}
	for _, p := range t.probes {
		b.WriteString("\n")
		marks = append(marks, lineMark{line: strings.Count(b.String(), "\n") + 1, pos: p.pos})
		comments(&b, p.comments, "")
		fmt.Fprintf(&b, "probe %q %q {\n", p.kind, p.name)
		for _, a := range p.attrs {
			fmt.Fprintf(&b, "  %s = %s\n", a.k, a.v)
		}
		for i, h := range []*handler{p.entry, p.exit} {
			if h == nil {
				continue
			}
			b.WriteString("\n  " + []string{"on_entry", "on_exit"}[i] + " {\n")
			if h.when != "" {
				fmt.Fprintf(&b, "    when = %s\n", h.when)
			}
			if len(h.save) > 0 {
				var s []string
				for _, kv := range h.save {
					s = append(s, kv.k+" = "+kv.v)
				}
				fmt.Fprintf(&b, "    save = { %s }\n", strings.Join(s, ", "))
			}
			for _, a := range h.actions {
				t.writeAction(&b, a)
			}
			b.WriteString("  }\n")
		}
		if p.entry == nil && p.exit == nil {
			b.WriteString("  on_entry {\n  }\n")
		}
		b.WriteString("}\n")
	}
	if len(t.pending) > 0 {
		b.WriteString("\n")
		comments(&b, t.pending, "")
	}
	return []byte(b.String()), marks
}

func (t *translator) writeAction(b *strings.Builder, a *action) {
	fmt.Fprintf(b, "    %s %q {\n", a.kind, a.name)
	for _, kv := range a.attrs {
		if kv.v == "" {
			continue
		}
		fmt.Fprintf(b, "      %s = %s\n", kv.k, kv.v)
	}
	if a.kind == "event" {
		fields := a.fields
		cols := t.columns
		if a.hadTime && len(cols) > 0 && cols[0] == "TIME" {
			cols = cols[1:]
		}
		if len(cols) == len(fields) && len(cols) > 0 {
			renamed := make([]kv, len(fields))
			seen := map[string]bool{}
			ok := true
			for i, f := range fields {
				n := identName(cols[i])
				if n == "" || seen[n] {
					ok = false
					break
				}
				seen[n] = true
				renamed[i] = kv{n, f.v}
			}
			if ok {
				fields = renamed
			}
		}
		b.WriteString("      fields = {\n")
		for _, f := range fields {
			fmt.Fprintf(b, "        %s = %s\n", f.k, f.v)
		}
		b.WriteString("      }\n")
	}
	b.WriteString("    }\n")
}
