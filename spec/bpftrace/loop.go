package bpftrace

import (
	"fmt"
	"strconv"
	"strings"
)

// Loops: bpftrace's for $i : A..B { ... } with break and continue. A spec's
// handler is straight-line code with conditions, so a loop has an
// equivalent only as what it computes: bpftrace's walk of the task's
// working directory (opensnoop's getcwd, which stores each name of the
// path into a map keyed by tid and the step, and printcwd, which prints
// them back root first) is the spec's value cwd. Any other loop stops the
// import at its line and column.

type (
	// For is for $Var : From..To { Body } (To excluded); Map, for a
	// loop over a map (for $kv : @m), is its name, From and To nil.
	For struct {
		Pos      Pos
		Var      *Var
		From, To Expr
		Map      string
		Body     []Stmt
	}
	// LoopJump is break or continue.
	LoopJump struct {
		Pos  Pos
		What string
	}
)

func (s *For) At() Pos      { return s.Pos }
func (s *LoopJump) At() Pos { return s.Pos }

func isLoop(s Stmt) bool {
	_, ok := s.(*For)
	return ok
}

// forStmt parses a for loop, the "for" at the token.
func (p *parser) forStmt() (Stmt, error) {
	s := &For{Pos: p.tok.pos}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind != tVar {
		return nil, errAt(p.tok.pos, "Syntax error", "Expected a $variable after for: for $i : 0..10 { ... }.")
	}
	s.Var = &Var{Pos: p.tok.pos, Name: p.tok.text}
	if err := p.next(); err != nil {
		return nil, err
	}
	if err := p.expect(":"); err != nil {
		return nil, err
	}
	if p.tok.kind == tMap {
		s.Map = p.tok.text
		if err := p.next(); err != nil {
			return nil, err
		}
	} else {
		var err error
		if s.From, err = p.expr(); err != nil {
			return nil, err
		}
		if err := p.expect(".."); err != nil {
			return nil, err
		}
		if s.To, err = p.expr(); err != nil {
			return nil, err
		}
	}
	body, err := p.block()
	if err != nil {
		return nil, err
	}
	s.Body = body
	return s, nil
}

// unrollStmt parses unroll(N) { ... }, the "unroll" at the token: a for
// loop of N steps without a variable.
func (p *parser) unrollStmt() (Stmt, error) {
	s := &For{Pos: p.tok.pos, Var: &Var{Pos: p.tok.pos}, From: &Num{Pos: p.tok.pos, Text: "0"}}
	if err := p.next(); err != nil {
		return nil, err
	}
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var err error
	if s.To, err = p.expr(); err != nil {
		return nil, err
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	if s.Body, err = p.block(); err != nil {
		return nil, err
	}
	return s, nil
}

// forLoop translates a for loop: the working directory's walk, or its
// printing, or a diagnostic.
func (c *ctx) forLoop(s *For) {
	if s.Map != "" {
		c.t.fail(s.Pos, "Unsupported for loop over a map", fmt.Sprintf("for $kv : @%s has no equivalent: a spec's handler is straight-line code. To print the map, print(@%s) in END does.", s.Map, s.Map))
		return
	}
	from, to := c.expr(s.From), c.expr(s.To)
	lo, ok := constValue(from)
	if !ok {
		c.t.fail(s.From.At(), "Unbounded for loop", "A for loop's bounds must be constants (after macros and getopt's defaults): "+from.text+" is not.")
		return
	}
	hi, ok := constValue(to)
	if !ok {
		c.t.fail(s.To.At(), "Unbounded for loop", "A for loop's bounds must be constants (after macros and getopt's defaults): "+to.text+" is not.")
		return
	}
	if m, ok := c.cwdWalk(s); ok && c.onlyWalking(s, m, false) {
		if c.t.cwdMaps == nil {
			c.t.cwdMaps = map[string]bool{}
		}
		c.t.cwdMaps[m] = true
		return
	}
	if c.onlyWalking(s, "", true) && c.cwdPrint(s) {
		return
	}
	if c.unrolled(s, lo, hi) {
		return
	}
	c.t.fail(s.Pos, "Unsupported for loop", fmt.Sprintf("A for loop has an equivalent as its steps written out (at most %d, with no break or continue) or as bpftrace's walk of the task's working directory (opensnoop's getcwd and printcwd: the value cwd). A spec's handler is straight-line code with conditions: write the loop's steps out, or compute the value it computes with a built-in value.", MaxUnroll))
}

// MaxLoopSteps bounds the loop steps a program writes out in all, nested
// loops' included (each step of an outer loop writes the inner out again).
const MaxLoopSteps = 256

// MaxUnroll is the most steps a for loop is written out in: a $variable
// an if sets in each step is a conditional over all the steps before, so
// the text doubles per step.
const MaxUnroll = 8

// unrolled writes a loop out, its body once per step with $i the step's
// number: when it has at most MaxUnroll steps and no break or continue
// (which would make each later step's statements conditional on every
// earlier one's).
func (c *ctx) unrolled(s *For, lo, hi int64) bool {
	if hi-lo > MaxUnroll {
		return false
	}
	jumps := false
	walkStmts(s.Body, func(st Stmt) {
		if _, ok := st.(*LoopJump); ok {
			jumps = true
		}
	})
	if jumps {
		return false
	}
	for i := lo; i < hi; i++ {
		c.t.steps++
		if c.t.steps > MaxLoopSteps {
			c.t.fail(s.Pos, "Too many loop steps", fmt.Sprintf("A program writes out at most %d loop steps in all, nested loops' included: make the loops shorter or fewer.", MaxLoopSteps))
		}
		if s.Var.Name != "" { // unroll(N) has none
			c.vars[s.Var.Name] = &varVal{x: atom(strconv.FormatInt(i, 10), kInt, s.Var.Name), set: true}
		}
		if c.stmts(s.Body) {
			c.t.fail(s.Pos, "Unsupported return in a loop", "A return inside a for loop has no equivalent here.")
		}
	}
	return true
}

// constValue is the integer a translated bound is, through u64() and
// parentheses.
func constValue(x hx) (int64, bool) {
	t := x.text
	for {
		switch {
		case strings.HasPrefix(t, "u64(") && strings.HasSuffix(t, ")"):
			t = t[4 : len(t)-1]
		case strings.HasPrefix(t, "(") && strings.HasSuffix(t, ")"):
			t = t[1 : len(t)-1]
		default:
			v, err := strconv.ParseInt(t, 0, 64)
			return v, err == nil
		}
	}
}

// walkStmts calls f on every statement of list, in ifs and loops too.
func walkStmts(list []Stmt, f func(Stmt)) {
	for _, s := range list {
		f(s)
		switch s := s.(type) {
		case *If:
			walkStmts(s.Then, f)
			walkStmts(s.Else, f)
		case *For:
			walkStmts(s.Body, f)
		}
	}
}

// onlyWalking reports whether a loop's body does nothing but what a walk
// of the working directory (or, printing, its printing) does: $variables,
// ifs, break and continue, the store into the walk's map m (printing:
// printf, and delete of a walk's map). Anything else in it would be lost.
func (c *ctx) onlyWalking(s *For, m string, printing bool) bool {
	ok := true
	walkStmts(s.Body, func(st Stmt) {
		switch st := st.(type) {
		case *If, *LoopJump:
		case *Assign:
			if ref, isMap := st.LHS.(*MapRef); isMap && (printing || c.mapName(ref) != m) {
				ok = false
			}
		case *ExprStmt:
			call, isCall := st.X.(*Call)
			switch {
			case !printing || !isCall:
				ok = false
			case call.Name == "printf":
			case call.Name == "delete" && len(call.Args) > 0:
				ref, isMap := call.Args[0].(*MapRef)
				ok = ok && isMap && c.t.cwdMaps[c.mapName(ref)]
			default:
				ok = false
			}
		default:
			ok = false
		}
	})
	return ok
}

// cwdWalk recognises opensnoop's getcwd: a loop that stores
// str($d.d_name.name) into @m[tid, $i], $d starting at the task's
// working directory (curtask.fs.pwd.dentry). It returns the map.
func (c *ctx) cwdWalk(s *For) (string, bool) {
	found := ""
	walkStmts(s.Body, func(st Stmt) {
		a, ok := st.(*Assign)
		if !ok || a.Op != "=" {
			return
		}
		ref, ok := a.LHS.(*MapRef)
		if !ok || len(ref.Keys) != 2 {
			return
		}
		tid, ok1 := ref.Keys[0].(*Ident)
		step, ok2 := ref.Keys[1].(*Var)
		call, ok3 := a.RHS.(*Call)
		if !ok1 || !ok2 || !ok3 || tid.Name != "tid" || step.Name != s.Var.Name || call.Name != "str" || len(call.Args) != 1 {
			return
		}
		name, ok := call.Args[0].(*Field)
		if !ok || name.Name != "name" {
			return
		}
		dname, ok := name.X.(*Field)
		if !ok || dname.Name != "d_name" {
			return
		}
		d, ok := dname.X.(*Var)
		if !ok {
			return
		}
		if v := c.vars[d.Name]; v == nil || !strings.HasSuffix(v.x.text, "task.fs.pwd.dentry") {
			return
		}
		found = c.mapName(ref)
	})
	return found, found != ""
}

// cwdPrint recognises opensnoop's printcwd: a loop that reads a map the
// walk filled and prints what it reads. It prints cwd on the line of the
// event being printed, as printcwd does: nothing for the root, else the
// path; under the conditions in force, as a field of the event that says
// whether they held.
func (c *ctx) cwdPrint(s *For) bool {
	reads, prints := false, false
	walkStmts(s.Body, func(st Stmt) {
		switch st := st.(type) {
		case *Assign:
			if ref, ok := st.RHS.(*MapRef); ok && c.t.cwdMaps[c.mapName(ref)] {
				reads = true
			}
		case *ExprStmt:
			if call, ok := st.X.(*Call); ok && call.Name == "printf" {
				prints = true
			}
		}
	})
	if !reads || !prints {
		return false
	}
	if c.special() {
		c.t.fail(s.Pos, "Unsupported for loop", "The working directory's printing has an equivalent only in a probe that prints an event: cwd is the task's.")
		return true
	}
	line := Print{Format: "%s", Dirs: []int{0}}
	c.linePrint(s.Pos, &line, []kv{{"cwd", "cwd"}})
	return true
}

// linePrint adds line, printing fields (appended to the event), to the
// event being printed, as bpftrace prints it on the same line: under the
// conditions now in force, which a field of the event holds when they
// are not the event's own. Without an event yet, it starts one.
func (c *ctx) linePrint(p Pos, line *Print, fields []kv) {
	w, _ := c.when()
	if c.event == nil {
		for _, f := range fields {
			c.field(p, f.k, hx{text: f.v, prec: precAtom, kind: kStr, name: f.k})
			line.Fields = append(line.Fields, len(c.event.fields)-1)
		}
		c.printed(c.event, *line)
		return
	}
	ev := c.event
	add := func(name, text string) int {
		base := name
		for i := 2; ev.hasField(name); i++ {
			name = fmt.Sprintf("%s_%d", base, i)
		}
		ev.fields = append(ev.fields, kv{name, text})
		return len(ev.fields) - 1
	}
	if w != ev.attrs[0].v {
		line.When = 1 + add("printed", hx{text: w, prec: precCond, kind: kBool}.integer().text)
	}
	for _, f := range fields {
		line.Fields = append(line.Fields, add(f.k, f.v))
	}
	c.printed(ev, *line)
}

// firstByte translates s[0] == "c"[0] (and !=, either way round), a
// string's first byte against a literal's: starts_with(s, "c").
func (c *ctx) firstByte(e *Binary) (hx, bool) {
	if e.Op != "==" && e.Op != "!=" {
		return hx{}, false
	}
	x, lx := e.X.(*Index)
	y, ly := e.Y.(*Index)
	if !lx || !ly {
		return hx{}, false
	}
	if _, ok := c.raw(x.X).(*Str); ok {
		x, y = y, x
	}
	lit, ok := c.raw(y.X).(*Str)
	i, ok1 := constInt(x.I)
	j, ok2 := constInt(y.I)
	if !ok || !ok1 || !ok2 || i != 0 || j != 0 || lit.Val == "" {
		return hx{}, false
	}
	s := c.expr(x.X)
	if s.kind != kStr {
		return hx{}, false
	}
	out := hx{text: fmt.Sprintf("starts_with(%s, %q)", s.text, lit.Val[:1]), prec: precAtom, kind: kBool, reads: s.reads}
	if e.Op == "!=" {
		return not(out), true
	}
	return out, true
}
