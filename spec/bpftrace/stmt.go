package bpftrace

import (
	"fmt"
	"slices"
	"strings"
)

type varVal struct {
	x     hx
	set   bool
	stale string          // a table stored into after the value was read from it
	safe  map[string]bool // tables deleted from after the value was read
}

// ctx is where statements are translated: a handler of a spec probe
// (nil for BEGIN, END and interval), under the conditions of the ifs
// around them.
type ctx struct {
	t      *translator
	op     *outProbe
	h      *handler
	exit   bool
	probe  int
	kind   string   // the spec probe's kind
	family string   // bpftrace's probe type
	events []string // a tracepoint probe's events
	vars   map[string]*varVal
	idents map[string]hx
	alias  map[string]string
	conds  []hx
	// deletes are done at the end of the handler, when everything that
	// reads the table has read it; deleted is what they delete.
	deletes []*action
	deleted map[string]bool
	event   *action
	hadTime bool
	// timeLine is the format of a time() not yet printed: the next
	// printf's event prints it before its line.
	timeLine string
	depth    int
	// stores counts the stores into each table so far in the handler:
	// a condition that reads a table changed since it held is not the
	// condition bpftrace tested.
	stores map[string]int
	exited bool            // exit() was called (in an interval probe: the run's length)
	agg    *btAgg          // the bpftrace map the aggregation being written holds
	steps  *[]Step         // a BEGIN's, END's or interval's printing steps
	raws   map[string]Expr // a macro's identifier parameters: the arguments
}

// hold is cond as tested now.
func (c *ctx) hold(cond hx) hx {
	cond.gens = map[string]int{}
	for _, r := range cond.reads {
		cond.gens[r] = c.stores[r]
	}
	return cond
}

// checkConds fails when a condition in force reads a table stored into
// since it was tested.
func (c *ctx) checkConds(p Pos, conds []hx) {
	if c.t.pass != 2 {
		return
	}
	for _, cond := range conds {
		for r, g := range cond.gens {
			if c.stores[r] != g {
				c.t.fail(p, "Unsupported condition on a changed map", fmt.Sprintf("The condition around this reads the table %s, which a store before this in the block changed: here each statement tests its condition again, and would see the new value. Test the map into a $variable before storing into it, or split the block.", r))
			}
		}
	}
}

func (c *ctx) special() bool { return c.h == nil }

// when is the conjunction of the conditions in force.
func (c *ctx) when() (string, []string) { return c.whenOf(false) }

// whenOf is when, without the conditions of forks when unforked.
func (c *ctx) whenOf(unforked bool) (string, []string) {
	var parts, reads []string
	for _, x := range c.conds {
		if x.text == "true" || unforked && x.fork {
			continue
		}
		parts = append(parts, x.paren(precAnd))
		reads = append(reads, x.reads...)
	}
	return strings.Join(parts, " && "), reads
}

func (c *ctx) add(a *action) {
	c.checkConds(a.pos, c.conds)
	w, reads := c.when()
	if w != "" {
		a.attrs = append([]kv{{"when", w}}, a.attrs...)
	}
	a.reads = append(a.reads, reads...)
	for _, r := range a.reads {
		if c.deleted[r] && c.t.pass == 2 {
			c.t.fail(a.pos, "Read after delete", "This reads the map a delete before it in the block removed the key from; here deletes take effect at the end of the probe. Read the map before deleting from it.")
		}
	}
	if a.kind != "event" {
		c.event = nil
	}
	for _, b := range c.h.actions {
		if b.name == a.name && a.kind != "store" {
			c.t.fail(a.pos, "Map updated twice", fmt.Sprintf("@%s is updated in two places of one probe: here each update is an aggregation of its own; give them different names.", a.name))
		}
	}
	c.h.actions = append(c.h.actions, a)
}

// flush adds the deletes, each after every delete whose key or condition
// reads the table it deletes from.
func (c *ctx) flush() {
	for _, d := range c.deletes {
		c.checkConds(d.pos, []hx{{gens: d.gens}})
	}
	left := c.deletes
	for len(left) > 0 {
		pick := -1
		for i, d := range left {
			readByOther := false
			for j, o := range left {
				if j != i && o.name != d.name && slices.Contains(o.reads, d.name) {
					readByOther = true
				}
			}
			if !readByOther {
				pick = i
				break
			}
		}
		if pick < 0 {
			c.t.fail(left[0].pos, "Unsupported deletes", deleteCycle(left))
		}
		c.h.actions = append(c.h.actions, left[pick])
		left = append(left[:pick:pick], left[pick+1:]...)
	}
	c.deletes = nil
}

// deleteCycle says, for deletes no order can run, which map each one's
// key or condition tests that another of them deletes from.
func deleteCycle(left []*action) string {
	var tests []string
	for _, d := range left {
		var others []string
		for _, o := range left {
			if o.name != d.name && slices.Contains(d.reads, o.name) && !slices.Contains(others, "@"+o.name) {
				others = append(others, "@"+o.name)
			}
		}
		// One delete copied per branch of a fork (stmts) is said once.
		if line := fmt.Sprintf("the delete from @%s tests %s", d.name, strings.Join(others, " and ")); len(others) > 0 && !slices.Contains(tests, line) {
			tests = append(tests, line)
		}
	}
	return "These deletes each test a map another deletes from (" + strings.Join(tests, "; ") + "): here deletes take effect at the end of the probe, one after another, so whichever runs first changes what the others test; a $variable holding a map's value still tests the map. Delete under a condition that reads none of the maps deleted from, e.g. one on the key or the probe's arguments only."
}

// joinDeletes makes one delete of each pair that both copies of a fork
// hold (c.deletes[n0:n1], the first copy's, and c.deletes[n1:], the
// second's): the same delete, with the same key and condition but for the
// fork's, runs on both paths, so under neither fork condition. (tcplife's
// deletes, after an if on $comm = @skcomm[$sk], then test no @skcomm.)
func (c *ctx) joinDeletes(n0, n1 int) {
	first, second := c.deletes[n0:n1], c.deletes[n1:]
	var out []*action
	used := make([]bool, len(second))
	for _, a := range first {
		joined := false
		for j, b := range second {
			if !used[j] && a.unforked != nil && b.unforked != nil && a.pos == b.pos && sameAttrs(a.unforked.attrs, b.unforked.attrs) {
				used[j], joined = true, true
				out = append(out, a.unforked)
				break
			}
		}
		if !joined {
			out = append(out, a)
		}
	}
	for j, b := range second {
		if !used[j] {
			out = append(out, b)
		}
	}
	c.deletes = append(c.deletes[:n0:n0], out...)
}

func sameAttrs(a, b []kv) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stmts translates a list; it says whether every path through it returns.
func (c *ctx) stmts(list []Stmt) bool {
	base := len(c.conds)
	defer func() { c.conds = c.conds[:base] }()
	for i, s := range list {
		switch s := s.(type) {
		case *Return:
			if c.special() {
				c.t.fail(s.Pos, "Unsupported return", "return in "+c.family+" has no equivalent.")
			}
			return true
		case *If:
			cond := c.expr(s.Cond).boolean()
			switch cond.text {
			case "true":
				if c.stmts(s.Then) {
					return true
				}
				continue
			case "false":
				if c.stmts(s.Else) {
					return true
				}
				continue
			}
			// Both held as tested here, before either branch stores.
			held, nheld := c.hold(cond), c.hold(not(cond))
			before := c.snapshot()
			c.conds = append(c.conds, held)
			thenRet := c.stmts(s.Then)
			thenVars := c.snapshot()
			c.conds = c.conds[:len(c.conds)-1]
			c.vars = clone(before)
			c.conds = append(c.conds, nheld)
			elseRet := c.stmts(s.Else)
			elseVars := c.snapshot()
			c.conds = c.conds[:len(c.conds)-1]
			rest := list[i+1:]
			if !thenRet && !elseRet && forks(before, thenVars, elseVars, rest) {
				// A decoded value chosen by the if (ntop of one family or
				// the other): the rest of the block once per branch.
				// The paths exclude each other: what one deletes or stores
				// the other does not see.
				deleted, stores := copyBools(c.deleted), copyInts(c.stores)
				held.fork, nheld.fork = true, true
				n0 := len(c.deletes)
				c.vars = thenVars
				c.conds = append(c.conds, held)
				r1 := c.stmts(rest)
				n1 := len(c.deletes)
				c.conds = c.conds[:len(c.conds)-1]
				deleted1, stores1 := c.deleted, c.stores
				c.deleted, c.stores, c.event = deleted, stores, nil
				c.vars = elseVars
				c.conds = append(c.conds, nheld)
				r2 := c.stmts(rest)
				c.conds = c.conds[:len(c.conds)-1]
				c.joinDeletes(n0, n1)
				for k, v := range deleted1 {
					if c.deleted == nil {
						c.deleted = map[string]bool{}
					}
					c.deleted[k] = c.deleted[k] || v
				}
				for k, v := range stores1 {
					if c.stores == nil {
						c.stores = map[string]int{}
					}
					c.stores[k] += v - stores[k]
				}
				return r1 && r2
			}
			c.merge(s, cond, before, thenVars, elseVars, thenRet, elseRet)
			switch {
			case thenRet && elseRet:
				return true
			case thenRet:
				c.conds = append(c.conds, nheld)
			case elseRet:
				c.conds = append(c.conds, held)
			}
		default:
			c.stmt(s)
		}
	}
	return false
}

func (c *ctx) snapshot() map[string]*varVal { return clone(c.vars) }

func clone(m map[string]*varVal) map[string]*varVal {
	out := map[string]*varVal{}
	for k, v := range m {
		cp := *v
		out[k] = &cp
	}
	return out
}

// merge gives the variables an if assigned their value after it: the
// branch's value under its condition.
func (c *ctx) merge(s *If, cond hx, before, thenV, elseV map[string]*varVal, thenRet, elseRet bool) {
	c.vars = clone(before)
	names := map[string]bool{}
	for k := range thenV {
		names[k] = true
	}
	for k := range elseV {
		names[k] = true
	}
	for name := range names {
		b, tv, ev := before[name], thenV[name], elseV[name]
		pick := func(v *varVal) *varVal {
			if v == nil {
				return &varVal{}
			}
			return v
		}
		switch {
		case thenRet:
			c.vars[name] = pick(ev)
		case elseRet:
			c.vars[name] = pick(tv)
		default:
			tv, ev = pick(tv), pick(ev)
			if b != nil && same(tv, b) && same(ev, b) {
				continue
			}
			if tv.x.text == ev.x.text && tv.set == ev.set {
				c.vars[name] = tv
				continue
			}
			if !tv.set || !ev.set {
				// Assigned on one path only: read after the if, it has no
				// value on the other.
				c.vars[name] = &varVal{x: hx{text: "", kind: kInt}, stale: "if@" + name}
				continue
			}
			if tv.x.kind == kDisplay || ev.x.kind == kDisplay || tv.x.kind == kStack {
				c.vars[name] = &varVal{set: true, x: hx{text: cond.paren(precCond+1) + " ? " + tv.x.paren(precCond+1) + " : " + ev.x.paren(precCond), prec: precCond, kind: kDisplay, name: tv.x.name, reads: joinReads(cond, tv.x, ev.x)}, stale: "display@" + name}
				continue
			}
			c.vars[name] = &varVal{set: true, x: hx{text: cond.paren(precCond+1) + " ? " + tv.x.paren(precCond+1) + " : " + ev.x.paren(precCond), prec: precCond, kind: tv.x.kind, name: tv.x.name, reads: joinReads(cond, tv.x, ev.x)}}
		}
	}
}

func copyBools(m map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyInts(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// forks says whether an if gave a variable that the rest of the block
// reads a decoded value (ntop, ksym), a string or a stack, different ones
// on its paths: a spec chooses none of those by a condition.
func forks(before, thenV, elseV map[string]*varVal, rest []Stmt) bool {
	for name, tv := range thenV {
		ev := elseV[name]
		if ev == nil || tv.x.text == ev.x.text {
			continue
		}
		chosen := func(k valKind) bool { return k == kDisplay || k == kStr || k == kStack }
		if (chosen(tv.x.kind) || chosen(ev.x.kind)) && usesVar(rest, name) {
			return true
		}
	}
	return false
}

// usesVar says whether the statements read $name.
func usesVar(list []Stmt, name string) bool {
	found := false
	walkExprs(list, func(e Expr) {
		if v, ok := e.(*Var); ok && v.Name == name {
			found = true
		}
	})
	return found
}

// callsFunc says whether the statements call function name.
func callsFunc(list []Stmt, name string) bool {
	found := false
	walkExprs(list, func(e Expr) {
		if c, ok := e.(*Call); ok && c.Name == name {
			found = true
		}
	})
	return found
}

// walkExprs calls f on every expression of the statements, outer first.
func walkExprs(list []Stmt, f func(Expr)) {
	var expr func(e Expr)
	expr = func(e Expr) {
		f(e)
		switch e := e.(type) {
		case *MapRef:
			for _, k := range e.Keys {
				expr(k)
			}
		case *Unary:
			expr(e.X)
		case *Binary:
			expr(e.X)
			expr(e.Y)
		case *Cond:
			expr(e.C)
			expr(e.T)
			expr(e.F)
		case *Call:
			for _, a := range e.Args {
				expr(a)
			}
		case *Field:
			expr(e.X)
		case *Index:
			expr(e.X)
			expr(e.I)
		case *Cast:
			expr(e.X)
		case *Tuple:
			for _, a := range e.Elems {
				expr(a)
			}
		}
	}
	var stmts func(l []Stmt)
	stmts = func(l []Stmt) {
		for _, s := range l {
			switch s := s.(type) {
			case *ExprStmt:
				expr(s.X)
			case *Assign:
				if s.RHS != nil {
					expr(s.RHS)
				}
				if m, ok := s.LHS.(*MapRef); ok {
					expr(m)
				}
			case *If:
				expr(s.Cond)
				stmts(s.Then)
				stmts(s.Else)
			}
		}
	}
	stmts(list)
}

func same(a, b *varVal) bool { return a.x.text == b.x.text && a.set == b.set && a.stale == b.stale }

var aggFuncs = map[string]bool{"count": true, "sum": true, "min": true, "max": true, "avg": true, "stats": true, "hist": true, "lhist": true}

func (c *ctx) stmt(s Stmt) {
	switch s := s.(type) {
	case *For:
		c.forLoop(s)
	case *LoopJump:
		c.t.fail(s.Pos, "Unsupported "+s.What, s.What+" outside a for loop the importer translates has no equivalent.")
	case *Unsupported:
		c.t.fail(s.Pos, "Unsupported "+s.What, fmt.Sprintf("A %s has no equivalent: a probe's handler here is straight-line code, with conditions but no loops.", s.What))
	case *Assign:
		c.assign(s)
	case *ExprStmt:
		call, ok := s.X.(*Call)
		if !ok {
			if id, ok := s.X.(*Ident); ok {
				if m, ok := c.t.prog.Macros[id.Name]; ok {
					c.expand(m, nil, id.Pos, false)
					return
				}
			}
			c.t.fail(s.At(), "Unsupported statement", "An expression alone as a statement does nothing here; only calls (printf, delete, ...) and assignments are statements.")
		}
		c.call(call)
	default:
		c.t.fail(s.At(), "Unsupported statement", "This statement has no equivalent.")
	}
}

func (c *ctx) assign(s *Assign) {
	switch lhs := s.LHS.(type) {
	case *Var:
		if s.RHS == nil && s.Op == "=" { // let $x;
			c.vars[lhs.Name] = &varVal{}
			return
		}
		if call, ok := s.RHS.(*Call); ok && call.Name == "delete" {
			c.call(call)
			return
		}
		var x hx
		switch s.Op {
		case "=":
			x = c.expr(s.RHS)
		case "++", "--":
			x = c.binop(s.Pos, s.Op[:1], c.expr(lhs), atom("1", kInt, ""))
		default:
			x = c.binop(s.Pos, strings.TrimSuffix(s.Op, "="), c.expr(lhs), c.expr(s.RHS))
		}
		if x.name == "" || s.Op == "=" {
			x.name = lhs.Name
		}
		c.vars[lhs.Name] = &varVal{x: x, set: true}
	case *MapRef:
		c.mapAssign(s, lhs)
	}
}

func (c *ctx) mapName(ref *MapRef) string {
	if a, ok := c.alias[ref.Name]; ok {
		return a
	}
	return ref.Name
}

func (c *ctx) mapAssign(s *Assign, ref *MapRef) {
	name := c.mapName(ref)
	m := c.t.mapOf(name)
	call, _ := s.RHS.(*Call)
	if c.family == "BEGIN" {
		if call != nil && aggFuncs[call.Name] {
			c.t.fail(s.Pos, "Unsupported aggregation in BEGIN", "An aggregation updated in BEGIN has no equivalent.")
		}
		m.begin = append(m.begin, s)
		return
	}
	if c.special() {
		c.t.fail(s.Pos, "Unsupported assignment in "+c.family, fmt.Sprintf("Assigning @%s in %s has no equivalent: %s only prints here.", name, c.family, c.family))
	}
	switch {
	case call != nil && aggFuncs[call.Name] && s.Op == "=":
		c.aggregate(s, ref, m, call)
		return
	case s.Op == "++" || s.Op == "+=":
		if c.t.pass == 2 && m.kind != mAgg {
			c.t.fail(s.Pos, "Unsupported map update", fmt.Sprintf("@%s is both assigned and incremented: here a count or a sum is an aggregation, which probes cannot read.", name))
		}
		m.kind = mAgg
		if s.Op == "++" {
			c.aggregateAs(s.Pos, ref, m, anonName(m, "count", hx{}), "count", "")
		} else {
			v := c.expr(s.RHS).integer()
			c.aggregateAs(s.Pos, ref, m, anonName(m, "sum", v), "sum", v.text)
		}
		return
	case s.Op != "=":
		c.t.fail(s.Pos, "Unsupported map update", fmt.Sprintf("%s on a map has no equivalent: a table's value is stored whole (@m[k] = v), and counts and sums are aggregations (@m[k]++, @m[k] += v).", s.Op))
	}
	if m.kind == mAgg && c.t.pass == 2 {
		c.t.fail(s.Pos, "Unsupported map update", fmt.Sprintf("@%s is an aggregation elsewhere: storing a value into it has no equivalent.", name))
	}
	val := c.expr(s.RHS)
	if val.kind == kTuple {
		c.t.fail(s.RHS.At(), "Unsupported stored tuple", "A tuple as a map's value has no equivalent: store each value in a map of its own.")
	}
	if val.deco != "" {
		if m.deco != "" && m.deco != val.deco {
			c.t.fail(s.RHS.At(), "Unsupported stored value", fmt.Sprintf("@%s holds values decoded by %s and by %s: a table keeps numbers shown one way.", name, m.deco, val.deco))
		}
		m.deco, val = val.deco, *val.arg
	}
	if val.kind == kDisplay || val.kind == kTime || val.kind == kJoin {
		c.t.fail(s.RHS.At(), "Unsupported stored value", "A decoded value (ntop, ksym, usym, strftime, join) is shown, not stored: store the number and decode it where it is printed.")
	}
	if val.kind == kBool {
		val = val.integer()
	}
	m.val = val.kind
	if c.t.pass == 1 {
		m.storePointee(val)
	}
	keys := c.keys(ref)
	w, _ := c.when()
	use := mapUse{probe: c.probe, exit: c.exit, op: "store", byTid: byTid(ref), plain: w == "" && c.h.when == "", value: val.text}
	m.uses = append(m.uses, use)
	if c.t.pass == 2 && m.kind == mSaved {
		if val.text == "func" {
			return // on_exit knows its function
		}
		c.h.save = append(c.h.save, kv{m.hcl, val.text})
		return
	}
	if c.deleted[m.hcl] && c.t.pass == 2 {
		c.t.fail(s.Pos, "Store after delete", fmt.Sprintf("This stores into @%s after a delete from it in the block: here deletes take effect at the end of the probe, and would remove what this stores. Delete after storing, or store into another map.", name))
	}
	for _, v := range c.vars {
		if slices.Contains(v.x.reads, m.hcl) && m.hcl != "" {
			v.stale = name
		}
	}
	c.add(&action{kind: "store", name: m.hcl, pos: s.Pos, attrs: []kv{{"key", keyList(keys)}, {"value", val.text}}, reads: joinReads(append(keys, val)...)})
	if c.stores == nil {
		c.stores = map[string]int{}
	}
	c.stores[m.hcl]++
}

func byTid(ref *MapRef) bool {
	if len(ref.Keys) != 1 {
		return false
	}
	id, ok := ref.Keys[0].(*Ident)
	return ok && id.Name == "tid"
}

func keyList(keys []hx) string {
	var s []string
	for _, k := range keys {
		s = append(s, k.text)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// keys translates a map's keys (a tuple is its elements); a map without
// keys is a table of one key, 0.
func (c *ctx) keys(ref *MapRef) []hx {
	var out []hx
	for _, k := range ref.Keys {
		x := c.expr(k)
		if x.kind == kTuple {
			out = append(out, x.elems...)
			continue
		}
		out = append(out, c.key(k))
	}
	if len(out) == 0 {
		out = []hx{atom("0", kInt, "")}
	}
	return out
}

func (c *ctx) key(e Expr) hx {
	x := c.expr(e)
	switch x.kind {
	case kTuple:
		c.t.fail(e.At(), "Unsupported tuple", "A tuple in a key is its elements: internal.")
	case kTime, kJoin:
		c.t.fail(e.At(), "Unsupported key", "strftime and join are printed only; a key is a value.")
	case kBool:
		x = x.integer()
	}
	return x
}

func (c *ctx) aggregate(s *Assign, ref *MapRef, m *mapInfo, call *Call) {
	if c.t.pass == 2 && m.kind != mAgg {
		c.t.fail(s.Pos, "Unsupported map update", fmt.Sprintf("@%s is both an aggregation and a stored value: here an aggregation cannot be read by probes.", m.name))
	}
	m.kind = mAgg
	args := call.Args
	need := map[string]int{"count": 0, "sum": 1, "min": 1, "max": 1, "avg": 1, "stats": 1, "hist": 1, "lhist": 4}[call.Name]
	if len(args) != need {
		if call.Name == "hist" && len(args) == 2 {
			c.t.fail(args[1].At(), "Unsupported hist precision", "hist(x, N) with N bits of precision per power of two has no equivalent: histograms here are log2 (hist(x)).")
		}
		c.t.fail(call.Pos, "Invalid aggregation", fmt.Sprintf("%s() takes %d argument(s).", call.Name, need))
	}
	var value string
	c.agg = &btAgg{name: "@" + m.name, kind: call.Name, keyed: len(ref.Keys) > 0}
	defer func() { c.agg = nil }()
	base := anonName(m, call.Name, hx{})
	if need > 0 {
		v := c.expr(args[0])
		base = anonName(m, call.Name, v)
		if v.kind != kInt && v.kind != kBool {
			c.t.fail(args[0].At(), "Unsupported aggregated value", fmt.Sprintf("%s() of a string or a decoded value has no equivalent: it aggregates numbers.", call.Name))
		}
		value = v.integer().text
	}
	switch call.Name {
	case "avg", "stats":
		c.t.note("%s() of @%s: show prints the sum (%s_sum) and the count (%s_count); the average is their quotient.", call.Name, m.name, base, base)
		c.aggregateAs(s.Pos, ref, m, base, "count", "", "_count")
		c.aggregateAs(s.Pos, ref, m, base, "sum", value, "_sum")
		return
	case "lhist":
		var lim []string
		for i, a := range args[1:] {
			n, ok := constInt(a)
			if !ok {
				c.t.fail(a.At(), "Invalid lhist bound", "lhist's min, max and step are constants.")
			}
			lim = append(lim, []string{"min", "max", "step"}[i]+"="+fmt.Sprint(n))
			c.agg.bounds[i] = n
		}
		c.aggregateAs(s.Pos, ref, m, base, "lhist", value, append([]string{""}, lim...)...)
		return
	}
	c.aggregateAs(s.Pos, ref, m, base, call.Name, value)
}

// anonName is the aggregation's name: the map's, or for bpftrace's
// anonymous @, what it counts (calls) or the value's name (bytes).
func anonName(m *mapInfo, kind string, v hx) string {
	if m.name != "" {
		return m.name
	}
	if kind == "count" {
		return "calls"
	}
	if n := identName(v.name); n != "" {
		return n
	}
	return kind
}

func (c *ctx) aggregateAs(p Pos, ref *MapRef, m *mapInfo, base, kind, value string, extra ...string) {
	suffix := ""
	if len(extra) > 0 && strings.HasPrefix(extra[0], "_") {
		suffix, extra = extra[0], extra[1:]
	} else if len(extra) > 0 && extra[0] == "" {
		extra = extra[1:]
	}
	if m.shared {
		c.t.note("@%s is updated by several probes: each keeps its own %s %q, which show prints under it; together they are bpftrace's map.", m.name, kind, base+suffix)
	}
	a := &action{kind: kind, name: base + suffix, pos: p}
	if c.agg != nil {
		bt := *c.agg
		bt.role = strings.TrimPrefix(suffix, "_")
		a.bt = &bt
	}
	if value != "" {
		a.attrs = append(a.attrs, kv{"value", value})
	}
	for _, e := range extra {
		k, v, _ := strings.Cut(e, "=")
		a.attrs = append(a.attrs, kv{k, v})
	}
	if len(ref.Keys) > 0 {
		keys := c.keys(ref)
		if a.bt != nil {
			for _, k := range keys {
				a.bt.keys = append(a.bt.keys, keyKind(k))
			}
		}
		a.attrs = append(a.attrs, kv{"by", keyList(keys)})
		a.reads = joinReads(keys...)
	}
	c.add(a)
}

// call translates a call as a statement.
func (c *ctx) call(call *Call) {
	if m, ok := c.t.prog.Macros[call.Name]; ok {
		c.expand(m, call.Args, call.Pos, false)
		return
	}
	printing := c.family == "END" || c.family == "interval" || c.family == "BEGIN"
	switch call.Name {
	case "printf":
		c.printf(call)
	case "time":
		c.hadTime = true
		c.timeStep(call)
		c.timeLine = "%H:%M:%S\n"
		if len(call.Args) > 0 {
			if f, ok := call.Args[0].(*Str); ok {
				c.timeLine = f.Val
			}
		}
		if !c.special() {
			c.t.note("time() printed the time before a line: each event here carries its time.")
		}
	case "join":
		if c.special() {
			c.t.fail(call.Pos, "Unsupported join", "join in "+c.family+" has no equivalent.")
		}
		if len(call.Args) != 1 {
			c.t.fail(call.Pos, "Unsupported join", "join(argv, SEPARATOR) has no equivalent: join(argv) shows the arguments separated by spaces.")
		}
		x := c.expr(call.Args[0])
		c.field(call.Pos, "args", hx{text: "join(" + x.text + ")", prec: precAtom, kind: kJoin, reads: x.reads})
		c.printed(c.event, Print{Format: "%s\n", Fields: []int{len(c.event.fields) - 1}})
	case "print", "clear", "zero":
		if printing {
			c.mapStep(call)
			return
		}
		c.t.fail(call.Pos, "Unsupported "+call.Name, fmt.Sprintf("%s() in a probe has no equivalent: probectl show and run print the aggregations, and run -interval what each interval added.", call.Name))
	case "delete":
		if printing {
			return
		}
		c.delete(call)
	case "cat":
		c.cat(call)
	case "exit":
		c.exited = true
		if c.family == "BEGIN" {
			c.t.beginExit = true
		}
		if printing {
			c.step(Step{Op: "exit"})
			return
		}
		c.probeExit(call)
	default:
		if printing && call.Name == "system" {
			c.t.fail(call.Pos, "Unsupported "+call.Name, call.Name+"() has no equivalent: probectl runs no commands.")
		}
		if why, ok := missingFunctions[call.Name]; ok {
			c.t.fail(call.Pos, "Unsupported "+call.Name+"()", fmt.Sprintf("%s() has no equivalent: %s.", call.Name, why))
		}
		c.t.fail(call.Pos, "Unsupported statement", fmt.Sprintf("%s() as a statement has no equivalent.", call.Name))
	}
}

func (c *ctx) delete(call *Call) {
	var ref *MapRef
	var keys []Expr
	switch len(call.Args) {
	case 1:
		ref, _ = call.Args[0].(*MapRef)
		if ref != nil {
			keys = ref.Keys
		}
	case 2:
		ref, _ = call.Args[0].(*MapRef)
		keys = []Expr{call.Args[1]}
	}
	if ref == nil {
		c.t.fail(call.Pos, "Invalid delete", "delete takes a map and a key: delete(@m, k) or delete(@m[k]).")
	}
	name := c.mapName(ref)
	m := c.t.mapOf(name)
	r := &MapRef{Pos: ref.Pos, Name: ref.Name, Keys: keys}
	m.uses = append(m.uses, mapUse{probe: c.probe, exit: c.exit, op: "delete", byTid: byTid(r)})
	if c.t.pass != 2 {
		return
	}
	switch m.kind {
	case mSaved:
		return
	case mAgg:
		c.t.fail(call.Pos, "Unsupported delete", fmt.Sprintf("Deleting a key of the aggregation @%s has no equivalent: aggregations keep every key they counted.", name))
	}
	k := c.keys(r)
	c.checkConds(call.Pos, c.conds)
	w, reads := c.when()
	a := &action{kind: "delete", name: m.hcl, pos: call.Pos, attrs: []kv{{"key", keyList(k)}}, reads: append(joinReads(k...), reads...)}
	a.gens = c.hold(hx{reads: a.reads}).gens
	if w != "" {
		a.attrs = append([]kv{{"when", w}}, a.attrs...)
	}
	uw, ureads := c.whenOf(true)
	u := &action{kind: "delete", name: m.hcl, pos: call.Pos, attrs: []kv{{"key", keyList(k)}}, reads: append(joinReads(k...), ureads...)}
	u.gens = c.hold(hx{reads: u.reads}).gens
	if uw != "" {
		u.attrs = append([]kv{{"when", uw}}, u.attrs...)
	}
	u.unforked, a.unforked = u, u // joined, it is its own unforked form
	if c.deleted == nil {
		c.deleted = map[string]bool{}
	}
	c.deleted[m.hcl] = true
	for _, v := range c.vars {
		if slices.Contains(v.x.reads, m.hcl) {
			if v.safe == nil {
				v.safe = map[string]bool{}
			}
			v.safe[m.hcl] = true
		}
	}
	c.deletes = append(c.deletes, a)
}

// missingFunctions are bpftrace's functions without an equivalent.
var missingFunctions = map[string]string{
	"bswap":         "there is no byte swap of a given width; ntohs(x) and ntohl(x) take 16 or 32 bits from network order",
	"sizeof":        "types are the kernel's BTF, read at plan time, not a value",
	"reg":           "registers are read as arg0..arg5 only",
	"uaddr":         "a user variable is not read by name",
	"signal":        "probes observe only: they send no signals",
	"override":      "probes observe only: they change no return value",
	"system":        "probectl runs no commands",
	"strncmp":       "strings compare whole (==, !=) or by prefix (starts_with)",
	"strcontains":   "strings compare whole (==, !=) or by prefix (starts_with)",
	"len":           "there is no length of a map or a stack",
	"path":          "a struct path is not turned into a string; str() of a dentry's name reads one part",
	"macaddr":       "there is no MAC address decoder",
	"cgroupid":      "cgroup is the task's cgroup ID; a path's ID is not looked up",
	"percpu_kaddr":  "a per-CPU kernel variable is not read by name",
	"nsecs":         "the clock is ktime, since boot; other clocks are not values",
	"unwatch":       "probectl has no watchpoints",
	"skboutput":     "packets are not written out",
	"socket_cookie": "there is no socket cookie value",
	"pton":          "an address is written as its number",
	"debugf":        "there is no trace pipe output",
	"errorf":        "there is no error output",
	"warnf":         "there is no warning output",
}
