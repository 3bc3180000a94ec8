package bpftrace

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Error is a mistake or a construct without an equivalent, at its place
// in the .bt file.
type Error struct {
	Pos             Pos
	Summary, Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d:%d: %s: %s", e.Pos.Line, e.Pos.Col, e.Summary, e.Detail)
}

func errAt(p Pos, summary, detail string) *Error {
	return &Error{Pos: p, Summary: summary, Detail: detail}
}

// MaxNesting bounds how deep brackets, blocks and unary operators nest, so
// that no pass over a program recurses without bound.
const MaxNesting = 200

type parser struct {
	lx      lexer
	tok     token
	depth   int
	noDiv   int // inside a /filter/: a bare / ends it
	prog    *Program
	pending []string // comments not yet given to a probe
	taken   int      // lexer comments already handed out
	closed  int      // offset of the last block's }
}

// Parse reads a bpftrace program.
func Parse(src []byte) (*Program, error) {
	p := &parser{lx: lexer{src: src, line: 1}, prog: &Program{Defines: map[string]string{}, Macros: map[string]*Macro{}}}
	if err := p.program(); err != nil {
		return nil, err
	}
	return p.prog, nil
}

func (p *parser) next() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) is(text string) bool { return p.tok.kind == tPunct && p.tok.text == text }

func (p *parser) isWord(w string) bool { return p.tok.kind == tIdent && p.tok.text == w }

func (p *parser) expect(text string) error {
	if !p.is(text) {
		return errAt(p.tok.pos, "Syntax error", fmt.Sprintf("Expected %q here, found %s.", text, p.describe()))
	}
	return p.next()
}

func (p *parser) describe() string {
	switch p.tok.kind {
	case tEOF:
		return "the end of the file"
	case tString:
		return strconv.Quote(p.tok.text)
	case tVar:
		return "$" + p.tok.text
	case tMap:
		return "@" + p.tok.text
	}
	return strconv.Quote(p.tok.text)
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxNesting {
		return errAt(p.tok.pos, "Nested too deep", fmt.Sprintf("Brackets, blocks and operators nest at most %d deep.", MaxNesting))
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// takeComments moves the comments the lexer has read into pending.
func (p *parser) takeComments(before int) {
	for p.taken < len(p.lx.comments) && p.lx.comments[p.taken].pos.Off < before {
		p.pending = append(p.pending, p.lx.comments[p.taken].text...)
		p.taken++
	}
}

func (p *parser) program() error {
	if strings.HasPrefix(string(p.lx.src), "#!") {
		p.lx.restOfLine()
	}
	if err := p.next(); err != nil {
		return err
	}
	// The header: the first run of comments, up to a blank line or code.
	lastLine := 0
	for _, c := range p.lx.comments {
		if c.pos.Off >= p.tok.pos.Off || (lastLine != 0 && c.pos.Line > lastLine+1) {
			break
		}
		p.prog.Header = append(p.prog.Header, c.text...)
		lastLine = c.pos.Line + len(c.text) - 1
		p.taken++
	}
	var skip []bool // the #if stack: true where lines are skipped
	skipping := func() bool {
		for _, s := range skip {
			if s {
				return true
			}
		}
		return false
	}
	for p.tok.kind != tEOF {
		if p.is("#") {
			at := p.tok.pos
			line := strings.TrimSpace(p.lx.restOfLine())
			word, rest, _ := strings.Cut(line, " ")
			rest = strings.TrimSpace(rest)
			switch word {
			case "ifndef", "ifdef", "if":
				on := rest == "BPFTRACE_HAVE_BTF"
				if word == "ifndef" {
					on = !on
				}
				if word == "if" {
					return errAt(at, "Unsupported preprocessor condition", "Only #ifdef and #ifndef BPFTRACE_HAVE_BTF are understood (taken as a kernel with BTF).")
				}
				skip = append(skip, !on)
			case "else":
				if len(skip) == 0 {
					return errAt(at, "Syntax error", "#else without #ifdef.")
				}
				skip[len(skip)-1] = !skip[len(skip)-1]
			case "endif":
				if len(skip) == 0 {
					return errAt(at, "Syntax error", "#endif without #ifdef.")
				}
				skip = skip[:len(skip)-1]
			case "define":
				if !skipping() {
					name, val, _ := strings.Cut(rest, " ")
					val = strings.TrimSpace(val)
					if i := strings.Index(val, "/*"); i >= 0 {
						val = strings.TrimSpace(val[:i])
					}
					if i := strings.Index(val, "//"); i >= 0 {
						val = strings.TrimSpace(val[:i])
					}
					p.prog.Defines[name] = val
				}
			case "include":
				// Types come from the kernel's BTF.
			default:
				if !strings.HasPrefix(line, "!") {
					return errAt(at, "Unsupported preprocessor directive", fmt.Sprintf("#%s has no equivalent: only #include, #define and #ifdef BPFTRACE_HAVE_BTF are understood.", word))
				}
			}
			for skipping() {
				// Skip whole lines up to the #else or #endif that ends this part.
				p.lx.advance(1)
				if p.lx.off >= len(p.lx.src) {
					return errAt(at, "Syntax error", "#ifdef without #endif.")
				}
				l := strings.TrimSpace(p.lx.restOfLine())
				switch {
				case strings.HasPrefix(l, "#if"):
					skip = append(skip, true)
				case strings.HasPrefix(l, "#endif"):
					skip = skip[:len(skip)-1]
				case strings.HasPrefix(l, "#else") && !anyTrue(skip[:len(skip)-1]):
					skip[len(skip)-1] = false
				}
			}
			p.taken = len(p.lx.comments)
			if err := p.next(); err != nil {
				return err
			}
			continue
		}
		if err := p.item(); err != nil {
			return err
		}
	}
	if len(skip) > 0 {
		return errAt(p.tok.pos, "Syntax error", "#ifdef without #endif.")
	}
	return nil
}

func anyTrue(b []bool) bool {
	for _, v := range b {
		if v {
			return true
		}
	}
	return false
}

// item reads a config block, a macro or a probe.
func (p *parser) item() error {
	at := p.tok.pos
	if p.tok.kind == tIdent {
		switch p.tok.text {
		case "config":
			return p.config()
		case "macro":
			return p.macro()
		case "let":
			return p.mapDecl()
		case "import", "fn", "struct", "union", "enum", "typedef":
			return errAt(at, "Unsupported top-level "+p.tok.text, fmt.Sprintf("%q at the top level has no equivalent in a spec.", p.tok.text))
		}
	}
	p.takeComments(at.Off)
	// Attach points, read raw from the token's start.
	p.lx.seek(at)
	pr := &Probe{Pos: at}
	for {
		t, err := p.lx.raw()
		if err != nil {
			return err
		}
		if t.text == "" || !isIdentStart(t.text[0]) {
			return errAt(t.pos, "Syntax error", "Expected an attach point (kprobe:vfs_read, tracepoint:sched:sched_switch, BEGIN).")
		}
		pr.Attach = append(pr.Attach, Attach{Pos: t.pos, Text: t.text})
		if err := p.next(); err != nil {
			return err
		}
		if !p.is(",") {
			break
		}
	}
	if p.is("/") {
		if err := p.next(); err != nil {
			return err
		}
		p.noDiv++
		f, err := p.expr()
		p.noDiv--
		if err != nil {
			return err
		}
		pr.Filter = f
		if err := p.expect("/"); err != nil {
			return err
		}
	}
	body, err := p.block()
	if err != nil {
		return err
	}
	pr.Body = body
	p.takeComments(p.closed)
	pr.Comments, p.pending = p.pending, nil
	p.prog.Probes = append(p.prog.Probes, pr)
	return nil
}

// mapDecl reads let @name = KIND(N); at the top level.
func (p *parser) mapDecl() error {
	at := p.tok.pos
	if err := p.next(); err != nil {
		return err
	}
	if p.tok.kind != tMap {
		return errAt(p.tok.pos, "Unsupported top-level let", "Only a map declaration (let @name = hash(N);) is understood at the top level.")
	}
	name := p.tok.text
	if err := p.next(); err != nil {
		return err
	}
	if err := p.expect("="); err != nil {
		return err
	}
	x, err := p.expr()
	if err != nil {
		return err
	}
	call, ok := x.(*Call)
	var size *Num
	if ok && len(call.Args) == 1 {
		size, _ = call.Args[0].(*Num)
	}
	if size == nil {
		return errAt(x.At(), "Unsupported map declaration", "A map is declared here as hash(N) or lruhash(N), N a number.")
	}
	p.prog.MapDecls = append(p.prog.MapDecls, MapDecl{Pos: at, Name: name, Kind: call.Name, Size: size.Val})
	if p.is(";") {
		return p.next()
	}
	return nil
}

func (p *parser) config() error {
	if err := p.next(); err != nil {
		return err
	}
	if err := p.expect("="); err != nil {
		return err
	}
	if err := p.expect("{"); err != nil {
		return err
	}
	for !p.is("}") {
		if p.tok.kind != tIdent {
			return errAt(p.tok.pos, "Syntax error", "Expected a setting's name in config.")
		}
		item := ConfigItem{Pos: p.tok.pos, Name: p.tok.text}
		if err := p.next(); err != nil {
			return err
		}
		if err := p.expect("="); err != nil {
			return err
		}
		item.Value = p.tok.text
		if err := p.next(); err != nil {
			return err
		}
		p.prog.Config = append(p.prog.Config, item)
		if p.is(";") {
			if err := p.next(); err != nil {
				return err
			}
		}
	}
	return p.next()
}

func (p *parser) macro() error {
	m := &Macro{Pos: p.tok.pos}
	if err := p.next(); err != nil {
		return err
	}
	if p.tok.kind != tIdent {
		return errAt(p.tok.pos, "Syntax error", "Expected the macro's name.")
	}
	m.Name = p.tok.text
	if err := p.next(); err != nil {
		return err
	}
	if err := p.expect("("); err != nil {
		return err
	}
	for !p.is(")") {
		switch p.tok.kind {
		case tVar:
			m.Params = append(m.Params, "$"+p.tok.text)
		case tMap:
			m.Params = append(m.Params, "@"+p.tok.text)
		case tIdent:
			m.Params = append(m.Params, p.tok.text)
		default:
			return errAt(p.tok.pos, "Syntax error", "Expected a macro parameter ($x, @m or a name).")
		}
		if err := p.next(); err != nil {
			return err
		}
		if p.is(",") {
			if err := p.next(); err != nil {
				return err
			}
		}
	}
	if err := p.next(); err != nil {
		return err
	}
	body, err := p.block()
	if err != nil {
		return err
	}
	m.Body = body
	p.prog.Macros[m.Name] = m
	return nil
}

// block reads { statements }.
func (p *parser) block() ([]Stmt, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	var out []Stmt
	for !p.is("}") {
		if p.tok.kind == tEOF {
			return nil, errAt(p.tok.pos, "Syntax error", "A block has no closing }.")
		}
		if p.is(";") {
			if err := p.next(); err != nil {
				return nil, err
			}
			continue
		}
		s, err := p.stmt()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if !p.is("}") {
			if _, isIf := s.(*If); !isIf && !isLoop(s) {
				if _, skip := s.(*Unsupported); !skip {
					if err := p.expect(";"); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	p.closed = p.tok.pos.Off
	return out, p.next()
}

// skipBlock skips a construct up to and with its { block }.
func (p *parser) skipBlock() error {
	for !p.is("{") {
		if p.tok.kind == tEOF {
			return errAt(p.tok.pos, "Syntax error", "Expected a block.")
		}
		if err := p.next(); err != nil {
			return err
		}
	}
	_, err := p.block()
	return err
}

func (p *parser) stmt() (Stmt, error) {
	at := p.tok.pos
	if p.tok.kind == tIdent {
		switch p.tok.text {
		case "if":
			return p.ifStmt()
		case "return":
			if err := p.next(); err != nil {
				return nil, err
			}
			if !p.is(";") && !p.is("}") {
				return nil, errAt(at, "Unsupported return value", "A probe's return with a value has no equivalent.")
			}
			return &Return{Pos: at}, nil
		case "for":
			return p.forStmt()
		case "break", "continue":
			what := p.tok.text
			return &LoopJump{Pos: at, What: what}, p.next()
		case "unroll":
			return p.unrollStmt()
		case "while":
			what := p.tok.text
			if err := p.skipBlock(); err != nil {
				return nil, err
			}
			return &Unsupported{Pos: at, What: what + " loop"}, nil
		case "let":
			if err := p.next(); err != nil {
				return nil, err
			}
			if p.tok.kind != tVar {
				return nil, errAt(p.tok.pos, "Syntax error", "Expected a $variable after let.")
			}
			v := &Var{Pos: p.tok.pos, Name: p.tok.text}
			if err := p.next(); err != nil {
				return nil, err
			}
			if p.is(":") {
				return nil, errAt(p.tok.pos, "Unsupported typed variable", "let $x: TYPE has no equivalent; leave the type out.")
			}
			a := &Assign{Pos: at, LHS: v, Op: "=", Declared: true}
			if !p.is("=") {
				return a, nil
			}
			if err := p.next(); err != nil {
				return nil, err
			}
			rhs, err := p.expr()
			a.RHS = rhs
			return a, err
		}
	}
	x, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tPunct {
		switch op := p.tok.text; op {
		case "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=":
			if err := p.lvalue(x); err != nil {
				return nil, err
			}
			if err := p.next(); err != nil {
				return nil, err
			}
			rhs, err := p.expr()
			return &Assign{Pos: at, LHS: x, Op: op, RHS: rhs}, err
		case "++", "--":
			if err := p.lvalue(x); err != nil {
				return nil, err
			}
			return &Assign{Pos: at, LHS: x, Op: op}, p.next()
		}
	}
	if u, ok := x.(*Unary); ok && (u.Op == "++" || u.Op == "--") {
		if err := p.lvalue(u.X); err != nil {
			return nil, err
		}
		return &Assign{Pos: at, LHS: u.X, Op: u.Op}, nil
	}
	return &ExprStmt{X: x}, nil
}

func (p *parser) lvalue(x Expr) error {
	switch x.(type) {
	case *MapRef, *Var:
		return nil
	}
	return errAt(x.At(), "Unsupported assignment", "Only a @map, @map[key] or $variable can be assigned.")
}

func (p *parser) ifStmt() (Stmt, error) {
	s := &If{Pos: p.tok.pos}
	if err := p.next(); err != nil {
		return nil, err
	}
	c, err := p.expr()
	if err != nil {
		return nil, err
	}
	s.Cond = c
	if s.Then, err = p.block(); err != nil {
		return nil, err
	}
	if p.isWord("else") {
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.isWord("if") {
			in, err := p.ifStmt()
			if err != nil {
				return nil, err
			}
			s.Else = []Stmt{in}
		} else if s.Else, err = p.block(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// binary operators by precedence, lowest first (C's, as bpftrace has them).
var binaryLevels = [][]string{
	{"||"}, {"&&"}, {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", "<=", ">", ">="}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"},
}

func (p *parser) expr() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	c, err := p.binary(0)
	if err != nil || !p.is("?") {
		return c, err
	}
	at := p.tok.pos
	if err := p.next(); err != nil {
		return nil, err
	}
	t, err := p.expr()
	if err != nil {
		return nil, err
	}
	if err := p.expect(":"); err != nil {
		return nil, err
	}
	f, err := p.expr()
	return &Cond{Pos: at, C: c, T: t, F: f}, err
}

func (p *parser) binary(level int) (Expr, error) {
	if level == len(binaryLevels) {
		return p.unary()
	}
	x, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tPunct && contains(binaryLevels[level], p.tok.text) {
		if p.tok.text == "/" && p.noDiv > 0 {
			break
		}
		op, at := p.tok.text, p.tok.pos
		if err := p.next(); err != nil {
			return nil, err
		}
		y, err := p.binary(level + 1)
		if err != nil {
			return nil, err
		}
		x = &Binary{Pos: at, Op: op, X: x, Y: y}
	}
	return x, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (p *parser) unary() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if p.tok.kind == tPunct {
		switch op := p.tok.text; op {
		case "!", "~", "-", "+", "*", "&", "++", "--":
			at := p.tok.pos
			if err := p.next(); err != nil {
				return nil, err
			}
			x, err := p.unary()
			if err != nil {
				return nil, err
			}
			return &Unary{Pos: at, Op: op, X: x}, nil
		case "(":
			if t, ok, err := p.castType(); err != nil {
				return nil, err
			} else if ok {
				at := p.tok.pos
				x, err := p.unary()
				if err != nil {
					return nil, err
				}
				return &Cast{Pos: at, Type: t, X: x}, nil
			}
		}
	}
	return p.postfix()
}

var intTypes = map[string]bool{
	"int8": true, "int16": true, "int32": true, "int64": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true,
	"u8": true, "u16": true, "u32": true, "u64": true, "s8": true, "s16": true, "s32": true, "s64": true,
	"bool": true, "int": true, "long": true, "char": true, "unsigned": true, "short": true, "void": true, "__u8": true, "__u16": true, "__u32": true, "__u64": true,
}

// castType reads "(TYPE)" when the parenthesis starts a cast.
func (p *parser) castType() (string, bool, error) {
	save, saveTok := p.lx, p.tok
	saveLen := len(p.lx.comments)
	restore := func() {
		p.lx, p.tok = save, saveTok
		p.lx.comments = p.lx.comments[:saveLen]
	}
	if err := p.next(); err != nil {
		restore()
		return "", false, nil
	}
	if p.tok.kind != tIdent || !(intTypes[p.tok.text] || p.tok.text == "struct" || p.tok.text == "union" || p.tok.text == "enum") {
		restore()
		return "", false, nil
	}
	var words []string
	for p.tok.kind == tIdent || p.is("*") {
		words = append(words, p.tok.text)
		if err := p.next(); err != nil {
			restore()
			return "", false, nil
		}
	}
	if !p.is(")") {
		restore()
		return "", false, nil
	}
	t := strings.Join(words, " ")
	t = strings.ReplaceAll(t, " *", "*")
	return t, true, p.next()
}

func (p *parser) postfix() (Expr, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.is(".") || p.is("->"):
			at := p.tok.pos
			if err := p.next(); err != nil {
				return nil, err
			}
			if p.tok.kind != tIdent && p.tok.kind != tNum {
				return nil, errAt(p.tok.pos, "Syntax error", "Expected a field's name after . or ->.")
			}
			x = &Field{Pos: at, X: x, Name: p.tok.text}
			if err := p.next(); err != nil {
				return nil, err
			}
		case p.is("["):
			at := p.tok.pos
			if err := p.next(); err != nil {
				return nil, err
			}
			i, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			x = &Index{Pos: at, X: x, I: i}
		default:
			return x, nil
		}
	}
}

func (p *parser) primary() (Expr, error) {
	t := p.tok
	switch t.kind {
	case tNum:
		v, err := parseNum(t.text)
		if err != nil {
			return nil, errAt(t.pos, "Invalid number", err.Error())
		}
		return &Num{Pos: t.pos, Text: t.text, Val: v}, p.next()
	case tString:
		return &Str{Pos: t.pos, Val: t.text}, p.next()
	case tVar:
		return &Var{Pos: t.pos, Name: t.text}, p.next()
	case tMap:
		m := &MapRef{Pos: t.pos, Name: t.text}
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.is("[") {
			if err := p.next(); err != nil {
				return nil, err
			}
			keys, err := p.list("]")
			if err != nil {
				return nil, err
			}
			m.Keys = keys
		}
		return m, nil
	case tIdent:
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.is("(") {
			if err := p.next(); err != nil {
				return nil, err
			}
			args, err := p.list(")")
			return &Call{Pos: t.pos, Name: t.text, Args: args}, err
		}
		// probe kinds in an expression: sizeof(struct x) etc. are calls.
		return &Ident{Pos: t.pos, Name: t.text}, nil
	case tPunct:
		if t.text == "(" {
			if err := p.next(); err != nil {
				return nil, err
			}
			elems, err := p.list(")")
			if err != nil {
				return nil, err
			}
			if len(elems) == 1 {
				return elems[0], nil
			}
			return &Tuple{Pos: t.pos, Elems: elems}, nil
		}
	}
	return nil, errAt(t.pos, "Syntax error", fmt.Sprintf("Expected an expression, found %s.", p.describe()))
}

// list reads expressions separated by commas up to end (consumed).
func (p *parser) list(end string) ([]Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	saved := p.noDiv
	p.noDiv = 0
	defer func() { p.noDiv = saved }()
	var out []Expr
	for !p.is(end) {
		// struct NAME in sizeof(struct x), offsetof(struct x, f).
		if p.isWord("struct") || p.isWord("union") {
			at := p.tok.pos
			words := []string{p.tok.text}
			if err := p.next(); err != nil {
				return nil, err
			}
			for p.tok.kind == tIdent || p.is("*") {
				words = append(words, p.tok.text)
				if err := p.next(); err != nil {
					return nil, err
				}
			}
			out = append(out, &Ident{Pos: at, Name: strings.Join(words, " ")})
		} else {
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		if p.is(",") {
			if err := p.next(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.is(end) {
			return nil, errAt(p.tok.pos, "Syntax error", fmt.Sprintf("Expected \",\" or %q, found %s.", end, p.describe()))
		}
	}
	return out, p.next()
}

// parseNum reads 12, 0x1f, 0b101, 1_000, 1e6 and unit suffixes (1s is not a number).
func parseNum(s string) (int64, error) {
	clean := strings.ReplaceAll(s, "_", "")
	if i := strings.IndexAny(clean, "eE"); i > 0 && !strings.HasPrefix(clean, "0x") && !strings.HasPrefix(clean, "0X") {
		m, err1 := strconv.ParseInt(clean[:i], 10, 64)
		e, err2 := strconv.Atoi(clean[i+1:])
		if err1 != nil || err2 != nil || e < 0 || e > 18 {
			return 0, fmt.Errorf("%s is not an integer", s)
		}
		v := float64(m) * math.Pow10(e)
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("%s is larger than 64 bits", s)
		}
		return m * int64(math.Pow10(e)), nil
	}
	clean = strings.TrimRight(strings.ToLower(clean), "ul")
	u, err := strconv.ParseUint(clean, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer bpftrace takes", s)
	}
	return int64(u), nil
}
