package bpftrace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/probectl/probectl/spec"
)

// MaxExprText bounds the text of one expression the import writes:
// variables and macros are written out where they are used, and
// $b = $a + $a; $c = $b + $b; ... doubles it each time.
const MaxExprText = 64 << 10

func (c *ctx) expr(e Expr) hx {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > MaxNesting {
		c.t.fail(e.At(), "Nested too deep", fmt.Sprintf("Expressions and macros nest at most %d deep.", MaxNesting))
	}
	x := c.exprOf(e)
	if len(x.text) > MaxExprText {
		c.t.fail(e.At(), "Expression too large", fmt.Sprintf("Written out with its variables and macros, this expression is over %d KiB.", MaxExprText>>10))
	}
	return x
}

func (c *ctx) exprOf(e Expr) hx {
	switch e := e.(type) {
	case *Num:
		return atom(numText(e), kInt, "")
	case *Str:
		return atom(quote(e.Val), kStr, "")
	case *Ident:
		return c.ident(e)
	case *Var:
		if _, err := strconv.Atoi(e.Name); err == nil {
			c.t.fail(e.Pos, "Unsupported positional parameter", fmt.Sprintf("$%s, a command-line argument, has no equivalent: a spec has no arguments; write the value.", e.Name))
		}
		v, ok := c.vars[e.Name]
		if !ok || !v.set {
			c.t.fail(e.Pos, "Variable without a value", fmt.Sprintf("$%s is read before it is assigned (on some path).", e.Name))
		}
		switch {
		case strings.HasPrefix(v.stale, "if@"):
			c.t.fail(e.Pos, "Unsupported conditional variable", fmt.Sprintf("$%s is assigned on one path of an if only: read after it, it has no value on the other.", e.Name))
		case strings.HasPrefix(v.stale, "display@"):
			if c.t.pass == 2 {
				c.t.fail(e.Pos, "Unsupported conditional decoded value", fmt.Sprintf("$%s is decoded one way or another by an if (ntop, ksym): here a decoder is chosen where the value is shown, not by a condition.", e.Name))
			}
		case v.stale != "":
			c.t.fail(e.Pos, "Unsupported stale variable", fmt.Sprintf("$%s holds what @%s held before a store changed it: here a value is read where it is used.", e.Name, v.stale))
		}
		x := v.x
		if x.placeholder {
			c.t.fail(e.Pos, "Unsupported ntop(0)", fmt.Sprintf("$%s is still ntop(0), bpftrace's placeholder, here: it has no equivalent; a decoded value is chosen where it is shown.", e.Name))
		}
		if x.name == "" {
			x.name = e.Name
		}
		if len(v.safe) > 0 {
			// Read before a delete of the table: deletes come last.
			var reads []string
			for _, r := range x.reads {
				if !v.safe[r] {
					reads = append(reads, r)
				}
			}
			x.reads = reads
		}
		return x
	case *MapRef:
		return c.mapRead(e)
	case *Unary:
		x := c.expr(e.X)
		switch e.Op {
		case "!":
			return not(x)
		case "-":
			return hx{text: "-" + x.integer().paren(precUnary), prec: precUnary, kind: kInt, reads: x.reads, name: x.name}
		case "+":
			return x
		case "~":
			return hx{text: "bnot(" + x.integer().text + ")", prec: precAtom, kind: kInt, reads: x.reads, name: x.name}
		case "*":
			if x.kaddr {
				// *ADDR of a kaddr: bpftrace reads a u64 there.
				return hx{text: "kernel_u64(" + x.text + ")", prec: precAtom, kind: kInt, reads: x.reads, name: x.name}
			}
		}
		c.t.fail(e.Pos, "Unsupported operator "+e.Op, fmt.Sprintf("Unary %s has no equivalent: kernel data is read through its fields (p.field), not through a pointer's address.", e.Op))
	case *Binary:
		if x, ok := c.firstByte(e); ok {
			return x
		}
		return c.binop(e.Pos, e.Op, c.expr(e.X), c.expr(e.Y))
	case *Cond:
		cond := c.expr(e.C).boolean()
		a, b := c.expr(e.T), c.expr(e.F)
		if cond.text == "true" {
			return a
		}
		if cond.text == "false" {
			return b
		}
		k := a.kind
		if k == kDisplay || b.kind == kDisplay {
			c.t.fail(e.Pos, "Unsupported conditional decoded value", "A decoder (ntop, ksym, usym) is chosen where the value is shown, not by a condition.")
		}
		if a.kind == kBool && b.kind != kBool {
			a, k = a.integer(), kInt
		}
		if b.kind == kBool && k != kBool {
			b = b.integer()
		}
		return hx{text: cond.paren(precCond+1) + " ? " + a.paren(precCond+1) + " : " + b.paren(precCond), prec: precCond, kind: k, reads: joinReads(cond, a, b), name: a.name}
	case *Call:
		return c.callValue(e)
	case *Field:
		x := c.expr(e.X)
		if x.stored && x.pointee != "" {
			// The pointer a table keeps, to the struct the tracepoint's
			// format names: read as bpftrace reads it.
			fn := "cast"
			if x.user {
				fn = "user_cast"
			}
			x = hx{text: fn + "(" + x.text + ", " + quote(x.pointee) + ")", prec: precAtom, kind: kInt, reads: x.reads, name: x.name}
		}
		if x.stored {
			c.t.fail(e.Pos, "Unsupported field of a stored value", storedFieldDetail(x.text, e.Name))
		}
		if x.kind == kTuple {
			c.t.fail(e.Pos, "Unsupported tuple field", "A tuple's element by index has no equivalent.")
		}
		if x.prec < precAtom || x.kind == kDisplay || x.kind == kStr && !strings.HasPrefix(x.text, "args") {
			c.t.fail(e.Pos, "Unsupported field access", fmt.Sprintf(".%s of a computed value has no equivalent: fields are read from args, task, a cast or a struct they lead to.", e.Name))
		}
		out := hx{text: x.text + "." + e.Name, prec: precAtom, kind: kInt, reads: x.reads, name: e.Name, field: e.Name}
		if x.text == "args" && c.kind == "tracepoint" {
			out.pointee, out.user = pointee(c.events, e.Name), userPointers(c.events)
		}
		return out
	case *Index:
		c.t.fail(e.Pos, "Unsupported index", "Indexing a value ([i]) has no equivalent: arrays and strings are read whole.")
	case *Cast:
		x := c.expr(e.X)
		t := strings.TrimSpace(e.Type)
		if strings.HasSuffix(t, "*") {
			t = strings.TrimSpace(strings.TrimRight(t, "*"))
			if t == "struct task_struct" && x.text == "task" {
				return x // curtask is one already
			}
			if strings.HasPrefix(t, "struct ") || strings.HasPrefix(t, "union ") {
				// Stored, the pointer still points to the struct.
				return hx{text: "cast(" + x.integer().text + ", " + quote(t) + ")", prec: precAtom, kind: kInt, reads: x.reads, name: x.name, pointee: t}
			}
			return x // a pointer to an integer type: the address
		}
		if t == "bool" {
			return x.boolean()
		}
		if n, ok := castNames[t]; ok {
			if n == "s64" || n == "u64" && x.kind != kInt {
				return x.integer()
			}
			return hx{text: n + "(" + x.integer().text + ")", prec: precAtom, kind: kInt, reads: x.reads, name: x.name}
		}
		c.t.fail(e.Pos, "Unsupported cast", fmt.Sprintf("(%s) has no equivalent: casts are to integer types or to a pointer to a struct.", e.Type))
	case *Tuple:
		x := hx{kind: kTuple, prec: precAtom}
		for _, el := range e.Elems {
			v := c.expr(el)
			if v.kind == kTuple {
				c.t.fail(el.At(), "Unsupported nested tuple", "A tuple in a tuple has no equivalent.")
			}
			x.elems = append(x.elems, v)
			x.reads = append(x.reads, v.reads...)
		}
		return x
	}
	c.t.fail(e.At(), "Unsupported expression", "This expression has no equivalent.")
	return hx{}
}

var binaryHCL = map[string]int{"||": precOr, "&&": precAnd, "==": precEq, "!=": precEq, "<": precRel, "<=": precRel, ">": precRel, ">=": precRel, "+": precAdd, "-": precAdd, "*": precMul, "/": precMul, "%": precMul}

var negated = map[string]string{"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}

func (c *ctx) binop(p Pos, op string, x, y hx) hx {
	reads := joinReads(x, y)
	if f := spec.BpftraceOperator(op); f != "" {
		return hx{text: f + "(" + x.integer().text + ", " + y.integer().text + ")", prec: precAtom, kind: kInt, reads: reads, name: x.name}
	}
	prec, ok := binaryHCL[op]
	if !ok {
		c.t.fail(p, "Unsupported operator "+op, op+" has no equivalent.")
	}
	for _, v := range []hx{x, y} {
		if v.kind == kDisplay || v.kind == kStack || v.kind == kTime || v.kind == kJoin || v.kind == kTuple {
			c.t.fail(p, "Unsupported operand", "A stack or a decoded value (ntop, ksym, usym, strftime, join) is shown, never computed with or compared.")
		}
	}
	switch op {
	case "&&", "||":
		x, y = x.boolean(), y.boolean()
		if op == "&&" && (x.text == "true" || y.text == "true") {
			if x.text == "true" {
				return y
			}
			return x
		}
		return hx{text: x.paren(prec) + " " + op + " " + y.paren(prec+1), prec: prec, kind: kBool, reads: reads}
	case "==", "!=", "<", "<=", ">", ">=":
		if x.kind == kStr || y.kind == kStr {
			if op != "==" && op != "!=" {
				c.t.fail(p, "Unsupported string comparison", "Strings compare with == and != only.")
			}
		} else {
			x, y = x.integer(), y.integer()
		}
		return hx{text: x.paren(prec+1) + " " + op + " " + y.paren(prec+1), prec: prec, kind: kBool, reads: reads,
			neg: x.paren(prec+1) + " " + negated[op] + " " + y.paren(prec+1)}
	}
	addr := op == "+" && (x.kaddr || y.kaddr) || op == "-" && x.kaddr && !y.kaddr
	x, y = x.integer(), y.integer()
	if x.kind == kStr || y.kind == kStr {
		c.t.fail(p, "Unsupported string arithmetic", op+" of a string has no equivalent.")
	}
	return hx{text: x.paren(prec) + " " + op + " " + y.paren(prec+1), prec: prec, kind: kInt, reads: reads, name: x.name, kaddr: addr}
}

func (c *ctx) ident(e *Ident) hx {
	if x, ok := c.idents[e.Name]; ok {
		return x
	}
	if m, ok := c.t.prog.Macros[e.Name]; ok {
		return c.expand(m, nil, e.Pos, true)
	}
	if v, ok := c.t.prog.Defines[e.Name]; ok {
		n, err := parseNum(v)
		if err != nil {
			c.t.fail(e.Pos, "Unsupported #define", fmt.Sprintf("%s is #defined as %q: only numbers are understood.", e.Name, v))
		}
		return atom(numText(&Num{Text: v, Val: n}), kInt, strings.ToLower(e.Name))
	}
	if v, ok := knownConstants[e.Name]; ok {
		return atom(strconv.FormatInt(v, 10), kInt, strings.ToLower(e.Name))
	}
	switch e.Name {
	case "true", "false":
		return atom(e.Name, kBool, "")
	case "func", "probe":
		x := atom("func", kStr, "func")
		if c.kind == "tracepoint" {
			x = atom("event", kStr, "event")
		}
		if e.Name == "probe" && c.kind != "user" {
			x.prefix = c.family + ":"
		}
		switch c.kind {
		case "kernel", "user", "tracepoint":
			return x
		}
		c.t.fail(e.Pos, "Unsupported "+e.Name, fmt.Sprintf("%s names the function or event that fired; a %s probe has none.", e.Name, c.family))
	case "retval":
		if !c.exit {
			c.t.fail(e.Pos, "Unsupported retval", "retval is a function's return value: in kretprobe, uretprobe or fexit only.")
		}
	case "args":
		if c.kind == "user" {
			c.t.fail(e.Pos, "Unsupported args", "A user function's arguments by name need debug information: use arg0..arg5.")
		}
	}
	if n := builtinName(e.Name); n != "" {
		k := kInt
		switch n {
		case "comm", "task.real_parent.comm":
			k = kStr
		case "kstack", "ustack":
			k = kStack
		}
		if strings.HasPrefix(n, "arg") && c.exit && n != "args" {
			c.t.fail(e.Pos, "Unsupported "+n+" on return", fmt.Sprintf("%s on a function's return has no equivalent: save it at the entry (a kprobe storing @m[tid] = %s).", n, n))
		}
		if c.special() {
			c.t.fail(e.Pos, "Unsupported "+e.Name+" in "+c.family, fmt.Sprintf("%s in %s has no equivalent: %s only prints here.", e.Name, c.family, c.family))
		}
		name := n
		if i := strings.LastIndex(name, "."); i >= 0 {
			name = e.Name
		}
		return atom(n, k, name)
	}
	if e.Name == "cpid" && c.t.opts.CPID != 0 {
		return hx{text: strconv.Itoa(c.t.opts.CPID), prec: precAtom, kind: kInt}
	}
	if why, ok := missingValues[e.Name]; ok {
		c.t.fail(e.Pos, "Unsupported "+e.Name, fmt.Sprintf("%s has no equivalent: %s.", e.Name, why))
	}
	if enumName(e.Name) {
		// bpftrace finds a name no #define gives in the kernel's enums
		// (BTF); the compiler does, at the target.
		return hx{text: "enum_value(" + quote(e.Name) + ")", prec: precAtom, kind: kInt, name: strings.ToLower(e.Name)}
	}
	c.t.fail(e.Pos, "Unknown name "+e.Name, fmt.Sprintf("%s is not a bpftrace builtin, no #define gives it a value, and it is not written as an enum's constant is (upper case, found in the kernel's BTF): a C constant from a header needs a #define here.", e.Name))
	return hx{}
}

func (c *ctx) mapRead(e *MapRef) hx {
	name := c.mapName(e)
	m := c.t.mapOf(name)
	if c.special() {
		if c.family == "BEGIN" {
			c.t.fail(e.Pos, "Unsupported map read in BEGIN", "Reading a map in BEGIN has no equivalent.")
		}
		c.t.fail(e.Pos, "Unsupported map read in "+c.family, fmt.Sprintf("Reading @%s in %s has no equivalent: %s only prints here (probectl show prints the aggregations).", name, c.family, c.family))
	}
	m.uses = append(m.uses, mapUse{probe: c.probe, exit: c.exit, op: "read", byTid: byTid(e)})
	if c.t.pass != 2 {
		return atom("0", kInt, name)
	}
	switch m.kind {
	case mAgg:
		c.t.fail(e.Pos, "Unsupported aggregation read", fmt.Sprintf("@%s is an aggregation: probes here cannot read what an aggregation holds.", name))
	case mLabels:
		if len(e.Keys) != 1 {
			c.t.fail(e.Pos, "Invalid labels key", "A constant table set in BEGIN has one key.")
		}
		k := c.expr(e.Keys[0]).integer()
		return hx{text: "labels(" + m.hcl + ", " + k.text + ")", prec: precAtom, kind: kDisplay, reads: k.reads, name: name}
	case mSaved:
		if !c.exit || c.probe < 0 {
			c.t.fail(e.Pos, "Internal error", "A saved value read outside on_exit.")
		}
		for _, u := range m.uses {
			if u.op == "store" {
				if u.value == "func" {
					return atom("func", kStr, name)
				}
				x := atom("entry."+m.hcl, m.val, name)
				x.nonzero = u.value == "ktime"
				if m.deco != "" {
					x = atom(m.deco+"(entry."+m.hcl+")", kDisplay, name)
				}
				return x
			}
		}
	}
	if m.kind != mTable {
		c.t.fail(e.Pos, "Map never stored", fmt.Sprintf("@%s is read but no probe stores into it.", name))
	}
	keys := c.keys(e)
	text := m.hcl + "[" + keys[0].text + "]"
	if len(keys) > 1 {
		text = m.hcl + "[" + keyList(keys) + "]"
	}
	if m.deco != "" {
		return hx{text: m.deco + "(" + text + ")", prec: precAtom, kind: kDisplay, reads: append(joinReads(keys...), m.hcl), name: name}
	}
	x := hx{text: text, prec: precAtom, kind: m.val, reads: append(joinReads(keys...), m.hcl), name: name, stored: true}
	x.pointee, x.user = m.pointsTo()
	return x
}

// expand translates a macro's body in place; as a value, its last
// statement is the value.
func (c *ctx) expand(m *Macro, args []Expr, at Pos, value bool) hx {
	if len(args) != len(m.Params) {
		c.t.fail(at, "Invalid macro call", fmt.Sprintf("%s takes %d argument(s).", m.Name, len(m.Params)))
	}
	if c.depth > 50 {
		c.t.fail(at, "Macro nested too deep", "Macros expand at most 50 deep.")
	}
	c.t.expansions++
	if c.t.expansions > MaxExpansions {
		c.t.fail(at, "Too many macro expansions", fmt.Sprintf("A program expands at most %d macros.", MaxExpansions))
	}
	inner := *c
	inner.vars = map[string]*varVal{}
	inner.idents = map[string]hx{}
	inner.alias = map[string]string{}
	inner.depth = c.depth + 1
	for k, v := range c.alias {
		inner.alias[k] = v
	}
	for i, p := range m.Params {
		switch p[0] {
		case '@':
			ref, ok := args[i].(*MapRef)
			if !ok || len(ref.Keys) > 0 {
				c.t.fail(args[i].At(), "Invalid macro argument", fmt.Sprintf("%s's parameter %s is a map: pass @name.", m.Name, p))
			}
			inner.alias[p[1:]] = c.mapName(ref)
		case '$':
			inner.vars[p[1:]] = &varVal{x: c.expr(args[i]), set: true}
		default:
			inner.idents[p] = c.expr(args[i])
			inner.raws = map[string]Expr{}
			for k, v := range c.raws {
				inner.raws[k] = v
			}
			inner.raws[p] = c.raw(args[i])
		}
	}
	body := m.Body
	var last Expr
	if value {
		if len(body) == 0 {
			c.t.fail(at, "Macro without a value", fmt.Sprintf("%s is used as a value, but its body ends with no expression.", m.Name))
		}
		es, ok := body[len(body)-1].(*ExprStmt)
		if !ok {
			c.t.fail(at, "Macro without a value", fmt.Sprintf("%s is used as a value, but its body ends with no expression.", m.Name))
		}
		last, body = es.X, body[:len(body)-1]
	}
	inner.stmts(body)
	c.deletes, c.deleted, c.event, c.hadTime, c.timeLine, c.stores = inner.deletes, inner.deleted, inner.event, inner.hadTime, inner.timeLine, inner.stores
	if last != nil {
		return inner.expr(last)
	}
	return hx{}
}

func (c *ctx) callValue(e *Call) hx {
	if m, ok := c.t.prog.Macros[e.Name]; ok {
		return c.expand(m, e.Args, e.Pos, true)
	}
	args := func(min, max int) {
		if len(e.Args) < min || len(e.Args) > max {
			c.t.fail(e.Pos, "Invalid call", fmt.Sprintf("%s() takes %d to %d arguments.", e.Name, min, max))
		}
	}
	wrap := func(f string, k valKind, xs ...hx) hx {
		var s []string
		for _, x := range xs {
			s = append(s, x.text)
		}
		name := ""
		if len(xs) > 0 {
			name = xs[0].name
		}
		x := hx{text: f + "(" + strings.Join(s, ", ") + ")", prec: precAtom, kind: k, reads: joinReads(xs...), name: name}
		if k == kDisplay && len(xs) == 1 && xs[0].kind == kInt && storableDecoders[f] {
			x.deco, x.arg = f, &xs[0]
		}
		return x
	}
	if e.Name == "kaddr" {
		return c.kaddr(e)
	}
	if c.special() && e.Name != "getopt" {
		c.t.fail(e.Pos, "Unsupported "+e.Name+"() in "+c.family, fmt.Sprintf("%s() in %s has no equivalent: %s only prints here.", e.Name, c.family, c.family))
	}
	switch e.Name {
	case "getopt":
		args(1, 3)
		if len(e.Args) < 2 {
			return atom("false", kBool, "")
		}
		c.t.note("getopt(%s): the option's default, as bpftrace runs the tool without it.", exprText(e.Args[0]))
		return c.expr(e.Args[1])
	case "str":
		args(1, 2)
		x := c.expr(e.Args[0])
		if x.kind == kStr {
			return x
		}
		xs := []hx{x.integer()}
		if len(e.Args) == 2 {
			xs = append(xs, c.expr(e.Args[1]).integer())
		}
		r := wrap("str", kStr, xs...)
		return r
	case "ksym", "usym":
		args(1, 1)
		return wrap(e.Name, kDisplay, c.expr(e.Args[0]).integer())
	case "kstack", "ustack":
		args(0, 2)
		var n *hx
		for _, a := range e.Args {
			if id, ok := a.(*Ident); ok && (id.Name == "perf" || id.Name == "bpftrace" || id.Name == "raw") {
				continue
			}
			x := c.expr(a)
			n = &x
		}
		if n == nil {
			return atom(e.Name, kStack, e.Name)
		}
		return wrap(e.Name, kStack, *n)
	case "ntop":
		args(1, 2)
		addr := e.Args[len(e.Args)-1]
		six := strings.Contains(exprText(addr), "6") || strings.Contains(exprText(addr), "addr8")
		if len(e.Args) == 2 {
			af, ok := constInt(e.Args[0])
			if id, isID := e.Args[0].(*Ident); isID {
				x := c.ident(id)
				af, ok = constIntText(x.text)
			}
			if !ok || (af != 2 && af != 10) {
				c.t.fail(e.Args[0].At(), "Unsupported ntop family", "ntop(FAMILY, addr) with a family known only at run time has no equivalent: inet(addr) and inet6(addr) are chosen where the value is shown.")
			}
			six = af == 10
		}
		if n, ok := constInt(addr); ok && n == 0 {
			// bpftrace's placeholder, to give a variable its type: an
			// error where it is shown.
			return hx{kind: kDisplay, prec: precAtom, placeholder: true, name: "addr"}
		}
		if six {
			return wrap("inet6", kDisplay, c.expr(addr))
		}
		return wrap("inet", kDisplay, c.expr(addr).integer())
	case "has_key":
		args(2, 2)
		ref, ok := e.Args[0].(*MapRef)
		if !ok {
			c.t.fail(e.Pos, "Invalid has_key", "has_key takes a map and a key.")
		}
		name := c.mapName(ref)
		m := c.t.mapOf(name)
		r := &MapRef{Pos: ref.Pos, Name: ref.Name, Keys: []Expr{e.Args[1]}}
		m.uses = append(m.uses, mapUse{probe: c.probe, exit: c.exit, op: "read", byTid: byTid(r)})
		if c.t.pass != 2 {
			return atom("true", kBool, "")
		}
		if m.kind == mSaved {
			return atom("true", kBool, "")
		}
		if m.kind == mLabels {
			c.t.note("has_key(@%s, ...): labels(%s, x) shows a value the table lacks as the number.", name, m.hcl)
			return atom("true", kBool, "")
		}
		if m.kind != mTable {
			c.t.fail(e.Pos, "Unsupported has_key", fmt.Sprintf("@%s is not a table a probe stores into.", name))
		}
		k := c.keys(r)
		return hx{text: "has(" + m.hcl + ", " + keyList(k) + ")", prec: precAtom, kind: kBool, reads: append(joinReads(k...), m.hcl)}
	case "strftime":
		// The text of a time is its strftime format (Print.Time).
		f := ""
		if len(e.Args) > 0 {
			if s, ok := e.Args[0].(*Str); ok {
				f = s.Val
			}
		}
		return atom(f, kTime, "time")
	case "join":
		args(1, 1)
		x := c.expr(e.Args[0])
		return hx{text: "join(" + x.text + ")", prec: precAtom, kind: kJoin, reads: x.reads, name: "args"}
	case "cgroup_path":
		args(1, 1)
		return wrap("cgroup_path", kDisplay, c.expr(e.Args[0]).integer())
	case "strerror":
		args(1, 1)
		return wrap("errno_name", kDisplay, c.expr(e.Args[0]).integer())
	case "syscall_name":
		args(1, 1)
		return wrap("syscall_name", kDisplay, c.expr(e.Args[0]).integer())
	case "bswap":
		args(1, 1)
		x := c.expr(e.Args[0])
		bits, ok := byteOrderFields[x.field]
		if !ok {
			c.t.fail(e.Pos, "Unsupported bswap()", "bswap() of a value of a width not known here has no equivalent: ntohs(x) and ntohl(x) take 16 or 32 bits from network order (only struct sock's ports and addresses are known by name).")
		}
		f := map[int]string{16: "ntohs", 32: "ntohl"}[bits]
		return hx{text: f + "(" + x.integer().text + ")", prec: precAtom, kind: kInt, reads: x.reads, name: x.name}
	case "buf":
		if len(e.Args) != 2 {
			c.t.fail(e.Pos, "Unsupported buf()", "buf() of an array without its length has no equivalent: write the length, buf(x, N).")
		}
		p, n := c.expr(e.Args[0]).integer(), c.expr(e.Args[1]).integer()
		return hx{text: "buf(" + p.text + ", " + n.text + ")", prec: precAtom, kind: kDisplay, reads: joinReads(p, n), name: p.name}
	case "offsetof":
		args(2, 2)
		st, ok := e.Args[0].(*Ident)
		if !ok || !strings.HasPrefix(st.Name, "struct ") || strings.Contains(st.Name, "*") {
			c.t.fail(e.Args[0].At(), "Unsupported offsetof()", "offsetof() of a type that is not a struct (struct NAME) has no equivalent.")
		}
		field := memberPath(e.Args[1])
		if field == "" {
			c.t.fail(e.Args[1].At(), "Unsupported offsetof()", "offsetof()'s member is a name, or names joined by dots.")
		}
		return hx{text: "offsetof(" + quote(strings.Join(strings.Fields(st.Name), " ")) + ", " + quote(field) + ")", prec: precAtom, kind: kInt, name: field}
	case "kptr", "uptr":
		args(1, 1)
		return c.expr(e.Args[0])
	case "delete":
		c.t.fail(e.Pos, "Unsupported delete's value", "delete's result has no equivalent; delete as a statement.")
	}
	if aggFuncs[e.Name] {
		c.t.fail(e.Pos, "Unsupported aggregation", fmt.Sprintf("%s() is assigned to a map (@m[k] = %s(...)); as a value it has no equivalent.", e.Name, e.Name))
	}
	if why, ok := missingFunctions[e.Name]; ok {
		c.t.fail(e.Pos, "Unsupported "+e.Name+"()", fmt.Sprintf("%s() has no equivalent: %s.", e.Name, why))
	}
	c.t.fail(e.Pos, "Unsupported "+e.Name+"()", fmt.Sprintf("%s() has no equivalent here.", e.Name))
	return hx{}
}

// storableDecoders are the decoders of a number that a table can keep
// the number of, decoding it where it is read (bpftrace stores the
// decoded value).
var storableDecoders = map[string]bool{"inet": true, "ksym": true, "errno_name": true, "syscall_name": true, "cgroup_path": true}

// byteOrderFields are the kernel's fields in network byte order, by
// name, with their width: struct sock_common's, whose types (__be16,
// __be32) the kernel's ABI keeps, and sockaddr_in's.
var byteOrderFields = map[string]int{"skc_dport": 16, "sin_port": 16, "sin6_port": 16, "skc_daddr": 32, "skc_rcv_saddr": 32}

func constIntText(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// exprText is a short rendering of e, for messages and guesses.
func exprText(e Expr) string {
	switch e := e.(type) {
	case *Ident:
		return e.Name
	case *Var:
		return "$" + e.Name
	case *Str:
		return strconv.Quote(e.Val)
	case *Num:
		return e.Text
	case *Field:
		return exprText(e.X) + "." + e.Name
	case *MapRef:
		return "@" + e.Name
	case *Cast:
		return "(" + e.Type + ")" + exprText(e.X)
	case *Call:
		var s []string
		for _, a := range e.Args {
			s = append(s, exprText(a))
		}
		return e.Name + "(" + strings.Join(s, ", ") + ")"
	}
	return "…"
}

// storedFieldDetail is the fix for .field of a pointer a table holds
// when the stores do not say which struct it points to (a tracepoint the
// profiles lack, a field that is no struct pointer, stores that differ):
// the spec reads it with a cast naming the struct.
func storedFieldDetail(table, field string) string {
	return fmt.Sprintf(".%[2]s of the pointer read from %[1]s: no built-in profile's format of the tracepoints that store it names one struct it points to. "+
		"Write the read with the struct's name: user_cast(%[1]s, \"struct NAME\").%[2]s for a struct in the process's memory (a system call's argument, "+
		"as naptime's user_cast(rqtp[tid], \"struct __kernel_timespec\").tv_sec), cast(%[1]s, \"struct NAME\").%[2]s for kernel memory.", table, field)
}

// enumName: a name written as C's enumerators are (SKB_DROP_REASON_*,
// upper case, digits and underscores, a letter first). Other unknown
// names stay an error here: a typo of a builtin is one.
func enumName(name string) bool {
	if name == "" || name[0] < 'A' || name[0] > 'Z' {
		return false
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// memberPath is offsetof()'s member as a path: f, or a.b.
func memberPath(e Expr) string {
	switch e := e.(type) {
	case *Ident:
		if !strings.Contains(e.Name, " ") {
			return e.Name
		}
	case *Field:
		if base := memberPath(e.X); base != "" {
			return base + "." + e.Name
		}
	}
	return ""
}
