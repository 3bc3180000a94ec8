package bpftrace

// The syntax tree of a bpftrace program. Every node keeps its place in
// the .bt file.

// Program is a parsed .bt file.
type Program struct {
	Header   []string          // the comments before the first item, without the #! line
	Defines  map[string]string // #define NAME VALUE, on a kernel with BTF
	Config   []ConfigItem
	Macros   map[string]*Macro
	MapDecls []MapDecl
	Probes   []*Probe
}

// ConfigItem is one setting of config = { ... }.
type ConfigItem struct {
	Pos         Pos
	Name, Value string
}

// MapDecl is let @name = KIND(SIZE); at the top level.
type MapDecl struct {
	Pos  Pos
	Name string
	Kind string // hash, lruhash, percpuhash, ...
	Size int64
}

// Macro is macro NAME(PARAMS) { BODY }: expanded where it is used.
type Macro struct {
	Pos    Pos
	Name   string
	Params []string // "$x", "@m" or "x"
	Body   []Stmt
}

// Probe is one probe: its attach points, its filter and its block.
type Probe struct {
	Pos      Pos
	Attach   []Attach
	Filter   Expr // nil without a /filter/
	Body     []Stmt
	Comments []string // the comments before it and in it, in order
}

// Attach is one attach point as written (kprobe:vfs_read).
type Attach struct {
	Pos  Pos
	Text string
}

// Stmt is a statement.
type Stmt interface{ At() Pos }

// Expr is an expression.
type Expr interface{ At() Pos }

type (
	// ExprStmt is an expression as a statement (a call).
	ExprStmt struct{ X Expr }
	// Assign is LHS OP RHS: OP is "=", "+=", ..., or "++" / "--" without RHS.
	Assign struct {
		Pos      Pos
		LHS      Expr // *MapRef or *Var
		Op       string
		RHS      Expr
		Declared bool // let $x = ...
	}
	// If is if (Cond) { Then } else { Else }.
	If struct {
		Pos        Pos
		Cond       Expr
		Then, Else []Stmt
	}
	// Return is return;
	Return struct{ Pos Pos }
	// Unsupported is a statement the importer has no equivalent for,
	// parsed only to say so (for, while, unroll, break, continue).
	Unsupported struct {
		Pos  Pos
		What string
	}
)

type (
	// Ident is a built-in name, a constant, or a macro used bare.
	Ident struct {
		Pos  Pos
		Name string
	}
	// Var is $name, or $1 (a positional parameter).
	Var struct {
		Pos  Pos
		Name string
	}
	// MapRef is @name or @name[keys].
	MapRef struct {
		Pos  Pos
		Name string
		Keys []Expr
	}
	// Num is an integer literal.
	Num struct {
		Pos  Pos
		Text string
		Val  int64
	}
	// Str is a string literal.
	Str struct {
		Pos Pos
		Val string
	}
	// Unary is OP X.
	Unary struct {
		Pos Pos
		Op  string
		X   Expr
	}
	// Binary is X OP Y.
	Binary struct {
		Pos  Pos
		Op   string
		X, Y Expr
	}
	// Cond is C ? T : F.
	Cond struct {
		Pos     Pos
		C, T, F Expr
	}
	// Call is NAME(ARGS).
	Call struct {
		Pos  Pos
		Name string
		Args []Expr
	}
	// Field is X.NAME or X->NAME.
	Field struct {
		Pos  Pos
		X    Expr
		Name string
	}
	// Index is X[I].
	Index struct {
		Pos  Pos
		X, I Expr
	}
	// Cast is (TYPE)X.
	Cast struct {
		Pos  Pos
		Type string // "uint32", "struct sock *"
		X    Expr
	}
	// Tuple is (A, B, ...).
	Tuple struct {
		Pos   Pos
		Elems []Expr
	}
)

func (s *ExprStmt) At() Pos    { return s.X.At() }
func (s *Assign) At() Pos      { return s.Pos }
func (s *If) At() Pos          { return s.Pos }
func (s *Return) At() Pos      { return s.Pos }
func (s *Unsupported) At() Pos { return s.Pos }
func (e *Ident) At() Pos       { return e.Pos }
func (e *Var) At() Pos         { return e.Pos }
func (e *MapRef) At() Pos      { return e.Pos }
func (e *Num) At() Pos         { return e.Pos }
func (e *Str) At() Pos         { return e.Pos }
func (e *Unary) At() Pos       { return e.Pos }
func (e *Binary) At() Pos      { return e.Pos }
func (e *Cond) At() Pos        { return e.Pos }
func (e *Call) At() Pos        { return e.Pos }
func (e *Field) At() Pos       { return e.Pos }
func (e *Index) At() Pos       { return e.Pos }
func (e *Cast) At() Pos        { return e.Pos }
func (e *Tuple) At() Pos       { return e.Pos }
